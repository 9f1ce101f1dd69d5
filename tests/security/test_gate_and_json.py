"""A real `python -m lightningstore.server` with a tokens file: a named approver token is served under its
name and gate evidence is recorded under the token's own identity, never a stated one; and every body
FastAPI would parse as JSON (any `application/*+json`, a charset) meets the same guard: 400, nothing stored."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from backends import LiveServer

from lightningrl.cli import main
from lightningrl.release import build_receipt
from lightningstore import PromptTemplate
from lightningstore.client.store_client import StoreClient
from lightningstore.gate import (
    Approval,
    Basis,
    DataSnapshot,
    EvidenceKind,
    EvidenceRecord,
    PlanBody,
    gate_records,
)

TOKENS = {
    "admin": "adm",
    "algorithm": "alg",
    "runner": "run",
    "approver": {"alice": "apr-alice", "bob": "apr-bob"},
}
ANON = "apr-anon"
"""An approver token without a name (from LIGHTNINGRL_APPROVER_TOKEN, beside the tokens file)."""
BASIS = Basis(evaluator=None, parent="x", train="t", holdout="h", protected="p")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    where: Path = tmp_path_factory.mktemp("gate-json")
    tokens = where / "tokens.json"
    tokens.write_text(json.dumps(TOKENS))
    live = LiveServer(
        where / "store.db",
        where / "server.log",
        extra_args=("--tokens-file", str(tokens)),
        env={"LIGHTNINGRL_APPROVER_TOKEN": ANON},
    )
    yield live.start()
    live.stop()


def _post(server: LiveServer, token: str, path: str, body: bytes, content_type: str | None) -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"}
    if content_type is not None:
        headers["content-type"] = content_type
    return httpx.post(f"{server.url}{path}", content=body, headers=headers, timeout=30)


async def _receipt(server: LiveServer) -> str:
    """A receipt filed by the learner over HTTP (a candidate and its parent)."""
    async with StoreClient(server.url, "alg", max_retries=0) as alg:
        parent = await alg.add_resource_version("p", PromptTemplate(template="one"))
        cand = await alg.add_resource_version(
            "p", PromptTemplate(template="two"), parent_id=parent.version_id
        )
        return (await build_receipt(alg, gate_records(alg), cand.version_id, created_by="learner")).receipt_id


def _approval(server: LiveServer, token: str, receipt_id: str, **fields: Any) -> httpx.Response:
    body = Approval(receipt_id=receipt_id, actor=fields.pop("body_actor"), basis=BASIS).model_dump(
        mode="json"
    )
    payload = json.dumps({"body": body, **fields}).encode()
    return _post(server, token, "/v1/gate/evidence", payload, "application/json")


def test_a_named_approver_is_served_and_records_only_under_its_own_name(
    server: LiveServer, capsys: pytest.CaptureFixture[str]
) -> None:
    rid = asyncio.run(_receipt(server))
    me = httpx.get(f"{server.url}/v1/gate/whoami", headers={"authorization": "Bearer apr-alice"})
    assert me.status_code == 200 and me.json() == {
        "role": "approver",
        "name": "alice",
        "recorded_by": "approver:alice",
    }

    # alice approves as herself (stated or not): recorded as `approver:alice`, the name from the tokens file.
    for fields in ({"body_actor": "alice"}, {"body_actor": "alice", "actor": "alice"}):
        answer = _approval(server, "apr-alice", rid, **fields)
        assert answer.status_code == 200, answer.text
        assert answer.json()["recorded_by"] == "approver:alice"
    # Stating another name, in the wrapper or in the approval itself, is refused naming both.
    for fields in (
        {"body_actor": "bob"},
        {"body_actor": "alice", "actor": "bob"},
        {"body_actor": "admin:bob"},
    ):
        refused = _approval(server, "apr-alice", rid, **fields)
        assert refused.status_code == 403, (fields, refused.text)
        message = refused.json()["message"]
        assert "'alice' may not record as" in message and "bob" in message
    # Where writers state labels (a plan filed under a run's name) the label is kept after the identity.
    plan = PlanBody(
        resource_name="p",
        parent_version_id="rv-x",
        train=DataSnapshot.of("train tasks", ["t1"]),
        holdout=DataSnapshot.of("val tasks", ["t2"]),
    )
    filed = _post(
        server,
        "apr-alice",
        "/v1/gate/plans",
        json.dumps({"body": plan.model_dump(mode="json"), "actor": "run-7"}).encode(),
        "application/json",
    )
    assert filed.status_code == 200 and filed.json()["created_by"] == "approver:alice (stated: run-7)"
    # An unnamed token records `approver:unnamed`; what it states is kept only as a label after that.
    anon = _approval(server, ANON, rid, body_actor="alice")
    assert anon.status_code == 200 and anon.json()["recorded_by"] == "approver:unnamed (stated: alice)"

    # The CLI over HTTP defaults its actor to the token's name, and a different --actor gets the 403.
    assert main(["release", "approve", rid, "--store", server.url, "--token", "apr-bob", "--json"]) == 0
    by_cli = json.loads(capsys.readouterr().out)
    assert by_cli["recorded_by"] == "approver:bob" and by_cli["body"]["actor"] == "bob"
    args = ["release", "approve", rid, "--store", server.url, "--token", "apr-bob", "--actor", "alice"]
    assert main(args) == 1
    assert "'bob' may not record as 'alice'" in capsys.readouterr().err

    listed = httpx.get(
        f"{server.url}/v1/gate/receipts/{rid}/evidence",
        params={"kind": EvidenceKind.APPROVAL.value},
        headers={"authorization": "Bearer adm"},
    )
    records = [EvidenceRecord.model_validate(r) for r in listed.json()]
    assert [r.recorded_by for r in records] == [  # every refusal stored nothing
        "approver:alice",
        "approver:alice",
        "approver:unnamed (stated: alice)",
        "approver:bob",
    ]

    # Pointer moves name the token too: the served app kept the names (`serve` used to drop them).
    async def move() -> str:
        async with StoreClient(server.url, "apr-alice", max_retries=0) as alice:
            version = (await alice.list_resource_versions("p"))[0]
            return (await alice.move_pointer("p", "approved", version.version_id, actor="alice")).actor

    assert asyncio.run(move()) == "approver:alice"


BAD = "__BAD__"
BAD_VALUES = {
    "300-deep array": ("[" * 300 + "]" * 300, "JSON nested deeper than 200"),
    "lone surrogate in a string": ('"\\ud800"', "lone UTF-16 surrogate"),
    "lone surrogate in a key": ('{"\\ud800": 1}', "lone UTF-16 surrogate"),
}
JSON_TYPES = [
    "application/json",
    "application/json; charset=utf-8",
    "application/vnd.x+json",
    "application/merge-patch+json",
]


def _with(template: Any, raw: str) -> bytes:
    """`template` as JSON with its BAD placeholder replaced by the raw JSON text `raw`."""
    return json.dumps(template).replace(f'"{BAD}"', raw).encode()


async def _attempt(server: LiveServer) -> tuple[str, str]:
    async with StoreClient(server.url, "adm", max_retries=0) as adm:
        rollout = await adm.start_rollout({"q": 1})
        return rollout.rollout_id, rollout.attempt.attempt_id


def _stored(server: LiveServer, rollout_id: str) -> dict[str, Any]:
    """What the routes under test have stored: rollouts, protected cases of `p-json`, the spans."""

    async def read() -> dict[str, Any]:
        async with StoreClient(server.url, "adm", max_retries=0) as adm:
            return {
                "rollouts": len(await adm.query_rollouts()),
                "cases": await gate_records(adm).list_protected_cases("p-json"),
                "spans": await adm.query_spans(rollout_id),
            }

    return asyncio.run(read())


@pytest.mark.parametrize("content_type", JSON_TYPES)
def test_every_json_content_type_meets_the_guard(server: LiveServer, content_type: str) -> None:
    rollout_id, attempt_id = asyncio.run(_attempt(server))
    span = {"rollout_id": rollout_id, "attempt_id": attempt_id, "trace_id": "t", "span_id": "s", "name": "n"}
    routes = {
        "enqueue": ("/v1/rollouts", [{"input": BAD}]),
        "start a rollout (FastAPI's own)": ("/v1/rollouts/start", {"input": BAD}),
        "gate": (
            "/v1/gate/protected-cases",
            {"case": {"resource_name": "p-json", "case_id": "c", "task_id": "t", "input": BAD}},
        ),
        "hot add spans": ("/v1/spans", [{**span, "attributes": {"a": BAD}}]),
    }
    before = _stored(server, rollout_id)
    for route, (path, template) in routes.items():
        for name, (raw, reason) in BAD_VALUES.items():
            send = httpx.put if route == "gate" else httpx.post
            answer = send(
                f"{server.url}{path}",
                content=_with(template, raw),
                headers={"authorization": "Bearer adm", "content-type": content_type},
                timeout=30,
            )
            assert answer.status_code == 400, (route, name, answer.text)
            assert reason in answer.json()["message"] and answer.json()["details"]["field"] == "body"
    assert _stored(server, rollout_id) == before  # nothing stored

    # The same routes take a well-formed body of that content type (the guard refuses only the bad).
    fine = _post(
        server, "adm", "/v1/spans", _with([{**span, "attributes": {"a": BAD}}], '"ok"'), content_type
    )
    assert fine.status_code == 200, fine.text


@pytest.mark.parametrize("content_type", ["text/json", None])
def test_a_body_fastapi_does_not_read_as_json_is_415_with_the_reason(
    server: LiveServer, content_type: str | None
) -> None:
    before = _stored(server, "none")["rollouts"]
    for raw, _ in BAD_VALUES.values():
        answer = _post(server, "adm", "/v1/rollouts", _with([{"input": BAD}], raw), content_type)
        assert answer.status_code == 415, answer.text
        assert "must be JSON sent as application/json" in answer.json()["message"]
        assert f"content type: {content_type or 'none'}" in answer.json()["message"]
    assert _stored(server, "none")["rollouts"] == before
