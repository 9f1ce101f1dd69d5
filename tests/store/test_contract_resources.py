"""Contract: resource versions, sets, pointers and their history."""

from __future__ import annotations

import pytest

from lightningstore import (
    LLM,
    ConflictError,
    InvalidInputError,
    LightningStore,
    NotFoundError,
    PromptTemplate,
    StoreClient,
)

llm = LLM(endpoints=["http://127.0.0.1:9/v1"], model="tiny")


async def test_versions_pointers_and_history(store: LightningStore) -> None:
    v1 = await store.add_resource_version("policy", llm, created_by="seed", artifact="ckpt/0")
    assert (await store.get_latest_version("policy")) == v1
    assert (await store.get_approved_version("policy")) == v1  # the first version is the baseline
    v2 = await store.add_resource_version(
        "policy", llm.model_copy(update={"checkpoint": "ckpt/1"}), parent_id=v1.version_id, created_by="algo"
    )
    assert v2.parent_id == v1.version_id
    assert (await store.get_latest_version("policy")).version_id == v2.version_id
    assert (await store.get_approved_version("policy")).version_id == v1.version_id  # only the gate moves it
    move = await store.move_pointer("policy", "approved", v2.version_id, actor="alice", reason="gate passed")
    assert move.previous_version_id == v1.version_id
    history = await store.query_pointer_history("policy", "approved")
    # Over HTTP the server records who moved `approved` by their credentials, the stated name after it.
    alice = (
        "alice"
        if not isinstance(store, StoreClient)
        else f"{history[-1].actor.split(' ')[0]} (stated: alice)"
    )
    assert [(h.version_id, h.actor) for h in history] == [(v1.version_id, "seed"), (v2.version_id, alice)]
    if isinstance(store, StoreClient):
        assert history[-1].actor.split(" ")[0] != "alice"  # an identity of the token, not the stated name
    assert len(await store.query_pointer_history("policy")) == 4
    assert [v.version_id for v in await store.list_resource_versions("policy")] == [
        v1.version_id,
        v2.version_id,
    ]
    assert await store.get_resource_version("rv-missing") is None
    assert await store.get_latest_version("unknown") is None


async def test_version_bad_input(store: LightningStore) -> None:
    v1 = await store.add_resource_version("policy", llm, version_id="rv-fixed")
    assert (await store.add_resource_version("policy", llm, version_id="rv-fixed")) == v1
    with pytest.raises(ConflictError):
        await store.add_resource_version(
            "policy", llm.model_copy(update={"model": "other"}), version_id="rv-fixed"
        )
    with pytest.raises(NotFoundError):
        await store.add_resource_version("policy", llm, parent_id="rv-missing")
    p = await store.add_resource_version("prompt", PromptTemplate(template="Q: {q}"))
    with pytest.raises(InvalidInputError, match="parent_id"):
        await store.add_resource_version("policy", llm, parent_id=p.version_id)
    with pytest.raises(InvalidInputError, match="resource"):
        await store.add_resource_version("policy", {"kind": "llm", "endpoints": [], "model": "m"})
    with pytest.raises(InvalidInputError, match="version_id"):
        await store.move_pointer("policy", "approved", p.version_id, actor="a")
    with pytest.raises(InvalidInputError, match="pointer"):
        await store.move_pointer("policy", "sideways", v1.version_id, actor="a")
    with pytest.raises(NotFoundError):
        await store.move_pointer("policy", "approved", "rv-missing", actor="a")
    assert len(await store.list_resource_versions()) == 2


async def test_resource_sets(store: LightningStore) -> None:
    assert await store.get_latest_resources() is None
    rs = await store.add_resources({"llm": llm, "prompt": PromptTemplate(template="Q: {q}")}, created_by="t")
    assert set(rs.resources) == {"llm", "prompt"}
    assert rs.resources["prompt"].format(q="2+2") == "Q: 2+2"
    got = await store.get_resources_by_id(rs.resources_id)
    assert got == rs
    assert (await store.get_latest_resources()).resources_id == rs.resources_id
    rs2 = await store.add_resource_set({"llm": rs.versions["llm"].version_id})
    assert (await store.get_latest_resources()).resources_id == rs2.resources_id
    with pytest.raises(NotFoundError):
        await store.add_resource_set({"llm": "rv-missing"})
    with pytest.raises(InvalidInputError):
        await store.add_resource_set({"prompt": rs.versions["llm"].version_id})
    r = await store.enqueue_rollout(1, resources_id=rs.resources_id)
    assert r.resources_id == rs.resources_id
    assert await store.get_resources_by_id("rs-missing") is None


async def test_nan_in_a_resource_or_its_metadata_is_refused(store: LightningStore) -> None:
    hot = LLM(endpoints=["http://127.0.0.1:9/v1"], model="tiny", sampling={"temperature": float("nan")})
    with pytest.raises(InvalidInputError, match=r"resource: holds nan at sampling\.temperature"):
        await store.add_resource_version("policy", hot)
    with pytest.raises(InvalidInputError, match="metadata: holds inf at loss"):
        await store.add_resource_version("policy", llm, metadata={"loss": float("inf")})
    assert await store.get_latest_version("policy") is None
