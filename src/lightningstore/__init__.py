"""lightningstore: the data, queue, server and gateway of LightningRL.

Every name is imported on first use (PEP 562, `lazy_exports`): importing one light submodule (an agent's
`emit_reward` reads `semconv`) never loads pydantic models, SQLAlchemy or httpx.
"""

from typing import TYPE_CHECKING

from lightningstore.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from lightningstore.attempt import Attempt, AttemptedRollout
    from lightningstore.batch_read import rewards_of_rollouts, spans_of_rollouts
    from lightningstore.client import StoreClient
    from lightningstore.errors import (
        ConflictError,
        IllegalTransitionError,
        InvalidInputError,
        NotFoundError,
        PermissionDeniedError,
        StoreError,
    )
    from lightningstore.open import open_store
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
    from lightningstore.sql import SqlStore
    from lightningstore.statistics import StoreStatistics
    from lightningstore.status import AttemptStatus, RolloutMode, RolloutStatus, WorkerStatus
    from lightningstore.store import MAX_READ_IDS, LightningStore
    from lightningstore.unset import UNSET
    from lightningstore.worker import Worker

__getattr__ = lazy_exports(
    __name__,
    {
        "Attempt": "lightningstore.attempt",
        "AttemptStatus": "lightningstore.status",
        "AttemptedRollout": "lightningstore.attempt",
        "ConflictError": "lightningstore.errors",
        "IllegalTransitionError": "lightningstore.errors",
        "InvalidInputError": "lightningstore.errors",
        "LLM": "lightningstore.resource",
        "LightningStore": "lightningstore.store",
        "MAX_READ_IDS": "lightningstore.store",
        "NotFoundError": "lightningstore.errors",
        "PermissionDeniedError": "lightningstore.errors",
        "Pointer": "lightningstore.resource",
        "PointerMove": "lightningstore.resource",
        "PromptTemplate": "lightningstore.resource",
        "Resource": "lightningstore.resource",
        "ResourceSet": "lightningstore.resource",
        "ResourceVersion": "lightningstore.resource",
        "Reward": "lightningstore.reward",
        "RewardIn": "lightningstore.reward",
        "Rollout": "lightningstore.rollout",
        "RolloutConfig": "lightningstore.rollout",
        "RolloutMode": "lightningstore.status",
        "RolloutRequest": "lightningstore.rollout",
        "RolloutStatus": "lightningstore.status",
        "Span": "lightningstore.span",
        "SpanEvent": "lightningstore.span",
        "SpanIn": "lightningstore.span",
        "SpanStatus": "lightningstore.span",
        "SqlStore": "lightningstore.sql",
        "StoreClient": "lightningstore.client",
        "StoreError": "lightningstore.errors",
        "StoreStatistics": "lightningstore.statistics",
        "UNSET": "lightningstore.unset",
        "Worker": "lightningstore.worker",
        "WorkerStatus": "lightningstore.status",
        "open_store": "lightningstore.open",
        "rewards_of_rollouts": "lightningstore.batch_read",
        "spans_of_rollouts": "lightningstore.batch_read",
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
