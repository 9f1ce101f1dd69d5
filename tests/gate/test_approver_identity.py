"""Who moves `approved` over HTTP is decided by the credentials: the gate policy's named approvers are
enforced by the server, and the pointer history names the token's identity, never a stated name alone."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from live import serve

from lightningstore import PermissionDeniedError, PromptTemplate, SqlStore
from lightningstore.auth import TokenConfig
from lightningstore.client import StoreClient
from lightningstore.gate import GatePolicy, gate_records
from lightningstore.server import build_app

TOKENS = {
    "admin": "adm",
    "algorithm": "alg",
    "approver": {"alice": "apr-alice", "carol": "apr-carol"},
    "viewer": "view",
}


async def test_only_the_policys_approvers_move_approved(tmp_path: Path) -> None:
    store = SqlStore(tmp_path / "store.db")
    app = build_app(store, tokens=TokenConfig.from_mapping(TOKENS), sweep_interval=None, proxy=False)
    with serve(app) as url:
        alg, adm = StoreClient(url, "alg", max_retries=0), StoreClient(url, "adm", max_retries=0)
        alice = StoreClient(url, "apr-alice", max_retries=0)
        carol = StoreClient(url, "apr-carol", max_retries=0)
        v1 = await alg.add_resource_version("p", PromptTemplate(template="one"))
        v2 = await alg.add_resource_version("p", PromptTemplate(template="two"), parent_id=v1.version_id)
        await gate_records(adm).put_policy(
            GatePolicy(resource_name="p", default_approvers=["alice"]), recorded_by="ops"
        )

        before = await store.query_pointer_history("p", "approved")
        # carol holds an approver token, but the policy names only alice: 403, whatever she calls herself.
        for stated in ("carol", "alice", "admin:bob"):
            with pytest.raises(PermissionDeniedError) as denied:
                await carol.move_pointer("p", "approved", v2.version_id, actor=stated)
            reason = str(denied.value)
            assert "'carol' may not move approved of 'p'" in reason and "names alice" in reason
        assert await store.query_pointer_history("p", "approved") == before  # nothing moved

        # alice may; a stated "admin:bob" is kept only as what she said, after her own identity.
        await alice.move_pointer("p", "approved", v2.version_id, actor="admin:bob")
        await alice.move_pointer("p", "approved", v1.version_id, actor="alice", reason="back")
        # An admin may always (it may rewrite the policy); it is recorded as the admin it is.
        await adm.move_pointer("p", "approved", v2.version_id, actor="ops")
        history = (await alice.query_pointer_history("p", "approved"))[len(before) :]
        assert [m.actor for m in history] == [
            "approver:alice (stated: admin:bob)",
            "approver:alice",
            "admin (stated: ops)",
        ]
        assert not any(m.actor.startswith("admin:") for m in history)

        # Raw HTTP says why, with a 403.
        raw = httpx.put(
            f"{url}/v1/pointers",
            json={"name": "p", "pointer": "approved", "version_id": v1.version_id, "actor": "admin:bob"},
            headers={"authorization": "Bearer apr-carol"},
        )
        assert raw.status_code == 403 and "default approvers" in raw.json()["message"]
        for client in (alg, adm, alice, carol):
            await client.close()
    await store.close()


async def test_without_named_approvers_any_approver_moves_approved_under_its_identity(tmp_path: Path) -> None:
    store = SqlStore(tmp_path / "store.db")
    tokens = TokenConfig.from_mapping({"algorithm": "alg", "approver": "apr"})
    with serve(build_app(store, tokens=tokens, sweep_interval=None, proxy=False)) as url:
        alg, apr = StoreClient(url, "alg", max_retries=0), StoreClient(url, "apr", max_retries=0)
        v1 = await alg.add_resource_version("p", PromptTemplate(template="one"))
        move = await apr.move_pointer("p", "approved", v1.version_id, actor="admin:bob")
        assert move.actor == "approver (stated: admin:bob)"  # the role comes from the token, not the body
        for client in (alg, apr):
            await client.close()
    await store.close()


def test_named_tokens() -> None:
    config = TokenConfig.from_mapping(TOKENS)
    alice = config.resolve("apr-alice")
    assert alice is not None and alice.name == "alice" and alice.identity == "approver:alice"
    viewer = config.resolve("view")
    assert viewer is not None and viewer.name is None and viewer.identity == "viewer"
    with pytest.raises(ValueError, match="hold no ':'"):
        TokenConfig.from_mapping({"approver": {"admin:bob": "t"}})
