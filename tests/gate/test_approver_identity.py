"""Who moves `approved` over HTTP is decided by the credentials: the gate policy's named approvers are
enforced by the server, and the pointer history names the token's identity, never a stated name alone.
Gate evidence too is recorded under the token's own name, and only that name counts for a plan."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from live import serve
from scenario import NAME, Spec, build_branch, gather_evidence, setup_gate

from algorithm import Task
from lightningrl.release import approve, check_receipt, file_plan, tasks_snapshot
from lightningstore import PermissionDeniedError, PromptTemplate, SqlStore
from lightningstore.auth import TokenConfig
from lightningstore.client.store_client import StoreClient
from lightningstore.gate import CheckName, CheckStatus, EvidenceKind, GatePolicy, gate_records
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


async def test_only_the_plans_named_approvers_own_tokens_approve_the_canary(tmp_path: Path) -> None:
    """An approver may not state another's name (403, nothing stored); an unnamed token's approval,
    whatever it states, and a named one not in the plan never satisfy the plan's canary approvers."""
    store = SqlStore(tmp_path / "store.db")
    gate = gate_records(store)
    root = await setup_gate(store, gate, tmp_path / "root")
    policy = await gate.policy_or_default(NAME)
    await gate.put_policy(policy.model_copy(update={"canary_approvers": ["alice"]}), recorded_by="admin:ops")
    tasks = [Task(task_id=f"t{i}", input={"q": i}) for i in range(4)]
    plan = await file_plan(
        gate,
        NAME,
        root.version_id,
        train=tasks_snapshot("train tasks", tasks),
        holdout=tasks_snapshot("val tasks", tasks[:2]),
        algorithm_config={"lr": 1e-3},
    )
    branch = await build_branch(store, root, Spec("A", plan_id=plan.plan_id), tmp_path)
    rid = (await gather_evidence(store, gate, branch, tmp_path)).receipt_id

    tokens = TokenConfig.from_mapping(TOKENS).merged(TokenConfig.from_mapping({"approver": "apr-anon"}))
    with serve(build_app(store, tokens=tokens, sweep_interval=None, proxy=False)) as url:
        clients = {t: StoreClient(url, t, max_retries=0) for t in ("apr-carol", "apr-anon", "apr-alice")}
        carol, anon, alice = ((c, gate_records(c)) for c in clients.values())

        async def rollback_check() -> tuple[CheckStatus, str]:
            found = (await check_receipt(store, gate, rid, record=False)).check(CheckName.ROLLBACK)
            return found.status, found.reason

        with pytest.raises(PermissionDeniedError) as denied:  # carol says she is alice
            await approve(*carol, rid, actor="alice", recorded_by="approver:alice")
        assert "the approver token 'carol' may not record as 'alice'" in str(denied.value)
        assert await gate.list_evidence(rid, EvidenceKind.APPROVAL) == []  # nothing stored

        # An unnamed token stating alice, and carol as herself: recorded so, and neither counts.
        await approve(*anon, rid, actor="alice", recorded_by="approver:alice")
        await approve(*carol, rid, actor="carol")
        status, reason = await rollback_check()
        assert status == CheckStatus.UNAVAILABLE and "from alice" in reason
        # alice's own token does.
        await approve(*alice, rid, actor="alice")
        status, reason = await rollback_check()
        assert status == CheckStatus.PASS and reason.endswith("approved by approver:alice")
        recorded = [e.recorded_by for e in await gate.list_evidence(rid, EvidenceKind.APPROVAL)]
        assert recorded == ["approver:unnamed (stated: alice)", "approver:carol", "approver:alice"]
        for client in clients.values():
            await client.close()
    await store.close()
