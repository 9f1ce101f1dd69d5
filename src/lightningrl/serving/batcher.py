"""Batcher: collects concurrent jobs for a few milliseconds and runs them as one batch off the loop."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
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
    """Feeds the engine: waits for a job, gathers more for up to `batch_wait_s`, runs them together."""

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
        self._queue: asyncio.Queue[Job] = asyncio.Queue()
        self._held: Job | None = None  # a job that did not fit the previous batch goes first next time
        self._executor = ThreadPoolExecutor(
            max_workers=1,
            thread_name_prefix="lightningrl-generate",
            initializer=None if cpu_threads is None else torch.set_num_threads,
            initargs=() if cpu_threads is None else (cpu_threads,),
        )

    def submit(self, job: Job) -> None:
        """Queue a job for the next batch."""
        self._queue.put_nowait(job)

    async def run(self) -> None:
        """Serve batches until cancelled."""
        loop = asyncio.get_running_loop()
        while True:
            jobs = await self._collect(loop)
            started = time.perf_counter()
            try:
                await loop.run_in_executor(self._executor, self.engine.run, jobs)
            except Exception as error:  # never let one batch stop the server
                logger.exception("a batch of %d requests failed", len(jobs))
                for job in jobs:
                    job.emit(Failed(f"generation failed: {type(error).__name__}: {error}"))
            self.stats.record(jobs, time.perf_counter() - started)

    async def _collect(self, loop: asyncio.AbstractEventLoop) -> list[Job]:
        """The next batch: the first live job, then whatever arrives within the wait and fits."""
        first = self._held or await self._queue.get()
        self._held = None
        jobs, rows = [first], first.rows
        deadline = loop.time() + self.batch_wait_s
        for _ in range(4 * self.max_batch_size):  # each pass takes one queued job or ends the batch
            if rows >= self.max_batch_size:
                break
            remaining = deadline - loop.time()
            try:
                job = (
                    self._queue.get_nowait()
                    if remaining <= 0
                    else await asyncio.wait_for(self._queue.get(), remaining)
                )
            except (asyncio.QueueEmpty, TimeoutError):
                break
            if job.cancelled:
                continue
            if rows + job.rows > self.max_batch_size:
                self._held = job
                break
            jobs.append(job)
            rows += job.rows
        return jobs

    def close(self) -> None:
        """Stop the generation thread once the current batch ends."""
        self._executor.shutdown(wait=False, cancel_futures=True)
