"""lightningstore: the data, queue, server and gateway of LightningRL."""

from lightningstore.attempt import Attempt, AttemptedRollout
from lightningstore.errors import (
    ConflictError,
    IllegalTransitionError,
    InvalidInputError,
    NotFoundError,
    PermissionDeniedError,
    StoreError,
)
from lightningstore.resource import (
    LLM,
    Pointer,
    PointerMove,
    PromptTemplate,
    Resource,
    ResourceSet,
    ResourceVersion,
)
from lightningstore.reward import Reward, RewardIn
from lightningstore.rollout import Rollout, RolloutConfig, RolloutRequest
from lightningstore.span import Span, SpanEvent, SpanIn, SpanStatus
from lightningstore.statistics import StoreStatistics
from lightningstore.status import AttemptStatus, RolloutMode, RolloutStatus, WorkerStatus
from lightningstore.store import LightningStore
from lightningstore.unset import UNSET
from lightningstore.worker import Worker


def __getattr__(name: str):
    # SqlStore pulls in SQLAlchemy; import it only when asked for.
    if name == "SqlStore":
        from lightningstore.sql import SqlStore

        return SqlStore
    raise AttributeError(name)


__all__ = [
    "LLM",
    "UNSET",
    "Attempt",
    "AttemptStatus",
    "AttemptedRollout",
    "ConflictError",
    "IllegalTransitionError",
    "InvalidInputError",
    "LightningStore",
    "NotFoundError",
    "PermissionDeniedError",
    "Pointer",
    "PointerMove",
    "PromptTemplate",
    "Resource",
    "ResourceSet",
    "ResourceVersion",
    "Reward",
    "RewardIn",
    "Rollout",
    "RolloutConfig",
    "RolloutMode",
    "RolloutRequest",
    "RolloutStatus",
    "Span",
    "SpanEvent",
    "SpanIn",
    "SpanStatus",
    "SqlStore",
    "StoreError",
    "StoreStatistics",
    "Worker",
    "WorkerStatus",
]
