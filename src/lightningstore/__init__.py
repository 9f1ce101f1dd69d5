"""lightningstore: the data, queue, server and gateway of LightningRL.

Every name is imported on first use (PEP 562, `lazy_exports`): importing one light submodule (an agent's
`emit_reward` reads `semconv`) never loads pydantic models, SQLAlchemy or httpx.
"""

from typing import TYPE_CHECKING

from lightningstore.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from lightningstore.batch_read import rewards_of_rollouts, spans_of_rollouts
    from lightningstore.client.store_client import StoreClient
    from lightningstore.data.attempt import Attempt, AttemptedRollout
    from lightningstore.data.resource import (
        LLM,
        Pointer,
        PointerMove,
        PromptTemplate,
        Resource,
        ResourceSet,
        ResourceVersion,
    )
    from lightningstore.data.reward import Reward, RewardIn
    from lightningstore.data.rollout import Rollout, RolloutConfig, RolloutRequest
    from lightningstore.data.span import Span, SpanEvent, SpanIn, SpanStatus
    from lightningstore.data.statistics import StoreStatistics
    from lightningstore.data.status import AttemptStatus, RolloutMode, RolloutStatus, WorkerStatus
    from lightningstore.data.unset import UNSET
    from lightningstore.data.worker import Worker
    from lightningstore.errors import (
        ConflictError,
        IllegalTransitionError,
        InvalidInputError,
        NotFoundError,
        PermissionDeniedError,
        StoreError,
    )
    from lightningstore.open import open_store
    from lightningstore.sql import SqlStore
    from lightningstore.store import MAX_READ_IDS, LightningStore

__getattr__ = lazy_exports(
    __name__,
    {
        "Attempt": "lightningstore.data.attempt",
        "AttemptStatus": "lightningstore.data.status",
        "AttemptedRollout": "lightningstore.data.attempt",
        "ConflictError": "lightningstore.errors",
        "IllegalTransitionError": "lightningstore.errors",
        "InvalidInputError": "lightningstore.errors",
        "LLM": "lightningstore.data.resource",
        "LightningStore": "lightningstore.store",
        "MAX_READ_IDS": "lightningstore.store",
        "NotFoundError": "lightningstore.errors",
        "PermissionDeniedError": "lightningstore.errors",
        "Pointer": "lightningstore.data.resource",
        "PointerMove": "lightningstore.data.resource",
        "PromptTemplate": "lightningstore.data.resource",
        "Resource": "lightningstore.data.resource",
        "ResourceSet": "lightningstore.data.resource",
        "ResourceVersion": "lightningstore.data.resource",
        "Reward": "lightningstore.data.reward",
        "RewardIn": "lightningstore.data.reward",
        "Rollout": "lightningstore.data.rollout",
        "RolloutConfig": "lightningstore.data.rollout",
        "RolloutMode": "lightningstore.data.status",
        "RolloutRequest": "lightningstore.data.rollout",
        "RolloutStatus": "lightningstore.data.status",
        "Span": "lightningstore.data.span",
        "SpanEvent": "lightningstore.data.span",
        "SpanIn": "lightningstore.data.span",
        "SpanStatus": "lightningstore.data.span",
        "SqlStore": "lightningstore.sql",
        "StoreClient": "lightningstore.client.store_client",
        "StoreError": "lightningstore.errors",
        "StoreStatistics": "lightningstore.data.statistics",
        "UNSET": "lightningstore.data.unset",
        "Worker": "lightningstore.data.worker",
        "WorkerStatus": "lightningstore.data.status",
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
