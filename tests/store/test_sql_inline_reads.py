"""SQLite reads: small answers (few spans, one row by key) run on the caller's thread, large ones on a worker."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from lightningstore import SpanIn, SqlStore
from lightningstore.sql.queries import INLINE_SPANS


def record_read_threads(store: SqlStore) -> list[str]:
    """From now on, the name of the thread each read transaction of `store` runs on."""
    threads: list[str] = []
    read_tx = store.database._read_tx

    def recording(fn: Any) -> Any:
        threads.append(threading.current_thread().name)
        return read_tx(fn)

    store.database._read_tx = recording  # type: ignore[method-assign]
    return threads


async def test_a_small_read_runs_on_the_calling_thread_and_a_large_one_on_a_worker(tmp_path: Path) -> None:
    store = SqlStore(tmp_path / "store.db")
    try:
        small = await store.start_rollout("small")
        large = await store.start_rollout("large")
        for claimed, count in ((small, 3), (large, INLINE_SPANS + 1)):
            await store.add_many_spans(
                [
                    SpanIn(rollout_id=claimed.rollout_id, attempt_id=claimed.attempt_id, trace_id="t",
                           span_id=f"s{i}", name="step")
                    for i in range(count)
                ]
            )  # fmt: skip
        threads = record_read_threads(store)
        assert [s.span_id for s in await store.query_spans(small.rollout_id)] == ["s0", "s1", "s2"]
        assert threads == [threading.current_thread().name]
        spans = await store.query_spans(large.rollout_id)
        assert [s.span_id for s in spans] == [f"s{i}" for i in range(INLINE_SPANS + 1)]
        # asked on this thread first (too big), then read on a worker
        assert threads[1] == threading.current_thread().name
        assert threads[2].startswith("lightningstore-read")
    finally:
        await store.close()


async def test_one_row_lookups_run_on_the_calling_thread_and_lists_on_a_worker(tmp_path: Path) -> None:
    store = SqlStore(tmp_path / "store.db")
    try:
        claimed = await store.start_rollout("one")
        threads = record_read_threads(store)
        rollout = await store.get_rollout_by_id(claimed.rollout_id)
        latest = await store.get_latest_attempt(claimed.rollout_id)
        assert rollout is not None and rollout.input == "one"
        assert latest is not None and latest.attempt_id == claimed.attempt_id
        assert await store.get_rollout_by_id("ro-missing") is None
        assert threads == [threading.current_thread().name] * 3
        assert [r.rollout_id for r in await store.query_rollouts()] == [claimed.rollout_id]
        assert threads[3].startswith("lightningstore-read")
    finally:
        await store.close()
