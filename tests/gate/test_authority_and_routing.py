"""Authority over HTTP (only approvers move `approved`; the learner cannot write what judges it) and
production runners following `approved` through the proxy, before and after a rollback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from live import SECRET, TOKENS, serve, store_app, stub_upstream
from openai import AsyncOpenAI

from lightningrl.release import CanaryTask, build_receipt, production_run, rollback
from lightningstore import LLM, PermissionDeniedError, SqlStore
from lightningstore.client.store_client import StoreClient
from lightningstore.gate import (
    Approval,
    Basis,
    Evaluator,
    EvidenceKind,
    GatePolicy,
    ProtectedCase,
    gate_records,
)


async def chat_agent(task: dict[str, Any], resources: Any) -> float:
    """A plain-openai agent: one call through the proxy."""
    llm = resources.llm
    async with AsyncOpenAI(base_url=llm.base_url, api_key=llm.api_key, max_retries=0, timeout=30) as client:
        answer = await client.chat.completions.create(
            model=llm.model, messages=[{"role": "user", "content": task["q"]}], max_tokens=4
        )
    return 1.0 if answer.choices[0].message.content else 0.0


async def test_authority_and_production_routing(tmp_path: Path) -> None:
    store = SqlStore(tmp_path / "store.db")
    with serve(stub_upstream()) as stub, serve(store_app(store)) as url:
        clients = {role: StoreClient(url, token, max_retries=0) for role, token in TOKENS.items()}
        alg, apr, adm = clients["algorithm"], clients["approver"], clients["admin"]
        parent = await alg.add_resource_version("llm", LLM(endpoints=[f"{stub}/parent/v1"], model="m"))
        cand = await alg.add_resource_version(
            "llm", LLM(endpoints=[f"{stub}/candidate/v1"], model="m"), parent_id=parent.version_id
        )

        # Only the approver (or admin) moves `approved`; the learner's token gets 403.
        with pytest.raises(PermissionDeniedError) as denied:
            await alg.move_pointer("llm", "approved", cand.version_id, actor="learner")
        assert denied.value.status_code == 403  # type: ignore[attr-defined]
        await apr.move_pointer("llm", "approved", cand.version_id, actor="alice", reason="test promote")

        # The evaluator, protected cases, policy and approvals are not the learner's to write.
        alg_gate, apr_gate, adm_gate = gate_records(alg), gate_records(apr), gate_records(adm)
        writes = [
            lambda g: g.register_evaluator(Evaluator(name="judge", version="1"), recorded_by="x"),
            lambda g: g.put_policy(GatePolicy(resource_name="llm", retry_budget=99), recorded_by="x"),
            lambda g: g.put_protected_case(
                ProtectedCase(resource_name="llm", case_id="c", task_id="t"), recorded_by="x"
            ),
        ]
        for write in writes:
            for forbidden in (alg_gate, apr_gate):
                with pytest.raises(PermissionDeniedError):
                    await write(forbidden)
            await write(adm_gate)
        receipt = await build_receipt(
            alg, alg_gate, cand.version_id, created_by="learner"
        )  # filing is allowed
        assert receipt.evaluator is None  # policy names no evaluator: pinned-identity will be unavailable
        basis = Basis(evaluator=None, parent="x", train="t", holdout="h", protected="p")
        with pytest.raises(PermissionDeniedError):
            await alg_gate.add_evidence(
                Approval(receipt_id=receipt.receipt_id, actor="learner", basis=basis), recorded_by="learner"
            )
        assert (await adm_gate.get_policy("llm")).retry_budget == 99

        # Production runners (rollouts without resources_id) follow `approved` through the proxy.
        tasks = [CanaryTask(f"q{i}", {"q": f"question {i}"}) for i in range(3)]
        proof = await production_run(
            store,
            chat_agent,
            tasks,
            expected_version_id=cand.version_id,
            proxy_url=f"{url}/proxy",
            agent_key_secret=SECRET,
        )
        assert proof.ok, proof

        # Rollback with the approver's token: `approved` back to the exact parent, routing follows.
        record = await rollback(apr, apr_gate, receipt.receipt_id, actor="alice")
        # The token has no name: the record says so, "alice" only as what it stated.
        assert record.recorded_by == "approver:unnamed (stated: alice)"
        assert record.body.routed_version_id == parent.version_id
        proof = await production_run(
            store,
            chat_agent,
            tasks,
            expected_version_id=parent.version_id,
            proxy_url=f"{url}/proxy",
            agent_key_secret=SECRET,
        )
        assert proof.ok and proof.served == {parent.version_id: 3}, proof
        history = await apr.query_pointer_history("llm", "approved")
        assert [m.version_id for m in history] == [parent.version_id, cand.version_id, parent.version_id]
        assert [m.actor for m in history][1:] == ["approver (stated: alice)"] * 2  # the token has no name
        kinds = [e.kind for e in await apr_gate.list_evidence(receipt.receipt_id)]
        assert kinds == [EvidenceKind.ROLLBACK]
        for client in clients.values():
            await client.close()
    await store.close()
