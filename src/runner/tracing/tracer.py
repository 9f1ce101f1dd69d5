"""AttemptTracer: one OpenTelemetry TracerProvider per attempt, buffering spans and rewards for the store."""

from __future__ import annotations

import asyncio
import logging
import threading

from opentelemetry import context as otel_context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.trace import Tracer

from lightningstore import AttemptStatus, IllegalTransitionError, LightningStore, NotFoundError, RewardIn
from lightningstore.semconv import AGENT_NAME, ATTEMPT_ID, ROLLOUT_ID
from runner.tracing.agent_label import current_agent_name
from runner.tracing.sink import SpanSink
from runner.tracing.span_convert import to_span_in

log = logging.getLogger("runner.tracing.tracer")
INSTRUMENTATION_NAME = "lightningrl.runner"


class _Collector(SpanProcessor):
    """Tags spans with their attempt (and agent name) at start; buffers them at end."""

    def __init__(self, owner: AttemptTracer) -> None:
        self.owner = owner

    def on_start(self, span: SdkSpan, parent_context: otel_context.Context | None = None) -> None:
        span.set_attribute(ROLLOUT_ID, self.owner.rollout_id)
        span.set_attribute(ATTEMPT_ID, self.owner.attempt_id)
        name = current_agent_name() or self.owner.agent_name
        if name and AGENT_NAME not in (span.attributes or {}):  # an explicit attribute wins
            span.set_attribute(AGENT_NAME, name)

    def on_end(self, span: ReadableSpan) -> None:
        self.owner.collect(span)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class AttemptTracer:
    """Records one attempt's spans and rewards; `flush()` delivers them (spans first, then rewards)."""

    def __init__(
        self,
        store: LightningStore,
        sink: SpanSink,
        rollout_id: str,
        attempt_id: str,
        *,
        agent_name: str | None = None,
    ) -> None:
        self.store = store
        self.sink = sink
        self.rollout_id = rollout_id
        self.attempt_id = attempt_id
        self.agent_name = agent_name
        attributes: dict[str, str] = {
            "service.name": "lightningrl-runner",
            ROLLOUT_ID: rollout_id,
            ATTEMPT_ID: attempt_id,
        }
        if agent_name:
            attributes[AGENT_NAME] = agent_name
        self.resource = Resource.create(attributes)
        self.provider = TracerProvider(resource=self.resource, shutdown_on_exit=False)
        self.provider.add_span_processor(_Collector(self))
        self.tracer: Tracer = self.provider.get_tracer(INSTRUMENTATION_NAME)
        self._lock = threading.Lock()
        self._spans: list[ReadableSpan] = []
        self._rewards: list[RewardIn] = []
        self._flushing = asyncio.Lock()

    def collect(self, span: ReadableSpan) -> None:
        """Buffer a finished span (called from any thread)."""
        with self._lock:
            self._spans.append(span)

    def add_reward(self, reward: RewardIn) -> None:
        """Buffer a reward row; it is written after the spans of the same flush."""
        with self._lock:
            self._rewards.append(reward)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._spans) + len(self._rewards)

    def take(self) -> tuple[list[ReadableSpan], list[RewardIn]]:
        """Everything buffered so far, removed from the buffer (`put_back` if it could not be delivered)."""
        with self._lock:
            spans, self._spans = self._spans, []
            rewards, self._rewards = self._rewards, []
        return spans, rewards

    def put_back(self, spans: list[ReadableSpan], rewards: list[RewardIn]) -> None:
        """Return undelivered spans and rewards to the front of the buffer."""
        with self._lock:
            self._spans[:0] = spans
            self._rewards[:0] = rewards

    async def flush(self) -> None:
        """Deliver everything buffered so far; on failure the undelivered part stays buffered and re-raises."""
        async with self._flushing:
            spans, rewards = self.take()
            try:
                await self.sink.write(spans, self.rollout_id, self.attempt_id)
            except BaseException:
                self.put_back(spans, rewards)
                raise
            for index, reward in enumerate(rewards):
                try:
                    await self.store.add_reward(reward)
                except BaseException:
                    self.put_back([], rewards[index:])
                    raise

    async def finish(self, status: AttemptStatus, failure_reason: str | None) -> None:
        """Deliver everything buffered and end the attempt, in one store call (`finish_attempt`);
        on failure what was taken returns to the buffer and the error re-raises."""
        async with self._flushing:
            spans, rewards = self.take()
            try:
                await self.store.finish_attempt(
                    self.rollout_id,
                    self.attempt_id,
                    status=status,
                    failure_reason=failure_reason,
                    spans=[to_span_in(span, self.rollout_id, self.attempt_id) for span in spans],
                    rewards=rewards,
                )
            except (IllegalTransitionError, NotFoundError):
                raise  # ended elsewhere (what was sent is stored) or gone: nothing to send again
            except BaseException:
                self.put_back(spans, rewards)
                raise

    def close(self) -> None:
        """Stop recording; spans ending later are still buffered but no longer flushed by the runner."""
        self.provider.shutdown()
