"""ResourceSetCache: one store read per resource set, however many rollouts name it."""

from __future__ import annotations

from lightningstore import LLM, SqlStore
from runner.resources import ResourceSetCache


class CountingStore:
    """The real store, counting `get_resources_by_id` calls."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.reads = 0

    async def get_resources_by_id(self, resources_id: str):
        self.reads += 1
        return await self.store.get_resources_by_id(resources_id)


async def test_a_set_is_read_once_and_unknown_ids_are_not_remembered(sql_store: SqlStore) -> None:
    llm = LLM(endpoints=["http://127.0.0.1:1/v1"], model="m")
    one = await sql_store.add_resource_version("llm", llm)
    two = await sql_store.add_resource_version("llm", llm.model_copy(update={"model": "m2"}))
    first = await sql_store.add_resource_set({"llm": one.version_id})
    second = await sql_store.add_resource_set({"llm": two.version_id})
    counting = CountingStore(sql_store)
    cache = ResourceSetCache(size=1)
    for _ in range(3):
        assert await cache.get(counting, first.resources_id) == first  # type: ignore[arg-type]
    assert counting.reads == 1
    assert await cache.get(counting, second.resources_id) == second  # type: ignore[arg-type]
    assert await cache.get(counting, first.resources_id) == first  # type: ignore[arg-type]
    assert counting.reads == 3  # size 1: the second set pushed the first out
    assert await cache.get(counting, "rs-nope") is None  # type: ignore[arg-type]
    assert await cache.get(counting, "rs-nope") is None  # type: ignore[arg-type]
    assert counting.reads == 5
