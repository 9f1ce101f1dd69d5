"""The LightningStore contract. These docstrings ARE the spec every implementation follows.

Conventions for every method:
- Times are float seconds since the epoch, taken from the store's clock.
- An id that names nothing raises `NotFoundError` (never returns a half result), except the
  `get_*` lookups documented to return None and the span and reward queries, which answer [].
- A status change the state machine (lightningstore.data.status) forbids raises
  `IllegalTransitionError` and changes nothing.
- Invalid arguments raise `InvalidInputError` naming the field; nothing stored changes. JSON
  values stored as given (a rollout's input, metadata, resources) may not hold what JSON cannot
  write exactly: NaN, an infinity, or an integer beyond 64 bits (lightningstore.json_writer).
- Every call that writes several rows writes all of them or none.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Literal, Unpack

from lightningstore.data.attempt import Attempt, AttemptedRollout
from lightningstore.data.resource import PointerMove, Resource, ResourceSet, ResourceVersion
from lightningstore.data.reward import Reward, RewardIn
from lightningstore.data.rollout import Rollout, RolloutConfig, RolloutOptions, RolloutRequest
from lightningstore.data.span import Span, SpanIn
from lightningstore.data.statistics import StoreStatistics
from lightningstore.data.status import AttemptStatus, RolloutMode, RolloutStatus, WorkerStatus
from lightningstore.data.store_request import (
    AttemptFinish,
    AttemptUpdate,
    PointerMoveRequest,
    ResourcesRequest,
    RolloutQuery,
    RolloutSortKey,
    RolloutUpdate,
    SpanQuery,
    SpansManyQuery,
    VersionRequest,
    WorkerUpdate,
)
from lightningstore.data.unset import UNSET, Unset
from lightningstore.data.worker import Worker
from lightningstore.errors import InvalidInputError

__all__ = ["MAX_READ_ATTRIBUTES", "MAX_READ_IDS", "LightningStore", "RolloutSortKey"]

MAX_READ_IDS = 1000
"""The most rollout ids one `query_spans_many` or `query_rewards_many` call takes (duplicates count)."""
MAX_READ_ATTRIBUTES = 32
"""The most attribute keys one `query_spans_many` projection names."""


MAX_CLAIM_WAIT_SECONDS = 30.0
"""The longest a claim may wait for a rollout to be queued (`dequeue_rollout(wait=...)`)."""


def check_claim_wait(wait: float) -> None:
    """InvalidInputError unless `wait` is a finite number of seconds in [0, MAX_CLAIM_WAIT_SECONDS]."""
    if isinstance(wait, bool) or not (isinstance(wait, int | float) and 0 <= wait <= MAX_CLAIM_WAIT_SECONDS):
        raise InvalidInputError("wait", f"must be seconds in [0, {MAX_CLAIM_WAIT_SECONDS:g}], got {wait!r}")


class LightningStore(ABC):
    """Durable home of rollouts, attempts, spans, rewards, resources and workers."""

    # ---- rollouts: enqueue and claim ------------------------------------------------------

    async def enqueue_rollout(
        self, input: Any, *, rollout_id: str | None = None, **options: Unpack[RolloutOptions]
    ) -> Rollout:
        """Queue one rollout (status `queuing`) and return it.

        `rollout_id`, when given, makes the call idempotent: enqueueing the same id again returns
        the stored rollout unchanged (ConflictError if its input differs). `resources_id`, when
        given, must name a stored resource set (NotFoundError otherwise).
        `options` are `mode` (default `train`), `resources_id`, `config`, `metadata` and `group_id`
        (lightningstore.data.rollout.RolloutOptions).
        """
        (rollout,) = await self.enqueue_many_rollouts(
            [RolloutRequest.of(input, rollout_id=rollout_id, **options)]
        )
        return rollout

    @abstractmethod
    async def enqueue_many_rollouts(self, requests: Sequence[RolloutRequest]) -> list[Rollout]:
        """Queue many rollouts in one transaction, in order; same rules as `enqueue_rollout`.

        If any request is invalid nothing is queued.
        """

    async def dequeue_rollout(
        self, worker_id: str | None = None, *, wait: float = 0
    ) -> AttemptedRollout | None:
        """Atomically claim the oldest `queuing` or `requeuing` rollout, or return None.

        The claim moves the rollout to `preparing` and opens a new attempt (`preparing`) bound to
        `worker_id`. Two concurrent callers never claim the same rollout. With `wait` > 0 seconds
        (at most MAX_CLAIM_WAIT_SECONDS; InvalidInputError otherwise), a caller that finds none
        waits up to `wait` for one to be queued or requeued and claims it then, instead of polling.
        """
        claimed = await self.dequeue_many_rollouts(1, worker_id=worker_id, wait=wait)
        return claimed[0] if claimed else None

    @abstractmethod
    async def dequeue_many_rollouts(
        self, limit: int, *, worker_id: str | None = None, wait: float = 0
    ) -> list[AttemptedRollout]:
        """Claim up to `limit` rollouts at once, oldest first; the rules of `dequeue_rollout` (a
        waiting call returns as soon as it has claimed at least one)."""

    async def start_rollout(
        self, input: Any, *, worker_id: str | None = None, **options: Unpack[RolloutOptions]
    ) -> AttemptedRollout:
        """Create a rollout and claim it at once (no queue): it starts in `preparing` with attempt 1.

        The arguments follow `enqueue_rollout`'s rules; `worker_id` is the claim's, as in `start_attempt`.
        """
        return await self._start_rollout(RolloutRequest.of(input, rollout_id=None, **options), worker_id)

    async def _start_rollout(self, request: RolloutRequest, worker_id: str | None) -> AttemptedRollout:
        """`start_rollout` of a checked request: enqueue, then claim (a backend may do both at once)."""
        (rollout,) = await self.enqueue_many_rollouts([request])
        return await self.start_attempt(rollout.rollout_id, worker_id=worker_id)

    @abstractmethod
    async def start_attempt(self, rollout_id: str, *, worker_id: str | None = None) -> AttemptedRollout:
        """Open a new attempt of a rollout waiting in `queuing` or `requeuing` (a manual claim).

        IllegalTransitionError if the rollout is not waiting; ConflictError if it has used
        `config.max_attempts` attempts.
        """

    # ---- attempts and rollouts: progress ---------------------------------------------------

    @abstractmethod
    async def heartbeat(self, rollout_id: str, attempt_id: str, *, worker_id: str | None = None) -> Attempt:
        """Record that the attempt is alive. Moves `preparing` -> `running` (rollout too) and
        revives an `unresponsive` attempt that is still its rollout's current one.

        IllegalTransitionError if the attempt has ended (succeeded, failed, timeout).
        """

    async def update_attempt(
        self,
        rollout_id: str,
        attempt_id: str | Literal["latest"],
        *,
        status: AttemptStatus | str | Unset = UNSET,
        failure_reason: str | None | Unset = UNSET,
        worker_id: str | None | Unset = UNSET,
        metadata: dict[str, Any] | Unset = UNSET,
    ) -> Attempt:
        """Change an attempt; only the given fields change.

        Ending the rollout's current attempt moves the rollout with it: `succeeded` -> rollout
        `succeeded`; a failure kind (failed, timeout, unresponsive) -> rollout `requeuing` if the
        kind is in `config.retry_on` and attempts remain, else rollout `failed` with the reason.
        Ending an attempt that is no longer current changes only that attempt.
        """
        return await self._update_attempt(
            AttemptUpdate(rollout_id, attempt_id, status, failure_reason, worker_id, metadata)
        )

    @abstractmethod
    async def _update_attempt(self, update: AttemptUpdate) -> Attempt:
        """`update_attempt`."""

    async def finish_attempt(
        self,
        rollout_id: str,
        attempt_id: str,
        *,
        status: AttemptStatus | str,
        failure_reason: str | None = None,
        spans: Sequence[SpanIn] = (),
        rewards: Sequence[RewardIn] = (),
    ) -> Attempt:
        """Store an attempt's last spans and rewards and end it, in one transaction (one request).

        `status` must end the attempt (succeeded, failed, timeout; else InvalidInputError). Spans and
        rewards follow the rules of `add_many_spans` and `add_reward` and must belong to this attempt
        (InvalidInputError; a reward without `attempt_id` gets this one); the ending then follows
        `update_attempt`. Finishing again with the same status changes nothing and returns the
        attempt (a retried request). If the attempt has already ended otherwise, the spans and
        rewards are still stored (late telemetry stays with its attempt) and IllegalTransitionError
        is raised; NotFoundError (nothing stored) if the attempt does not exist.
        """
        return await self._finish_attempt(
            AttemptFinish(rollout_id, attempt_id, status, failure_reason, spans, rewards)
        )

    @abstractmethod
    async def _finish_attempt(self, finish: AttemptFinish) -> Attempt:
        """`finish_attempt`."""

    async def update_rollout(
        self,
        rollout_id: str,
        *,
        status: RolloutStatus | str | Unset = UNSET,
        metadata: dict[str, Any] | Unset = UNSET,
        config: RolloutConfig | Unset = UNSET,
        resources_id: str | None | Unset = UNSET,
    ) -> Rollout:
        """Change a rollout; only the given fields change. Status moves follow the state machine;
        a terminal status also ends the current attempt if it is still open (cancelled -> failed).
        """
        return await self._update_rollout(RolloutUpdate(rollout_id, status, metadata, config, resources_id))

    @abstractmethod
    async def _update_rollout(self, update: RolloutUpdate) -> Rollout:
        """`update_rollout`."""

    async def cancel_rollout(self, rollout_id: str) -> Rollout:
        """Cancel a rollout that has not finished; cancelling a cancelled rollout returns it unchanged
        (so a retried call is harmless), one that succeeded or failed raises IllegalTransitionError."""
        return await self.update_rollout(rollout_id, status=RolloutStatus.CANCELLED)

    @abstractmethod
    async def wait_for_rollouts(
        self, rollout_ids: Sequence[str], *, timeout: float | None = None
    ) -> list[Rollout]:
        """Wait until the given rollouts are terminal or `timeout` seconds pass.

        Returns the terminal ones only, in the order asked. `timeout=0` checks once; None waits
        without limit. Unknown ids raise NotFoundError.
        """

    @abstractmethod
    async def sweep_stale_attempts(self, now: float | None = None) -> list[Attempt]:
        """The watchdog: attempts running longer than `timeout_seconds` become `timeout`, attempts
        silent (no span or heartbeat) longer than `unresponsive_seconds` become `unresponsive`;
        their rollouts requeue or fail as `update_attempt` describes. Returns the changed attempts.
        """

    # ---- spans and rewards -----------------------------------------------------------------

    async def add_span(self, span: SpanIn) -> Span:
        """Store one span of an attempt; idempotent on (attempt_id, span_id).

        A repeated span returns the stored copy unchanged. The attempt must exist (NotFoundError)
        and belong to the rollout named. The first span of a `preparing` attempt moves it (and its
        rollout) to `running`; a span revives an `unresponsive` attempt that is still current.
        Spans of ended attempts are stored too (late spans stay with their attempt); over HTTP only a
        role token still sends them, since an attempt's agent key expires when it ends. A NaN or
        infinity in the span's attributes or resource is kept as OTLP's JSON string ("NaN",
        "Infinity", "-Infinity": lightningstore.finite); its times must be finite numbers.
        """
        (stored,) = await self.add_many_spans([span])
        return stored

    @abstractmethod
    async def add_many_spans(self, spans: Sequence[SpanIn]) -> list[Span]:
        """Store many spans in one transaction with the rules of `add_span`; returns them in the
        order given, each with its store-issued `sequence_id`. If one is invalid none is stored."""

    @abstractmethod
    async def add_reward(self, reward: RewardIn) -> Reward:
        """Attach a named reward to a rollout (and optionally to one span or step of it).

        Idempotent on `reward_id` when given. The rollout must exist; an `attempt_id`, when given,
        must be one of its attempts. `value` is a finite number (`RewardIn` refuses a bool).
        """

    # ---- queries -----------------------------------------------------------------------------

    @abstractmethod
    async def get_rollout_by_id(self, rollout_id: str) -> Rollout | None:
        """The rollout, or None."""

    async def query_rollouts(
        self,
        *,
        status: Sequence[RolloutStatus | str] | None = None,
        mode: RolloutMode | str | None = None,
        rollout_ids: Sequence[str] | None = None,
        group_id: str | None = None,
        sort_by: RolloutSortKey = "enqueue_time",
        descending: bool = False,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Rollout]:
        """Rollouts matching every given filter, sorted (ties broken by rollout_id), paginated."""
        return await self._query_rollouts(
            RolloutQuery(status, mode, rollout_ids, group_id, sort_by, descending, limit, offset)
        )

    @abstractmethod
    async def _query_rollouts(self, query: RolloutQuery) -> list[Rollout]:
        """`query_rollouts`."""

    @abstractmethod
    async def query_attempts(self, rollout_id: str) -> list[Attempt]:
        """All attempts of a rollout, oldest first (NotFoundError for an unknown rollout)."""

    @abstractmethod
    async def get_latest_attempt(self, rollout_id: str) -> Attempt | None:
        """The rollout's most recent attempt, or None if it has none."""

    async def query_spans(
        self,
        rollout_id: str,
        attempt_id: str | Literal["latest"] | None = None,
        *,
        name: str | None = None,
        after_sequence_id: int | None = None,
        limit: int | None = None,
    ) -> list[Span]:
        """Spans of a rollout in `sequence_id` order. `attempt_id=None` gives every attempt's,
        "latest" the latest attempt's; `after_sequence_id` pages forward."""
        return await self._query_spans(SpanQuery(rollout_id, attempt_id, name, after_sequence_id, limit))

    @abstractmethod
    async def _query_spans(self, query: SpanQuery) -> list[Span]:
        """`query_spans`."""

    @abstractmethod
    async def query_rewards(self, rollout_id: str, *, name: str | None = None) -> list[Reward]:
        """Rewards of a rollout in the order they were added."""

    async def query_spans_many(
        self,
        rollout_ids: Sequence[str],
        attempt: Literal["latest"] | None = "latest",
        *,
        attributes: Sequence[str] | None = None,
    ) -> dict[str, list[Span]]:
        """Spans of many rollouts in one read: rollout_id -> its spans in `sequence_id` order.

        Every asked id is a key, in the order first asked (a repeated id is read once); an id that
        names no rollout, or a rollout without spans, maps to [] (as `query_spans` answers for one).
        `attempt="latest"` (the default) gives each rollout's latest attempt's spans, None every
        attempt's, as in `query_spans`; a rollout with no attempt yet maps to [].
        `attributes`, when given, is a projection: each span's `attributes` holds only those keys
        (the ones it has, null values left out; () = none), so a reader of names and a few markers
        does not load the token ids and logprobs of LLM spans. Keys must be non-empty, at most 200
        characters, without `"`, `\\` or control characters, and at most MAX_READ_ATTRIBUTES of them.

        At most MAX_READ_IDS ids per call; more, ids that are not a list of strings (a bare string is
        refused, not read as characters), or another `attempt` raise InvalidInputError naming the
        field and the value given. `lightningstore.spans_of_rollouts` reads any number of ids.
        """
        return await self._query_spans_many(SpansManyQuery(rollout_ids, attempt, attributes))

    @abstractmethod
    async def _query_spans_many(self, query: SpansManyQuery) -> dict[str, list[Span]]:
        """`query_spans_many`."""

    @abstractmethod
    async def query_rewards_many(self, rollout_ids: Sequence[str]) -> dict[str, list[Reward]]:
        """Rewards of many rollouts in one read: rollout_id -> its rewards in the order they were added.

        Every asked id is a key, in the order first asked (a repeated id is read once); an unknown id
        maps to [] (as `query_rewards` answers for one). The limits and errors of `query_spans_many`
        apply to `rollout_ids`; `lightningstore.rewards_of_rollouts` reads any number of ids.
        """

    # ---- resources -----------------------------------------------------------------------------

    async def add_resource_version(
        self,
        name: str,
        resource: Resource,
        *,
        parent_id: str | None = None,
        created_by: str = "unknown",
        artifact: str | None = None,
        metadata: dict[str, Any] | None = None,
        version_id: str | None = None,
    ) -> ResourceVersion:
        """Publish a new version of the named resource and move its `latest` pointer to it.

        `parent_id`, when given, must name a stored version of the same name. A repeated
        `version_id` with the same content returns the stored version (ConflictError otherwise).
        The first version of a name also becomes `approved` (the initial baseline).
        """
        return await self._add_resource_version(
            VersionRequest(name, resource, parent_id, created_by, artifact, metadata, version_id)
        )

    @abstractmethod
    async def _add_resource_version(self, request: VersionRequest) -> ResourceVersion:
        """`add_resource_version`."""

    async def add_resources(
        self,
        resources: dict[str, Resource],
        *,
        created_by: str = "unknown",
        parents: dict[str, str] | None = None,
    ) -> ResourceSet:
        """Publish one version per name (as `add_resource_version`) and bind them in a new set."""
        return await self._add_resources(ResourcesRequest(resources, created_by, parents))

    @abstractmethod
    async def _add_resources(self, request: ResourcesRequest) -> ResourceSet:
        """`add_resources`."""

    @abstractmethod
    async def add_resource_set(self, versions: dict[str, str]) -> ResourceSet:
        """Bind existing versions (name -> version_id) into a new resource set."""

    @abstractmethod
    async def get_resources_by_id(self, resources_id: str) -> ResourceSet | None:
        """The resource set, or None."""

    @abstractmethod
    async def get_latest_resources(self) -> ResourceSet | None:
        """The most recently created resource set, or None."""

    @abstractmethod
    async def get_resource_version(self, version_id: str) -> ResourceVersion | None:
        """The version, or None."""

    @abstractmethod
    async def get_pointer(self, name: str, pointer: Literal["latest", "approved"]) -> ResourceVersion | None:
        """The version a resource's pointer names, or None if it has none."""

    async def get_latest_version(self, name: str) -> ResourceVersion | None:
        return await self.get_pointer(name, "latest")

    async def get_approved_version(self, name: str) -> ResourceVersion | None:
        return await self.get_pointer(name, "approved")

    @abstractmethod
    async def list_resource_versions(self, name: str | None = None) -> list[ResourceVersion]:
        """Versions (of one name, or all), oldest first."""

    async def move_pointer(
        self,
        name: str,
        pointer: Literal["latest", "approved"],
        version_id: str,
        *,
        actor: str,
        reason: str = "",
    ) -> PointerMove:
        """Point a resource's pointer at one of its versions and append the move to the history.

        The version must exist and carry that name. Who may move `approved` is decided by the
        caller's credentials (the server), not here: over HTTP only an approver the resource's gate
        policy names in `default_approvers` (any approver when it names none) or an admin, and the
        move's `actor` is the credentials' identity (`approver:alice`), the stated `actor` after it
        when that differs (`approver:alice (stated: ops)`).
        """
        return await self._move_pointer(PointerMoveRequest(name, pointer, version_id, actor, reason))

    @abstractmethod
    async def _move_pointer(self, move: PointerMoveRequest) -> PointerMove:
        """`move_pointer`."""

    @abstractmethod
    async def query_pointer_history(
        self, name: str, pointer: Literal["latest", "approved"] | None = None
    ) -> list[PointerMove]:
        """Every move of the resource's pointers, oldest first."""

    # ---- workers and statistics ---------------------------------------------------------------

    async def update_worker(
        self,
        worker_id: str,
        *,
        status: WorkerStatus | str | Unset = UNSET,
        metadata: dict[str, Any] | Unset = UNSET,
    ) -> Worker:
        """Create or update a worker and record its heartbeat."""
        return await self._update_worker(WorkerUpdate(worker_id, status, metadata))

    @abstractmethod
    async def _update_worker(self, update: WorkerUpdate) -> Worker:
        """`update_worker`."""

    @abstractmethod
    async def query_workers(self) -> list[Worker]:
        """All workers known to the store."""

    @abstractmethod
    async def statistics(self) -> StoreStatistics:
        """Counts of everything stored."""

    async def close(self) -> None:
        """Release connections; the store must not be used afterwards."""
        return None
