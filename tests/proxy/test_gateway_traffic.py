"""Traffic through the gateway: isolation, sticky routing, reloads, pause/drain, retries."""

from __future__ import annotations

import asyncio
from collections import Counter

import httpx
from conftest import SERVED, TOKENS, Env

from lightningstore import LLM, semconv
from lightningstore.proxy import endpoint_order

ADMIN = {"Authorization": f"Bearer {TOKENS['algorithm']}"}


async def test_32_concurrent_rollouts_get_only_their_own_spans_on_their_own_server(env: Env) -> None:
    claimed = await asyncio.gather(*(env.attempt() for _ in range(32)))

    async def agent(index: int) -> list[str]:
        client = env.client(claimed[index], max_retries=0)
        texts = []
        for turn in range(2):
            question = [{"role": "user", "content": f"rollout {index} turn {turn}"}]
            reply = await client.chat.completions.create(model=SERVED, messages=question, max_tokens=4)
            texts.append(reply.choices[0].message.content)
        return texts

    answers = await asyncio.gather(*(agent(i) for i in range(32)))
    homes = Counter()
    for index, (one, texts) in enumerate(zip(claimed, answers, strict=True)):
        spans = await env.spans(one)
        assert [env.reference.decode(s.attributes[semconv.LLM_RESPONSE_TOKEN_IDS]) for s in spans] == texts
        for turn, span in enumerate(spans):
            prompt = env.reference.decode(span.attributes[semconv.LLM_PROMPT_TOKEN_IDS])
            assert f"rollout {index} turn {turn}" in prompt
        upstreams = {s.attributes[semconv.LLM_UPSTREAM] for s in spans}
        assert upstreams == {endpoint_order(one.rollout_id, env.endpoints)[0]}  # sticky
        homes.update(upstreams)
    assert set(homes) == set(env.endpoints)  # different rollouts spread over both servers


async def test_a_weight_reload_during_traffic_fails_no_request(env: Env) -> None:
    claimed = await asyncio.gather(*(env.attempt() for _ in range(8)))
    reloaded = asyncio.Event()

    async def agent(index: int) -> list[str | None]:
        """Calls until both servers have reloaded, and once more after."""
        client = env.client(claimed[index], max_retries=0)
        reasons: list[str | None] = []
        while not reloaded.is_set() or len(reasons) < 2:
            question = [{"role": "user", "content": f"q{index} {len(reasons)}"}]
            reply = await client.chat.completions.create(model=SERVED, messages=question, max_tokens=8)
            reasons.append(reply.choices[0].finish_reason)
        return reasons

    calls = asyncio.gather(*(agent(i) for i in range(8)))
    await asyncio.sleep(0.1)
    async with httpx.AsyncClient() as http:
        # One after the other: both servers share this process, and concurrent from_pretrained calls in
        # one process are not thread-safe in transformers (separate processes, as deployed, are fine).
        reloads = [await http.post(f"{b.url}/reload", timeout=60) for b in env.backends]
        reloaded.set()
        metrics = [(await http.get(f"{b.url}/metrics")).json() for b in env.backends]
    assert all(r.status_code == 200 for r in reloads) and all(m["reloads"] >= 1 for m in metrics)
    reasons = await calls
    assert all(reason in ("stop", "length") for per_agent in reasons for reason in per_agent)
    for one, per_agent in zip(claimed, reasons, strict=True):
        spans = await env.spans(one)
        assert len(spans) == len(per_agent)
        assert all(s.status.status_code == "OK" and s.attributes[semconv.LLM_TRAINABLE] for s in spans)


async def test_pause_holds_new_calls_drain_waits_for_running_ones_resume_releases(env: Env) -> None:
    first, second = await env.attempt(), await env.attempt()
    async with httpx.AsyncClient(base_url=f"{env.url}/proxy/admin", headers=ADMIN) as admin:
        running = asyncio.create_task(
            env.client(first).chat.completions.create(
                model=SERVED,
                messages=[{"role": "user", "content": "long"}],
                max_tokens=40,
                extra_body={"ignore_eos": True},
            )
        )
        while env.gateway.pause_switch.in_flight == 0:
            await asyncio.sleep(0.005)
        paused = (await admin.post("/pause")).json()
        assert paused["paused"] is True and paused["in_flight"] == 1
        held = asyncio.create_task(
            env.client(second).chat.completions.create(
                model=SERVED, messages=[{"role": "user", "content": "x"}]
            )
        )
        drained = (await admin.post("/drain", params={"timeout_s": 30})).json()
        assert drained["drained"] is True and drained["in_flight"] == 0
        assert len(await env.spans(first)) == 1  # finished and recorded before the drain returned
        assert (await running).choices[0].finish_reason == "length"
        await asyncio.sleep(0.2)
        assert not held.done() and (await admin.get("/status")).json()["waiting"] == 1
        resumed = (await admin.post("/resume")).json()
        assert resumed["paused"] is False
        assert (await held).choices[0].message.content is not None
        assert len(await env.spans(second)) == 1
        assert (await admin.post("/drain", params={"timeout_s": 5})).json()["in_flight"] == 0


