"""Batcher: collects concurrent jobs for a few milliseconds and runs them as one batch off the loop."""

from __future__ import annotations

import asyncio
import logging
import threading
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


GATHER_GAP_S = 0.005
"""A burst of requests has ended once none has arrived for this long."""
MAX_GATHER_S = 0.03
"""No queued request waits longer than this for the rest of its burst."""


class Batcher:
    """Feeds the engine: waits for a job, gathers more while they keep coming, runs them together; jobs
    arriving while a batch decodes join it between steps (continuous batching).

    Requests come in bursts: clients answered by the same decode step send their next requests
    together, and the event loop hands them over one by one as it parses them. A batch that started
    with the first of a burst and let the rest join one per step paid a prefill and a cache merge
    per request, then ran its tail steps short of rows, once per row that had joined late. So a
    burst is gathered and starts, or joins, as one prefill, its rows then decoding in step: a new
    batch waits `batch_wait_s` for a second job and then for more as long as they keep coming
    (`gather_gap_s` apart at most), or, if the last batch just ended several rows in one step, for
    that many rows (their clients are coming back, `gather_gap_s` apart at most); a lone job queued while a batch runs joins it after
    `batch_wait_s`, a burst once arrivals pause for `gather_gap_s` or it fills the free rows (and a
    batch in its last steps admits nobody: see `engine.JOIN_HORIZON`). Nobody waits for a burst
    longer than `max_gather_s`, and the running rows wait with the newcomers only while the
    newcomers are at least as many (a batch of a few early arrivals pauses for the rest of their
    burst; a full one never does). A lone client's request waits `batch_wait_s`, as before."""

    def __init__(
        self,
        engine: Engine,
        *,
        max_batch_size: int,
        batch_wait_s: float,
        cpu_threads: int | None = None,
        gather_gap_s: float = GATHER_GAP_S,
        max_gather_s: float = MAX_GATHER_S,
    ) -> None:
        """Batch up to `max_batch_size` sequences (a larger single request runs alone).

        `batch_wait_s` is how long a lone request waits for company; `gather_gap_s` and
        `max_gather_s` shape the gathering of bursts (0 turns it off). `cpu_threads` sets torch's
        intra-op threads on the generation thread (None: torch's default); 1 is fastest for tiny
        models on a busy CPU.
        """
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be at least 1, got {max_batch_size}")
        if min(batch_wait_s, gather_gap_s, max_gather_s) < 0:
            raise ValueError(
                "batch_wait_s, gather_gap_s and max_gather_s must not be negative, got "
                f"{batch_wait_s}, {gather_gap_s} and {max_gather_s}"
            )
        self.engine = engine
        self.max_batch_size = max_batch_size
        self.batch_wait_s = batch_wait_s
        self.gather_gap_s = gather_gap_s
        self.max_gather_s = max_gather_s
        self._last_arrival = 0.0
        self._ended = (0, 0.0)  # rows the last batch ended together in one step, and when (loop time)
        self._submitted = threading.Event()  # set by each submit, for the generation thread's pauses
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
        """Queue a job: it joins the running batch between decode steps, or starts the next one."""
        job.queued_at = self._last_arrival = time.monotonic()
        self._pending.append(job)
        self._arrived.set()
        self._submitted.set()

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
            self._ended = (self.engine.last_cohort, loop.time())

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
            if not self._pending:
                return []
            if self._gather(free_rows, self.max_batch_size - free_rows):
                return []
            joined = self._take(free_rows)
            jobs.extend(joined)
            return joined

        return admit

    def _gather(self, free_rows: int, running_rows: int) -> bool:
        """Whether the queued jobs should wait for company before joining a running batch of
        `running_rows` (on the generation thread). As for a new batch: a lone job waits `batch_wait_s`
        for a second; a burst waits while it keeps coming, up to `max_gather_s`, and pauses the batch
        meanwhile if it is at least as many rows; nobody waits once the free rows are filled."""
        while True:
            self._submitted.clear()  # an arrival from here on ends the wait below at once
            queued = list(self._pending)  # a snapshot: the event loop appends meanwhile
            if not queued:
                return False
            rows = sum(job.rows for job in queued)
            now = time.monotonic()
            if len(queued) == 1:
                until = queued[0].queued_at + self.batch_wait_s
            else:
                until = min(self._last_arrival + self.gather_gap_s, queued[0].queued_at + self.max_gather_s)
            if rows >= free_rows or now >= until:
                return False
            if len(queued) == 1 or rows < running_rows:
                return True  # the batch decodes on; they join between later steps
            self._submitted.wait(until - now)

    def _returning(self, loop: asyncio.AbstractEventLoop) -> int:
        """How many rows the last batch ended together in its final step, if it ended within
        `max_gather_s` and they were several (else 0): their clients' next requests are on their way,
        so the first back waits `gather_gap_s` for the others, not `batch_wait_s`, and no longer than
        until they are all back (a lone client, whose batch ended one row, waits `batch_wait_s`)."""
        rows, ended = self._ended
        return rows if rows > 1 and loop.time() - ended < self.max_gather_s else 0

    async def _collect(self, loop: asyncio.AbstractEventLoop) -> list[Job]:
        """The next batch: the first live job, then whatever fits of the jobs that arrive within
        `batch_wait_s`, and after them `gather_gap_s` apart, for at most `max_gather_s`."""
        while True:
            self._arrived.clear()
            jobs = self._take(self.max_batch_size) or self._take_oversized()
            if jobs:
                break
            await self._arrived.wait()
        rows = sum(job.rows for job in jobs)
        started = loop.time()
        deadline = started + self.batch_wait_s
        returning = self._returning(loop)
        if len(jobs) > 1 or returning:  # a burst, arriving or expected
            deadline = max(deadline, started + self.gather_gap_s)
        while rows < min(self.max_batch_size, returning or self.max_batch_size):
            remaining = min(deadline, started + max(self.batch_wait_s, self.max_gather_s)) - loop.time()
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
            # A burst: wait on while its requests keep coming.
            deadline = max(deadline, loop.time() + self.gather_gap_s)
        return jobs

    def _take_oversized(self) -> list[Job]:
        """A first job larger than a whole batch runs alone."""
        if self._pending and self._pending[0].rows > self.max_batch_size:
            return [self._pending.popleft()]
        return []

    def close(self) -> None:
        """Stop the generation thread once the current batch ends."""
        self._executor.shutdown(wait=False, cancel_futures=True)
