"""AttemptExecution: run one claimed rollout end to end (resources, agent, heartbeats, timeout, rewards, finish)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.trace import Status, StatusCode

from lightningstore import (
    AttemptedRollout,
    AttemptStatus,
    IllegalTransitionError,
    InvalidInputError,
    LightningStore,
    NotFoundError,
)
from runner.agent import LitAgent
from runner.resources import AgentResources, ResourceSetCache, build_resources, resolve_versions
from runner.reward import emit_reward, rewards_from_result
from runner.step_spans import record_error
from runner.threads import run_in_daemon_thread
from runner.tracing.context import AttemptContext, attempt_scope
from runner.tracing.sink import SpanSink
from runner.tracing.tracer import AttemptTracer

log = logging.getLogger("runner.attempt")
ROOT_SPAN_NAME = "lightningrl.rollout"
RUNNER_STOPPED = "runner stopped"
CANCEL_GRACE_SECONDS = 5.0
FLUSH_TRIES = 3


class CancelReason(StrEnum):
    TIMEOUT = "timeout"
    STOPPED = "stopped"
    ENDED_ELSEWHERE = "ended elsewhere"


@dataclass(frozen=True)
class AttemptSettings:
    proxy_url: str | None
    agent_key_secret: str | None
    production: bool
    heartbeat_interval: float
    worker_id: str
    resource_sets: ResourceSetCache | None = None


@dataclass(frozen=True)
class AttemptOutcome:
    """How the attempt ended; `status` None means someone else (watchdog, cancel) ended it."""

    status: AttemptStatus | None
    failure_reason: str | None = None


def format_failure(error: BaseException) -> str:
    """The exception with its traceback, as a failure reason."""
    return "".join(traceback.format_exception(error)).rstrip()


class AttemptExecution:
    """One attempt of one claimed rollout, run by one worker."""

    def __init__(
        self,
        store: LightningStore,
        agent: LitAgent,
        claim: AttemptedRollout,
        settings: AttemptSettings,
        sink_factory: Callable[[str, str], SpanSink],
    ) -> None:
        self.store = store
        self.agent = agent
        self.claim = claim
        self.settings = settings
        self.rollout_id = claim.rollout_id
        self.attempt_id = claim.attempt_id
        self.sink = sink_factory(self.rollout_id, self.attempt_id)
        self.attempt_tracer = AttemptTracer(
            store, self.sink, self.rollout_id, self.attempt_id, agent_name=agent.name
        )
        self.context = AttemptContext(
            store, self.rollout_id, self.attempt_id, claim.rollout.mode.value, self.attempt_tracer
        )
        self.cancel_reason: CancelReason | None = None
        self._agent_task: asyncio.Task[Any] | None = None

    def cancel(self, reason: CancelReason) -> None:
        """Stop the agent now; the attempt ends according to `reason`."""
        if self.cancel_reason is None:
            self.cancel_reason = reason
        if self._agent_task is not None and not self._agent_task.done():
            self._agent_task.cancel()

    async def run(self) -> AttemptOutcome:
        """Run the agent and end the attempt; never raises for the agent's faults.

        The first heartbeat (preparing -> running) comes before the agent starts: an attempt ended
        meanwhile (its rollout cancelled, say) never runs its agent. The attempt's last spans, its
        rewards and its ending go to the store in one call."""
        if not await self._beat():
            self.attempt_tracer.close()
            self.sink.close()
            return AttemptOutcome(None, "the attempt ended before its agent started")
        heartbeat = asyncio.create_task(self._heartbeat_loop(), name=f"heartbeat-{self.attempt_id}")
        try:
            outcome = await self._run_agent()
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
        outcome = await self._end(outcome)
        self.attempt_tracer.close()
        self.sink.close()
        return outcome

    async def _run_agent(self) -> AttemptOutcome:
        timeout = self.claim.rollout.config.timeout_seconds
        self._agent_task = asyncio.create_task(self._invoke(), name=f"agent-{self.attempt_id}")
        if self.cancel_reason is not None:  # stopped or ended before the task existed
            self._agent_task.cancel()
        done, _ = await asyncio.wait({self._agent_task}, timeout=timeout)
        if not done:
            self.cancel(CancelReason.TIMEOUT)
            await asyncio.wait({self._agent_task}, timeout=CANCEL_GRACE_SECONDS)
            if not self._agent_task.done():
                log.warning("agent of attempt %s ignored cancellation; abandoning it", self.attempt_id)
        if self.cancel_reason is not None:
            return self._cancelled_outcome(timeout)
        if self._agent_task.cancelled():
            return AttemptOutcome(AttemptStatus.FAILED, "the agent was cancelled from inside")
        error = self._agent_task.exception()
        if error is not None:
            return AttemptOutcome(AttemptStatus.FAILED, format_failure(error))
        return AttemptOutcome(AttemptStatus.SUCCEEDED)

    def _cancelled_outcome(self, timeout: float | None) -> AttemptOutcome:
        if self.cancel_reason == CancelReason.TIMEOUT:
            return AttemptOutcome(AttemptStatus.TIMEOUT, f"rollout exceeded its timeout of {timeout}s")
        if self.cancel_reason == CancelReason.STOPPED:
            return AttemptOutcome(AttemptStatus.FAILED, RUNNER_STOPPED)
        return AttemptOutcome(None)

    async def _invoke(self) -> None:
        """Resolve resources, run the agent inside the attempt's context and root span, record rewards."""
        tracer = self.attempt_tracer.tracer
        with (
            attempt_scope(self.context),
            tracer.start_as_current_span(
                ROOT_SPAN_NAME,
                context=otel_context.Context(),
                attributes={"lightningrl.mode": self.context.mode},
                record_exception=False,
                set_status_on_exception=False,
            ) as span,
        ):
            try:
                resources = await self._resources()
                result = await self._call_agent(resources)
                for name, value, primary in rewards_from_result(result):
                    emit_reward(value, name=name, primary=primary, context=self.context)
            except asyncio.CancelledError:
                reason = self.cancel_reason.value if self.cancel_reason else "cancelled"
                span.add_event("cancelled", {"reason": reason})
                span.set_status(Status(StatusCode.ERROR, f"agent cancelled: {reason}"))
                raise
            except BaseException as error:
                record_error(span, error)
                raise

    async def _resources(self) -> AgentResources:
        rollout = self.claim.rollout
        versions = await resolve_versions(
            self.store, rollout, production=self.settings.production, cache=self.settings.resource_sets
        )
        return build_resources(
            versions,
            rollout,
            self.attempt_id,
            proxy_url=self.settings.proxy_url,
            agent_key_secret=self.settings.agent_key_secret,
        )

    async def _call_agent(self, resources: AgentResources) -> Any:
        task = self.claim.rollout.input
        if self.agent.is_async:
            result = await self.agent.rollout(task, resources)
        else:
            result = await run_in_daemon_thread(self.agent.rollout, task, resources)
        if inspect.isawaitable(result):
            result = await result
        return result

    async def _beat(self) -> bool:
        """One heartbeat and a flush of buffered spans; False when the attempt has ended elsewhere."""
        try:
            await self.store.heartbeat(self.rollout_id, self.attempt_id, worker_id=self.settings.worker_id)
        except (IllegalTransitionError, NotFoundError) as error:
            log.warning("attempt %s ended elsewhere (%s); stopping its agent", self.attempt_id, error)
            return False
        except Exception:
            log.exception("heartbeat of attempt %s failed; retrying next interval", self.attempt_id)
        try:
            await self.attempt_tracer.flush()
        except Exception:
            log.exception("flushing spans of attempt %s failed; retrying next interval", self.attempt_id)
        return True

    async def _heartbeat_loop(self) -> None:
        """Heartbeat every interval while the agent runs; stop the agent if the attempt ended."""
        while True:
            await asyncio.sleep(self.settings.heartbeat_interval)
            if not await self._beat():
                self.cancel(CancelReason.ENDED_ELSEWHERE)
                return

    async def _end(self, outcome: AttemptOutcome) -> AttemptOutcome:
        """Deliver the last spans and rewards and end the attempt (bounded tries). An attempt ended
        elsewhere only gets its telemetry; one whose telemetry cannot be stored ends without it, and a
        success then becomes a failure that says so."""
        if outcome.status is None:
            await self._final_flush()
            return outcome
        error = ""
        for attempt in range(FLUSH_TRIES):
            try:
                await self.attempt_tracer.finish(outcome.status, outcome.failure_reason)
                return outcome
            except (IllegalTransitionError, NotFoundError) as exc:
                log.warning("attempt %s was ended elsewhere before it finished (%s)", self.attempt_id, exc)
                return AttemptOutcome(None, str(exc))
            except Exception as exc:  # noqa: BLE001 - reported in the outcome
                error = f"{type(exc).__name__}: {exc}"
                log.warning("finishing attempt %s failed (try %d): %s", self.attempt_id, attempt + 1, error)
                if isinstance(exc, InvalidInputError):
                    break  # the same request would be refused again
                await asyncio.sleep(0.2 * (attempt + 1))
        if outcome.status == AttemptStatus.SUCCEEDED:
            outcome = AttemptOutcome(AttemptStatus.FAILED, f"spans or rewards could not be stored: {error}")
        return await self._finish(outcome)

    async def _final_flush(self) -> None:
        """Deliver the last spans and rewards of an attempt ended elsewhere (bounded tries, each failure
        logged: the attempt's outcome is already decided)."""
        for attempt in range(FLUSH_TRIES):
            try:
                await self.attempt_tracer.flush()
                return
            except Exception as exc:  # noqa: BLE001 - logged; nothing is left to report it to
                log.warning(
                    "flush %d of attempt %s failed: %s: %s",
                    attempt + 1,
                    self.attempt_id,
                    type(exc).__name__,
                    exc,
                )
                await asyncio.sleep(0.2 * (attempt + 1))

    async def _finish(self, outcome: AttemptOutcome) -> AttemptOutcome:
        assert outcome.status is not None  # an attempt ended elsewhere never gets here
        try:
            await self.store.update_attempt(
                self.rollout_id, self.attempt_id, status=outcome.status, failure_reason=outcome.failure_reason
            )
        except (IllegalTransitionError, NotFoundError) as error:
            log.warning("attempt %s was ended elsewhere before it finished (%s)", self.attempt_id, error)
            return AttemptOutcome(None, str(error))
        return outcome
