"""The HTTP API's shapes, shared by StoreClient and the server: its paths (`StorePaths`), request and
response bodies (the store's own models are used where they fit) and how an id goes into a path.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field

from lightningstore.data.resource import Pointer, Resource
from lightningstore.data.reward import RewardIn
from lightningstore.data.rollout import RolloutConfig
from lightningstore.data.span import SpanIn
from lightningstore.data.status import AttemptStatus, RolloutMode, RolloutStatus, WorkerStatus
from lightningstore.store import MAX_CLAIM_WAIT_SECONDS, MAX_READ_ATTRIBUTES, MAX_READ_IDS

MAX_INT = 2**62
IdStr = Annotated[str, Field(min_length=1, max_length=200)]


def path_segment(value: str) -> str:
    """One path segment: every reserved character (including '/') percent-encoded."""
    return quote(value, safe="")


class StorePaths:
    """Every path of the store API, once: the client fills them (`filled`), the server's route table
    registers them (`route_path`). `{name}` is one id, a single path segment."""

    HEALTHZ = "/healthz"
    ROLLOUTS = "/v1/rollouts"
    DEQUEUE = ROLLOUTS + "/dequeue"
    START = ROLLOUTS + "/start"
    QUERY_ROLLOUTS = ROLLOUTS + "/query"
    WAIT = ROLLOUTS + "/wait"
    ROLLOUT = ROLLOUTS + "/{rollout_id}"
    CANCEL = ROLLOUT + "/cancel"
    ROLLOUT_SPANS = ROLLOUT + "/spans"
    ROLLOUT_REWARDS = ROLLOUT + "/rewards"
    ATTEMPTS = ROLLOUT + "/attempts"
    LATEST_ATTEMPT = ATTEMPTS + "/latest"
    ATTEMPT = ATTEMPTS + "/{attempt_id}"
    HEARTBEAT = ATTEMPT + "/heartbeat"
    FINISH = ATTEMPT + "/finish"
    AGENT_KEY = ATTEMPT + "/agent-key"
    SPANS = "/v1/spans"
    QUERY_SPANS = SPANS + "/query"
    REWARDS = "/v1/rewards"
    QUERY_REWARDS = REWARDS + "/query"
    WORKERS = "/v1/workers"
    WORKER = WORKERS + "/{worker_id}"
    STATISTICS = "/v1/statistics"
    SWEEP = "/v1/watchdog/sweep"
    RESOURCE_VERSIONS = "/v1/resource-versions"
    RESOURCE_VERSION = RESOURCE_VERSIONS + "/{version_id}"
    RESOURCES = "/v1/resources"
    RESOURCE_SETS = "/v1/resource-sets"
    LATEST_RESOURCE_SET = RESOURCE_SETS + "/latest"
    RESOURCE_SET = RESOURCE_SETS + "/{resources_id}"
    POINTERS = "/v1/pointers"
    POINTER_HISTORY = "/v1/pointer-history"
    TRACES = "/v1/traces"


def filled(template: str, **ids: str) -> str:
    """A `StorePaths` template with each id percent-encoded into its segment."""
    return template.format(**{name: path_segment(value) for name, value in ids.items()})


def route_path(template: str) -> str:
    """A `StorePaths` template as the server registers it: each `{name}` through the `id` convertor."""
    return re.sub(r"\{(\w+)\}", r"{\1:id}", template)


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class DequeueBody(Body):
    limit: int = Field(default=1, ge=1, le=10_000)
    worker_id: str | None = Field(default=None, max_length=200)
    wait: float = Field(default=0, ge=0, le=MAX_CLAIM_WAIT_SECONDS)
    """Seconds to wait for a rollout to be queued when none is waiting (`dequeue_rollout`'s `wait`)."""


class WorkerRef(Body):
    worker_id: str | None = Field(default=None, max_length=200)


class StartRolloutBody(Body):
    input: Any = None
    mode: RolloutMode = RolloutMode.TRAIN
    resources_id: str | None = None
    config: RolloutConfig | None = None
    metadata: dict[str, Any] | None = None
    group_id: str | None = Field(default=None, max_length=200)
    worker_id: str | None = Field(default=None, max_length=200)


class UpdateAttemptBody(Body):
    """Only the fields present in the body change (absent = UNSET)."""

    status: AttemptStatus | None = None
    failure_reason: str | None = None
    worker_id: str | None = Field(default=None, max_length=200)
    metadata: dict[str, Any] | None = None


class FinishAttemptBody(Body):
    """`finish_attempt`: the ending, and the attempt's last spans and rewards."""

    status: AttemptStatus
    failure_reason: str | None = None
    spans: list[SpanIn] = Field(default_factory=list, max_length=100_000)
    rewards: list[RewardIn] = Field(default_factory=list, max_length=10_000)


class UpdateRolloutBody(Body):
    """Only the fields present in the body change (absent = UNSET)."""

    status: RolloutStatus | None = None
    metadata: dict[str, Any] | None = None
    config: RolloutConfig | None = None
    resources_id: str | None = None


class WaitBody(Body):
    rollout_ids: list[str] = Field(max_length=100_000)
    timeout: float | None = Field(default=None, description="seconds; the server waits at most 30 per call")


class QueryRolloutsBody(Body):
    status: list[RolloutStatus] | None = None
    mode: RolloutMode | None = None
    rollout_ids: list[str] | None = Field(default=None, max_length=100_000)
    group_id: str | None = None
    sort_by: Literal["enqueue_time", "start_time", "end_time", "rollout_id", "status"] = "enqueue_time"
    descending: bool = False
    limit: int | None = Field(default=None, ge=0, le=MAX_INT)
    offset: int = Field(default=0, ge=0, le=MAX_INT)


class AddVersionBody(Body):
    name: IdStr
    resource: Resource
    parent_id: str | None = None
    created_by: str = "unknown"
    artifact: str | None = None
    metadata: dict[str, Any] | None = None
    version_id: str | None = Field(default=None, min_length=1, max_length=200)


class AddResourcesBody(Body):
    resources: dict[str, Resource] = Field(min_length=1)
    created_by: str = "unknown"
    parents: dict[str, str] | None = None


class ResourceSetBody(Body):
    versions: dict[str, str] = Field(min_length=1)


class MovePointerBody(Body):
    name: IdStr
    pointer: Pointer
    version_id: IdStr
    actor: str = Field(min_length=1, max_length=200)
    reason: str = ""


class WorkerBody(Body):
    """Only the fields present in the body change (absent = UNSET)."""

    status: WorkerStatus | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class SweepBody(Body):
    now: float | None = None


class AgentKey(BaseModel):
    agent_key: str


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class ErrorBody(BaseModel):
    """Every 4xx/5xx answer: `code` names the error class (lightningstore.errors.ERRORS_BY_CODE)."""

    code: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class OtlpAccepted(BaseModel):
    """OTLP JSON answer (ExportTraceServiceResponse); protobuf requests get the protobuf form."""

    partialSuccess: dict[str, Any] = Field(default_factory=dict)  # noqa: N815 - OTLP field name


class SpansManyBody(Body):
    """`query_spans_many`: its limits are checked again by the store (InvalidInputError)."""

    rollout_ids: list[str] = Field(max_length=MAX_READ_IDS)
    attempt: Literal["latest"] | None = "latest"
    attributes: list[str] | None = Field(default=None, max_length=MAX_READ_ATTRIBUTES)


class RewardsManyBody(Body):
    rollout_ids: list[str] = Field(max_length=MAX_READ_IDS)
