"""Bad requests get a 4xx with a reason: body limit, malformed JSON, validation, unknown ids, transitions."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from lightningstore import (
    MAX_READ_IDS,
    ConflictError,
    IllegalTransitionError,
    InvalidInputError,
    NotFoundError,
    StoreError,
)
from lightningstore.client.store_client import StoreClient, error_from_response
from lightningstore.server import build_app


async def test_body_limit_is_413_with_reason(raw_http) -> None:
    big = [{"input": "x" * 5000}]
    response = await raw_http.post("/v1/rollouts", json=big)
    assert response.status_code == 413
    assert "exceeds the limit of 4096 bytes" in response.json()["message"]

    async def chunks() -> AsyncIterator[bytes]:
        yield b'[{"input": "'
        for _ in range(10):
            yield b"y" * 1000
        yield b'"}]'

    streamed = await raw_http.post(
        "/v1/rollouts", content=chunks(), headers={"content-type": "application/json"}
    )
    assert streamed.status_code == 413 and streamed.json()["code"] == "payload_too_large"
    assert (await raw_http.post("/v1/rollouts/query", json={})).json() == []


async def test_malformed_and_invalid_bodies(raw_http) -> None:
    malformed = await raw_http.post(
        "/v1/rollouts/dequeue", content=b"{oops", headers={"content-type": "application/json"}
    )
    assert malformed.status_code == 400 and "malformed JSON" in malformed.json()["message"]
    invalid = await raw_http.post("/v1/rollouts/dequeue", json={"limit": "many"})
    assert invalid.status_code == 422
    body = invalid.json()
    assert (
        body["code"] == "invalid_input" and body["details"]["field"] == "limit" and "many" in body["message"]
    )
    extra = await raw_http.post("/v1/rollouts/query", json={"bogus": 1})
    assert extra.status_code == 422 and "bogus" in extra.json()["message"]
    missing = await raw_http.get("/v1/no-such-route")
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"
    wrong_method = await raw_http.delete("/v1/rollouts/query")
    assert wrong_method.status_code == 405


async def test_unknown_ids_404_and_illegal_moves_409(raw_http, sql_store) -> None:
    assert (await raw_http.get("/v1/rollouts/ro-missing")).status_code == 404
    assert (await raw_http.get("/v1/rollouts/ro-missing/attempts")).status_code == 404
    heartbeat = await raw_http.post("/v1/rollouts/ro-missing/attempts/at-x/heartbeat", json={})
    assert heartbeat.status_code == 404 and heartbeat.json()["details"] == {
        "kind": "attempt",
        "ident": "at-x",
    }
    rollout = await sql_store.enqueue_rollout(1)
    illegal = await raw_http.patch(f"/v1/rollouts/{rollout.rollout_id}", json={"status": "succeeded"})
    assert illegal.status_code == 409
    assert (
        illegal.json()["code"] == "illegal_transition" and "queuing -> succeeded" in illegal.json()["message"]
    )


async def test_client_maps_codes_to_typed_errors(raw_http, sql_store) -> None:
    rollout = await sql_store.enqueue_rollout(1)
    cases = [
        (
            raw_http.patch(f"/v1/rollouts/{rollout.rollout_id}", json={"status": "succeeded"}),
            IllegalTransitionError,
        ),
        (raw_http.post("/v1/rollouts", json=[{"input": 2, "rollout_id": rollout.rollout_id}]), ConflictError),
        (raw_http.get("/v1/resource-versions/rv-none"), NotFoundError),
        (raw_http.post("/v1/rollouts/dequeue", json={"limit": 0}), InvalidInputError),
        (raw_http.post("/v1/rollouts/dequeue", json={"wait": -1}), InvalidInputError),
        (raw_http.post("/v1/rollouts/dequeue", json={"wait": 3600}), InvalidInputError),
    ]
    for request, expected in cases:
        error = error_from_response(await request)
        assert type(error) is expected, error
    illegal = error_from_response(
        await raw_http.patch(f"/v1/rollouts/{rollout.rollout_id}", json={"status": "succeeded"})
    )
    assert (illegal.current, illegal.new) == ("queuing", "succeeded")


async def test_ids_with_reserved_characters_roundtrip(sql_store, raw_http) -> None:
    client = StoreClient("http://127.0.0.1", transport=raw_http._transport, max_retries=0)
    for rollout_id in ("a/b", "50%", "x?y#z", "sp ace", "ü"):
        await client.enqueue_rollout({"id": rollout_id}, rollout_id=rollout_id)
        assert (await client.get_rollout_by_id(rollout_id)).input == {"id": rollout_id}
        assert await client.query_attempts(rollout_id) == []
    assert await client.get_rollout_by_id("a%2Fb") is None


async def test_client_gives_up_within_its_budget() -> None:
    client = StoreClient("http://127.0.0.1:9", max_retries=2, retry_seconds=5)
    with pytest.raises(StoreError, match="failed after 3 tries"):
        await client.query_rollouts()
    await client.close()


async def test_batch_reads_answer_bad_bodies_with_a_reason(raw_http) -> None:
    for path in ("/v1/spans/query", "/v1/rewards/query"):
        too_many = await raw_http.post(path, json={"rollout_ids": [f"r{i}" for i in range(MAX_READ_IDS + 1)]})
        assert too_many.status_code == 413  # over the 4 KiB body limit of this app: refused before parsing
        wrong_type = await raw_http.post(path, json={"rollout_ids": "ro-1"})
        body = wrong_type.json()
        assert wrong_type.status_code == 422 and body["code"] == "invalid_input"
        assert body["details"]["field"] == "rollout_ids" and "ro-1" in body["message"]
        not_strings = await raw_http.post(path, json={"rollout_ids": ["ro-1", 7]})
        assert not_strings.status_code == 422 and "rollout_ids.1" in not_strings.json()["message"]
        missing = await raw_http.post(path, json={})
        assert missing.status_code == 422 and missing.json()["details"]["field"] == "rollout_ids"
        extra = await raw_http.post(path, json={"rollout_ids": [], "bogus": 1})
        assert extra.status_code == 422 and "bogus" in extra.json()["message"]
        assert (await raw_http.post(path, json={"rollout_ids": ["ro-1"]})).json() == {"ro-1": []}
    attempt = await raw_http.post("/v1/spans/query", json={"rollout_ids": [], "attempt": "at-1"})
    assert attempt.status_code == 422 and attempt.json()["details"]["field"] == "attempt"
    quoted = await raw_http.post("/v1/spans/query", json={"rollout_ids": ["ro-1"], "attributes": ['a"b']})
    assert quoted.status_code == 422 and quoted.json()["details"]["field"] == "attributes"
    assert "quotes" in quoted.json()["message"]


async def test_batch_read_id_limit_over_http(sql_store) -> None:
    """Past the body limit, the id limit itself answers 422 naming the field and the count."""
    app = build_app(sql_store, sweep_interval=None)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        ids = [f"r{i}" for i in range(MAX_READ_IDS + 1)]
        for path in ("/v1/spans/query", "/v1/rewards/query"):
            response = await http.post(path, json={"rollout_ids": ids})
            body = response.json()
            assert response.status_code == 422 and body["details"]["field"] == "rollout_ids"
            assert f"at most {MAX_READ_IDS}" in body["message"]
            assert (
                len((await http.post(path, json={"rollout_ids": ids[:MAX_READ_IDS]})).json()) == MAX_READ_IDS
            )


async def test_an_integer_beyond_64_bits_is_422_with_reason(raw_http) -> None:
    response = await raw_http.post("/v1/rollouts", json=[{"input": {"n": 2**70}}])
    assert response.status_code == 422
    body = response.json()
    assert body["code"] == "invalid_input" and "64 bits" in body["message"]
    assert (await raw_http.post("/v1/rollouts/query", json={})).json() == []


async def test_nan_and_infinity_literals_are_422_naming_the_field_and_kept_as_strings_in_spans(
    raw_http,
) -> None:
    # Python's json (and so httpx's `json=`) writes NaN and Infinity as bare literals; so may others.
    json_type = {"content-type": "application/json"}
    for path, body, field in [
        ("/v1/rollouts", b'[{"input": {"x": NaN}}]', "input"),
        ("/v1/rollouts/start", b'{"input": 1, "metadata": {"m": -Infinity}}', "metadata"),
    ]:
        response = await raw_http.post(path, content=body, headers=json_type)
        assert response.status_code == 422, response.text
        assert response.json()["code"] == "invalid_input" and response.json()["message"].startswith(
            f"{field}: holds"
        )
    assert (await raw_http.post("/v1/rollouts/query", json={})).json() == []

    claimed = (await raw_http.post("/v1/rollouts/start", json={"input": 1})).json()
    rollout_id, attempt_id = claimed["rollout"]["rollout_id"], claimed["attempt"]["attempt_id"]
    patched = await raw_http.patch(
        f"/v1/rollouts/{rollout_id}", content=b'{"metadata": {"a": NaN}}', headers=json_type
    )
    assert patched.status_code == 422 and patched.json()["message"].startswith("metadata: holds nan at a")
    span = (
        b'[{"rollout_id": "%s", "attempt_id": "%s", "trace_id": "t", "span_id": "s", "name": "chat",'
        b' "attributes": {"logprob": -Infinity}}]' % (rollout_id.encode(), attempt_id.encode())
    )
    stored = await raw_http.post("/v1/spans", content=span, headers=json_type)
    assert stored.status_code == 200 and stored.json()[0]["attributes"] == {"logprob": "-Infinity"}
    assert (await raw_http.get(f"/v1/rollouts/{rollout_id}")).json()["metadata"] == {}
