"""Runner: N concurrent workers that claim rollouts from a store and run an agent on each."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal

from lightningstore import LightningStore, WorkerStatus
from runner.agent import LitAgent, as_agent
from runner.attempt import AttemptExecution, AttemptOutcome, AttemptSettings, CancelReason
from runner.progress import ProgressDisplay, RunnerSummary
from runner.resources import ResourceSetCache
from runner.tracing.global_spans import capture_global_spans
from runner.tracing.sink import OtlpSink, SharedSink, SpanSink, StoreSink

log = logging.getLogger("runner")
SpanTransport = Literal["auto", "store", "otlp"]
MAX_IDLE_POLL_SECONDS = 0.5


def runner_name_prefix(pid: int, host: str | None = None) -> str:
    """How every default runner name (and so its worker ids) of process `pid` on `host` begins."""
    return f"runner-{host or socket.gethostname()}-{pid}-"


def _remote_base_url(store: LightningStore) -> str | None:
    """The server URL when `store` is a StoreClient, else None."""
    from lightningstore.client.store_client import StoreClient

    return store.base_url if isinstance(store, StoreClient) else None


def _client_authorization(store: LightningStore) -> str | None:
    from lightningstore.client.store_client import StoreClient

    return store.auth_headers.get("authorization") if isinstance(store, StoreClient) else None


class Runner:
    """Claims rollouts, runs the agent on each (sync agents in threads), records spans and rewards."""

    def __init__(
        self,
        store: LightningStore,
        agent: LitAgent | Callable[..., Any],
        workers: int = 4,
        proxy_url: str | None = None,
        agent_key_secret: str | None = None,
        production: bool = False,
        heartbeat_interval: float = 5.0,
        poll_interval: float = 0.05,
        show_progress: bool = True,
        *,
        name: str | None = None,
        stop_timeout: float = 30.0,
        span_transport: SpanTransport = "auto",
        otlp_headers: dict[str, str] | None = None,
        global_spans: bool = True,
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        if heartbeat_interval <= 0 or poll_interval <= 0:
            raise ValueError(
                f"heartbeat_interval and poll_interval must be positive, got {heartbeat_interval}, {poll_interval}"
            )
        self.store = store
        self.agent = as_agent(agent)
        self.workers = workers
        # What every attempt of this runner shares; each claim adds its worker id.
        self._attempt_settings = AttemptSettings(
            proxy_url,
            agent_key_secret,
            production,
            heartbeat_interval,
            worker_id="",
            resource_sets=ResourceSetCache(),
        )
        self.poll_interval = poll_interval
        self.show_progress = show_progress
        self.name = name or f"{runner_name_prefix(os.getpid())}{uuid.uuid4().hex[:6]}"
        self.stop_timeout = stop_timeout
        self.otlp_headers = otlp_headers
        self.global_spans = global_spans
        self._remote_url = _remote_base_url(store) if span_transport != "store" else None
        if span_transport == "otlp" and self._remote_url is None:
            raise ValueError("span_transport='otlp' needs a StoreClient (a store server URL)")
        self.summary = RunnerSummary()
        self._executions: set[AttemptExecution] = set()
        self._shared_sink: SharedSink | None = None
        self._stop_requests = 0
        self._stop_event: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._budget: int | None = None
        self._idle_timeout: float | None = None
        self._last_activity = 0.0

    # ---- control ----------------------------------------------------------------------------

    def stop(self, force: bool = False) -> None:
        """Claim nothing more; in-flight attempts finish (or after `stop_timeout`, or at once when forced or
        asked twice, are cancelled and marked failed "runner stopped"). Safe from any thread or signal handler."""
        loop = self._loop
        try:
            current: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        if loop is not None and loop is not current and not loop.is_closed():
            loop.call_soon_threadsafe(self._request_stop, force)
        else:
            self._request_stop(force)

    def _request_stop(self, force: bool) -> None:
        self._stop_requests += 1
        if self._stop_event is not None:
            self._stop_event.set()
        if force or self._stop_requests > 1:
            self._cancel_all()

    def _cancel_all(self) -> None:
        for execution in list(self._executions):
            execution.cancel(CancelReason.STOPPED)

    @property
    def stopping(self) -> bool:
        return self._stop_requests > 0

    # ---- running ----------------------------------------------------------------------------

    async def run(self, max_rollouts: int | None = None, idle_timeout: float | None = None) -> RunnerSummary:
        """Work until stopped, `max_rollouts` claimed and finished, or `idle_timeout` seconds without work."""
        self._loop = asyncio.get_running_loop()
        self._stop_event = asyncio.Event()
        if self.stopping:
            self._stop_event.set()
        self._budget = max_rollouts
        self._idle_timeout = idle_timeout
        self._last_activity = self._loop.time()
        self.summary = RunnerSummary()
        if self.global_spans:
            capture_global_spans()
        with ProgressDisplay(self.summary, enabled=self.show_progress, title=self.name):
            grace = asyncio.create_task(self._stop_grace())
            try:
                await asyncio.gather(*(self._worker(i) for i in range(self.workers)))
            finally:
                grace.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await grace
                if self._shared_sink is not None:
                    self._shared_sink.sink.close()
                    self._shared_sink = None
        return self.summary

    async def _stop_grace(self) -> None:
        """After a stop request, give in-flight attempts `stop_timeout` seconds, then cancel them."""
        assert self._stop_event is not None
        await self._stop_event.wait()
        await asyncio.sleep(self.stop_timeout)
        self._cancel_all()

    async def _worker(self, index: int) -> None:
        worker_id = f"{self.name}-w{index}"
        await self._set_worker(worker_id, WorkerStatus.IDLE)
        wait = 0.0
        try:
            while not self.stopping and self._reserve():
                # An idle worker waits in the claim itself (the store hands it the next rollout queued),
                # a little longer each time, so that stopping or the idle timeout is noticed.
                claim = await self._claim(worker_id, wait)
                if claim is None:
                    self._release()
                    if self._idle_too_long():
                        return
                    wait = min(
                        max(wait * 2, self.poll_interval), max(self.poll_interval, MAX_IDLE_POLL_SECONDS)
                    )
                    continue
                wait = 0.0
                await self._execute(claim, worker_id)
        finally:
            await self._set_worker(worker_id, WorkerStatus.OFFLINE)

    async def _claim(self, worker_id: str, wait: float) -> Any:
        try:
            return await self.store.dequeue_rollout(worker_id, wait=wait)
        except Exception:
            log.exception("claiming a rollout failed; retrying")
            await self._sleep(max(wait, self.poll_interval))
            return None

    async def _execute(self, claim: Any, worker_id: str) -> AttemptOutcome:
        assert self._loop is not None
        self.summary.claimed += 1
        self.summary.running += 1
        self._last_activity = self._loop.time()
        settings = replace(self._attempt_settings, worker_id=worker_id)
        execution = AttemptExecution(self.store, self.agent, claim, settings, self._sink)
        self._executions.add(execution)
        if self._stop_requests > 1:
            execution.cancel(CancelReason.STOPPED)
        try:
            outcome = await execution.run()
        except Exception as error:
            log.exception("attempt %s could not be run or finished", claim.attempt_id)
            outcome = AttemptOutcome(None, repr(error))
        finally:
            self._executions.discard(execution)
            self._last_activity = self._loop.time()
        self.summary.record(outcome.status)
        return outcome

    def _sink(self, rollout_id: str, attempt_id: str) -> SpanSink:
        if self._remote_url is None:
            return StoreSink(self.store)
        if self._shared_sink is None:
            # The runner's own credential, never an agent key: the spans it records (instrumented LLM
            # calls with their token ids) are training data the store refuses from an agent key, and
            # an attempt's last spans may arrive after it ended. The same headers for every attempt:
            # one exporter (one connection pool) for all of them.
            headers = dict(self.otlp_headers or {})
            if not headers and (authorization := _client_authorization(self.store)) is not None:
                headers["authorization"] = authorization
            self._shared_sink = SharedSink(OtlpSink(f"{self._remote_url}/v1/traces", headers))
        return self._shared_sink

    def _reserve(self) -> bool:
        if self._budget is None:
            return True
        if self._budget <= 0:
            return False
        self._budget -= 1
        return True

    def _release(self) -> None:
        if self._budget is not None:
            self._budget += 1

    def _idle_too_long(self) -> bool:
        assert self._loop is not None
        idle_timeout = self._idle_timeout
        return (
            idle_timeout is not None
            and self.summary.running == 0
            and self._loop.time() - self._last_activity >= idle_timeout
        )

    async def _sleep(self, seconds: float) -> None:
        assert self._stop_event is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop_event.wait(), seconds)

    async def _set_worker(self, worker_id: str, status: WorkerStatus) -> None:
        try:
            await self.store.update_worker(worker_id, status=status, metadata={"runner": self.name})
        except Exception:
            log.warning("could not record worker %s as %s", worker_id, status.value, exc_info=True)
