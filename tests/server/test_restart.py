"""Kill -9 the server while clients stream spans; after a restart the database holds exactly the spans sent."""

from __future__ import annotations

import asyncio

from backends import LiveServer

from lightningstore import SpanIn, SqlStore
from lightningstore.client.store_client import StoreClient

STREAMS, BATCHES, PER_BATCH = 5, 10, 10  # 500 spans


async def test_sigkill_mid_stream_loses_and_duplicates_nothing(tmp_path) -> None:
    server = LiveServer(tmp_path / "store.db", tmp_path / "server.log").start()
    client = StoreClient(server.url, retry_seconds=60)
    claim = await client.start_rollout({"q": 1})
    halfway = asyncio.Event()
    sent = 0

    async def stream(k: int) -> None:
        nonlocal sent
        for b in range(BATCHES):
            spans = [
                SpanIn(
                    rollout_id=claim.rollout_id,
                    attempt_id=claim.attempt_id,
                    trace_id=f"t{k}",
                    span_id=f"s{k}-{b}-{i}",
                    name="chat",
                    attributes={"payload": "x" * 512},
                )
                for i in range(PER_BATCH)
            ]
            await client.add_many_spans(spans)
            sent += PER_BATCH
            if sent >= STREAMS * BATCHES * PER_BATCH // 4:
                halfway.set()

    try:
        tasks = [asyncio.create_task(stream(k)) for k in range(STREAMS)]
        await asyncio.wait_for(halfway.wait(), timeout=30)
        server.kill()
        assert not all(t.done() for t in tasks), "the stream must still be running when the server dies"
        await asyncio.to_thread(server.start)  # same port and database; clients retry meanwhile
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=120)
        stored = await client.query_spans(claim.rollout_id)
    finally:
        await client.close()
        server.stop()
    expected = {f"s{k}-{b}-{i}" for k in range(STREAMS) for b in range(BATCHES) for i in range(PER_BATCH)}
    assert client.retries > 0
    assert len(stored) == len(expected) and {s.span_id for s in stored} == expected
    direct = SqlStore(tmp_path / "store.db")
    assert (await direct.statistics()).total_spans == len(expected)
    await direct.close()
