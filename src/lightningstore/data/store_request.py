"""The one-argument requests of the contract's long keyword methods.

LightningStore writes each keyword signature once (with its docstring, the contract) and hands its
arguments, as given, to one abstract `_method(request)` that every backend implements: SqlStore's
parts and StoreClient read the fields instead of repeating the signature. The values are not
checked here; each backend checks them as the contract says.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from lightningstore.data.resource import Resource
from lightningstore.data.reward import RewardIn
from lightningstore.data.rollout import RolloutConfig
from lightningstore.data.span import SpanIn
from lightningstore.data.status import AttemptStatus, RolloutMode, RolloutStatus, WorkerStatus
from lightningstore.data.unset import UNSET, Unset

RolloutSortKey = Literal["enqueue_time", "start_time", "end_time", "rollout_id", "status"]
PointerName = Literal["latest", "approved"]


def given(**fields: Any) -> dict[str, Any]:
    """The fields that were given (not UNSET), in order."""
    return {key: value for key, value in fields.items() if value is not UNSET}


@dataclass(frozen=True, slots=True)
class AttemptUpdate:
    """`update_attempt`'s arguments."""

    rollout_id: str
    attempt_id: str
    status: AttemptStatus | str | Unset
    failure_reason: str | None | Unset
    worker_id: str | None | Unset
    metadata: dict[str, Any] | Unset

    def changes(self) -> dict[str, Any]:
        """The fields to change (those given), status included."""
        return given(
            status=self.status,
            failure_reason=self.failure_reason,
            worker_id=self.worker_id,
            metadata=self.metadata,
        )


@dataclass(frozen=True, slots=True)
class AttemptFinish:
    """`finish_attempt`'s arguments."""

    rollout_id: str
    attempt_id: str
    status: AttemptStatus | str
    failure_reason: str | None
    spans: Sequence[SpanIn]
    rewards: Sequence[RewardIn]


@dataclass(frozen=True, slots=True)
class RolloutUpdate:
    """`update_rollout`'s arguments."""

    rollout_id: str
    status: RolloutStatus | str | Unset
    metadata: dict[str, Any] | Unset
    config: RolloutConfig | Unset
    resources_id: str | None | Unset

    def changes(self) -> dict[str, Any]:
        """The fields to change (those given), status included."""
        return given(
            status=self.status, metadata=self.metadata, config=self.config, resources_id=self.resources_id
        )


@dataclass(frozen=True, slots=True)
class RolloutQuery:
    """`query_rollouts`' filters, order and page."""

    status: Sequence[RolloutStatus | str] | None
    mode: RolloutMode | str | None
    rollout_ids: Sequence[str] | None
    group_id: str | None
    sort_by: RolloutSortKey
    descending: bool
    limit: int | None
    offset: int


@dataclass(frozen=True, slots=True)
class SpanQuery:
    """`query_spans`' rollout, attempt, filters and page."""

    rollout_id: str
    attempt_id: str | None
    name: str | None
    after_sequence_id: int | None
    limit: int | None


@dataclass(frozen=True, slots=True)
class SpansManyQuery:
    """`query_spans_many`'s rollouts, attempt choice and projection."""

    rollout_ids: Sequence[str]
    attempt: Literal["latest"] | None
    attributes: Sequence[str] | None


@dataclass(frozen=True, slots=True)
class VersionRequest:
    """`add_resource_version`'s arguments (and each version `add_resources` publishes)."""

    name: str
    resource: Resource
    parent_id: str | None
    created_by: str
    artifact: str | None
    metadata: dict[str, Any] | None
    version_id: str | None


@dataclass(frozen=True, slots=True)
class ResourcesRequest:
    """`add_resources`' arguments."""

    resources: dict[str, Resource]
    created_by: str
    parents: dict[str, str] | None


@dataclass(frozen=True, slots=True)
class PointerMoveRequest:
    """`move_pointer`'s arguments."""

    name: str
    pointer: PointerName
    version_id: str
    actor: str
    reason: str


@dataclass(frozen=True, slots=True)
class WorkerUpdate:
    """`update_worker`'s arguments."""

    worker_id: str
    status: WorkerStatus | str | Unset
    metadata: dict[str, Any] | Unset

    def changes(self) -> dict[str, Any]:
        """The fields to change (those given)."""
        return given(status=self.status, metadata=self.metadata)
