"""lightningstore: the data, queue, server and gateway of LightningRL."""

from lightningstore.attempt import Attempt, AttemptedRollout
from lightningstore.batch_read import rewards_of_rollouts, spans_of_rollouts
from lightningstore.errors import (
    ConflictError,
    IllegalTransitionError,
    InvalidInputError,
    NotFoundError,
    PermissionDeniedError,
    StoreError,
)
from lightningstore.lazy_exports import lazy_exports
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
from lightningstore.store import MAX_READ_IDS, LightningStore
from lightningstore.unset import UNSET
from lightningstore.worker import Worker

# Imported only when asked for: SqlStore pulls in SQLAlchemy, StoreClient httpx.
__getattr__ = lazy_exports(
    __name__,
    {
        "SqlStore": "lightningstore.sql",
        "StoreClient": "lightningstore.client",
        "open_store": "lightningstore.open",
    },
)


__all__ = [
    "LLM",
    "MAX_READ_IDS",
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
    "StoreClient",
    "StoreError",
    "StoreStatistics",
    "Worker",
    "WorkerStatus",
    "open_store",
    "rewards_of_rollouts",
    "spans_of_rollouts",
]