async def test_admin_routes_need_the_admin_or_algorithm_token(env: Env) -> None:
    async with httpx.AsyncClient(base_url=f"{env.url}/proxy/admin") as http:
        for token in (TOKENS["runner"], TOKENS["approver"]):
            response = await http.post("/pause", headers={"Authorization": f"Bearer {token}"})
            assert response.status_code == 403, response.text
        assert (await http.post("/pause")).status_code == 401
        ok = await http.get("/status", headers={"Authorization": f"Bearer {TOKENS['admin']}"})
        assert ok.status_code == 200 and ok.json()["paused"] is False


async def _stub_attempt(env: Env, endpoints: list[str]) -> tuple:
    resources = await env.store.add_resources({"llm": LLM(endpoints=endpoints, model="stub-model")})
    return await env.attempt(resources.resources_id)


async def test_5xx_and_429_are_retried_with_backoff(env: Env) -> None:
    claimed = await _stub_attempt(env, [f"{env.stub.url}/v1"])
    env.stub.app.state.fail = [503, 429]
    reply = await env.client(claimed, max_retries=0).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}]
    )
    assert reply.choices[0].message.content == "stub answer"
    (span,) = await env.spans(claimed)
    assert span.attributes[semconv.LLM_RETRIES] == 2
    assert span.attributes[semconv.LLM_RESPONSE_TOKEN_IDS] == [5, 6, 7]
    assert span.attributes[semconv.LLM_PROMPT_TOKEN_IDS] == [1, 2]


async def test_an_upstream_error_reaches_the_agent_and_the_span(env: Env) -> None:
    claimed = await _stub_attempt(env, [f"{env.stub.url}/v1"])
    env.stub.app.state.fail = [400]
    async with httpx.AsyncClient() as http:
        response = await http.post(
            f"{env.base_url(claimed.rollout_id, claimed.attempt_id)}/chat/completions",
            json={"messages": [{"role": "user", "content": "hi"}]},
            headers={"Authorization": f"Bearer {TOKENS['runner']}"},
        )
    assert response.status_code == 400 and "stub failure 400" in response.text
    (span,) = await env.spans(claimed)
    assert span.status.status_code == "ERROR" and "stub failure 400" in span.status.description
    assert span.attributes[semconv.LLM_TRAINABLE] is False


async def test_connection_errors_fail_over_then_give_up_with_502(env: Env) -> None:
    dead = "http://127.0.0.1:9/v1"  # the discard port: nothing listens on loopback
    claimed = await _stub_attempt(env, [dead, f"{env.stub.url}/v1"])
    reply = await env.client(claimed, max_retries=0).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "x"}]
    )
    assert reply.choices[0].message.content == "stub answer"
    (span,) = await env.spans(claimed)
    assert span.attributes[semconv.LLM_UPSTREAM] == f"{env.stub.url}/v1"

    claimed = await _stub_attempt(env, [dead])
    async with httpx.AsyncClient() as http:
        response = await http.post(
            f"{env.base_url(claimed.rollout_id, claimed.attempt_id)}/chat/completions",
            json={"messages": [{"role": "user", "content": "hi"}]},
            headers={"Authorization": f"Bearer {TOKENS['admin']}"},
        )
    assert response.status_code == 502 and "unreachable after 4 tries" in response.json()["error"]["message"]
    (span,) = await env.spans(claimed)
    assert span.status.status_code == "ERROR" and span.attributes[semconv.LLM_RETRIES] == 3


async def test_a_stream_without_token_ids_is_recorded_as_text_only(env: Env) -> None:
    claimed = await _stub_attempt(env, [f"{env.stub.url}/v1"])
    stream = await env.client(claimed).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "x"}], stream=True
    )
    text = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    (span,) = await env.spans(claimed)
    assert text == "stub answer" == span.attributes[semconv.LLM_RESPONSE_TEXT]
    assert span.attributes[semconv.LLM_TRAINABLE] is False and span.status.status_code == "OK"
    assert semconv.LLM_RESPONSE_TOKEN_IDS not in span.attributes
