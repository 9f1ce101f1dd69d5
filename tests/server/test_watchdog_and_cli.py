"""The server's background watchdog, and the `lightningrl store serve` command line."""

from __future__ import annotations

import asyncio
import contextlib

from lightningstore import RolloutConfig, RolloutStatus, SqlStore
from lightningstore.server.watchdog import run_watchdog


async def _poll_status(
    store: SqlStore, rollout_id: str, want: RolloutStatus, seconds: float
) -> RolloutStatus:
    """The rollout's status once it is `want`, or the last one seen after `seconds` (bounded poll)."""
    status = None
    for _ in range(int(seconds / 0.02)):
        status = (await store.get_rollout_by_id(rollout_id)).status
        if status == want:
            break
        await asyncio.sleep(0.02)
    return status


async def test_watchdog_times_out_silent_attempts(sql_store: SqlStore) -> None:
    claim = await sql_store.start_rollout(1, config=RolloutConfig(timeout_seconds=0.05, max_attempts=1))
    task = asyncio.create_task(run_watchdog(sql_store, 0.02))
    try:
        assert (
            await _poll_status(sql_store, claim.rollout_id, RolloutStatus.FAILED, 5.0) == RolloutStatus.FAILED
        )
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert (await sql_store.get_latest_attempt(claim.rollout_id)).status == "timeout"


async def test_watchdog_survives_a_failing_sweep(sql_store: SqlStore) -> None:
    calls = 0
    real = sql_store.sweep_stale_attempts

    async def flaky(now: float | None = None):  # type: ignore[no-untyped-def]
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("database hiccup")
        return await real(now)

    sql_store.sweep_stale_attempts = flaky  # type: ignore[method-assign]
    claim = await sql_store.start_rollout(1, config=RolloutConfig(timeout_seconds=0.05, max_attempts=1))
    task = asyncio.create_task(run_watchdog(sql_store, 0.02))
    try:
        assert (
            await _poll_status(sql_store, claim.rollout_id, RolloutStatus.FAILED, 5.0) == RolloutStatus.FAILED
        )
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert calls >= 2


def test_cli_store_serve_options() -> None:
    from lightningrl.cli import build_parser

    args = build_parser().parse_args(
        [
            "store",
            "serve",
            "--db",
            "x.db",
            "--port",
            "5001",
            "--tokens-file",
            "t.json",
            "--sweep-interval",
            "0.5",
        ]
    )
    assert (args.db, args.host, args.port, args.tokens_file, args.sweep_interval) == (
        "x.db",
        "127.0.0.1",
        5001,
        "t.json",
        0.5,
    )
    assert args.func.__module__ == "lightningrl.commands.store"
