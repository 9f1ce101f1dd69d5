"""Batcher: collects concurrent jobs for a few milliseconds and runs them as one batch off the loop."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import torch

from lightningrl.serving.engine import Engine
from lightningrl.serving.job import Failed, Job

logger = logging.getLogger(__name__)


@dataclass
class BatchStats:
    """Counts of batches run and their sizes, in sequences and in requests."""

    batches: int = 0
    requests: int = 0
    sequences: int = 0
    busy_seconds: float = 0.0
    sequences_per_batch: Counter[int] = field(default_factory=Counter)
    requests_per_batch: Counter[int] = field(default_factory=Counter)

    def record(self, jobs: list[Job], seconds: float) -> None:
        """Count one finished batch."""
        rows = sum(job.rows for job in jobs)
        self.batches += 1
        self.requests += len(jobs)
        self.sequences += rows
        self.busy_seconds += seconds
        self.sequences_per_batch[rows] += 1
        self.requests_per_batch[len(jobs)] += 1

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready view."""
        return {
            "batches": self.batches,
            "requests": self.requests,
            "sequences": self.sequences,
            "busy_seconds": round(self.busy_seconds, 6),
            "max_sequences_in_batch": max(self.sequences_per_batch, default=0),
            "max_requests_in_batch": max(self.requests_per_batch, default=0),
            "sequences_per_batch": {str(k): v for k, v in sorted(self.sequences_per_batch.items())},
            "requests_per_batch": {str(k): v for k, v in sorted(self.requests_per_batch.items())},
        }


class Batcher:
    """Feeds the engine: waits for a job, gathers more for up to `batch_wait_s`, runs them together; jobs
    arriving while a batch decodes join it between steps (continuous batching)."""

    def __init__(
        self, engine: Engine, *, max_batch_size: int, batch_wait_s: float, cpu_threads: int | None = None
    ) -> None:
        """Batch up to `max_batch_size` sequences (a larger single request runs alone).

        `cpu_threads` sets torch's intra-op threads on the generation thread (None: torch's default);
        1 is fastest for tiny models on a busy CPU.
        """
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be at least 1, got {max_batch_size}")
        if batch_wait_s < 0:
            raise ValueError(f"batch_wait_s must not be negative, got {batch_wait_s}")
        self.engine = engine
        self.max_batch_size = max_batch_size
        self.batch_wait_s = batch_wait_s
        self.stats = BatchStats()
        # Thread-safe: the event loop appends, the generation thread takes jobs between decode steps.
        self._pending: deque[Job] = deque()
        self._arrived = asyncio.Event()
        self._executor = ThreadPoolExecutor(
            max_workers=1,
            thread_name_prefix="lightningrl-generate",
            initializer=None if cpu_threads is None else torch.set_num_threads,
            initargs=() if cpu_threads is None else (cpu_threads,),
        )

    def submit(self, job: Job) -> None:
        """Queue a job: it joins the running batch at its next decode step, or starts the next one."""
        self._pending.append(job)
        self._arrived.set()

    async def run(self) -> None:
        """Serve batches until cancelled."""
        loop = asyncio.get_running_loop()
        while True:
            jobs = await self._collect(loop)
            started = time.perf_counter()
            try:
                await loop.run_in_executor(
                    self._executor, self.engine.run, jobs, self._admitter(jobs), self.max_batch_size
                )
            except Exception as error:  # never let one batch stop the server
                logger.exception("a batch of %d requests failed", len(jobs))
                for job in jobs:
                    job.emit(Failed(f"generation failed: {type(error).__name__}: {error}"))
            self.stats.record(jobs, time.perf_counter() - started)

    def _take(self, free_rows: int) -> list[Job]:
        """Queued live jobs that fit in `free_rows`, oldest first (from any thread)."""
        taken: list[Job] = []
        while self._pending:
            try:
                job = self._pending.popleft()
            except IndexError:  # taken by the other thread meanwhile
                break
            if job.cancelled:
                continue
            if job.rows > free_rows:
                self._pending.appendleft(job)  # it goes first next time
                break
            taken.append(job)
            free_rows -= job.rows
        return taken

    def _admitter(self, jobs: list[Job]) -> Callable[[int], list[Job]]:
        """The engine's `admit`: jobs that arrived during the batch join it (and count in its stats)."""

        def admit(free_rows: int) -> list[Job]:
            joined = self._take(free_rows)
            jobs.extend(joined)
            return joined

        return admit

    async def _collect(self, loop: asyncio.AbstractEventLoop) -> list[Job]:
        """The next batch: the first live job, then whatever arrives within the wait and fits."""
        while True:
            self._arrived.clear()
            jobs = self._take(self.max_batch_size) or self._take_oversized()
            if jobs:
                break
            await self._arrived.wait()
        rows = sum(job.rows for job in jobs)
        deadline = loop.time() + self.batch_wait_s
        while rows < self.max_batch_size:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            self._arrived.clear()
            if not self._pending:
                try:
                    await asyncio.wait_for(self._arrived.wait(), remaining)
                except TimeoutError:
                    break
            more = self._take(self.max_batch_size - rows)
            if not more:
                break  # the next job does not fit
            jobs.extend(more)
            rows += sum(job.rows for job in more)
        return jobs

    def _take_oversized(self) -> list[Job]:
        """A first job larger than a whole batch runs alone."""
        if self._pending and self._pending[0].rows > self.max_batch_size:
            return [self._pending.popleft()]
        return []

    def close(self) -> None:
        """Stop the generation thread once the current batch ends."""
        self._executor.shutdown(wait=False, cancel_futures=True)
