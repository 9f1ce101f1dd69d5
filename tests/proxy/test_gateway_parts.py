"""The gateway's pure parts: sampling merge, sticky routing, recording, shaping, backoff."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from lightningstore import LLM, semconv
from lightningstore.llm_call import AGENT_SAMPLING_KEYS, request_attributes
from lightningstore.llm_record import CallRecord
from lightningstore.proxy import ProxyConfig, endpoint_order
from lightningstore.proxy.request import prepare
from lightningstore.proxy.shape import shape_for_agent
from lightningstore.proxy.upstream import Upstream

RESOURCE = LLM(
    endpoints=["http://a/v1"],
    model="policy-7",
    sampling={"temperature": 1.0, "max_tokens": 64},
    sampling_by_mode={"val": {"temperature": 0.0}, "train": {"top_p": 0.9}},
)
OPTED_OUT = ProxyConfig(mode_overrides_win=frozenset({"val", "test"}))
CHAT = {"model": "gpt", "messages": [{"role": "user", "content": "x"}]}


@pytest.mark.parametrize(
    ("mode", "agent", "config", "expected"),
    [
        ("train", {}, ProxyConfig(), {"temperature": 1.0, "max_tokens": 64, "top_p": 0.9}),
        ("train", {"temperature": 0.2, "top_p": 0.5}, ProxyConfig(), {"temperature": 1.0, "top_p": 0.9}),
        ("train", {"temperature": 0.2, "top_p": 0.5}, OPTED_OUT, {"temperature": 0.2, "top_p": 0.5}),
        ("train", {"temperature": None}, ProxyConfig(), {"temperature": 1.0}),
        ("train", {"temperature": 0.2}, ProxyConfig(defaults_win=True), {"temperature": 1.0}),
        ("val", {"temperature": 0.8, "max_tokens": 5}, ProxyConfig(), {"temperature": 0.0, "max_tokens": 5}),
        ("val", {"temperature": 0.8}, ProxyConfig(mode_overrides_win=frozenset()), {"temperature": 0.8}),
        # Test mode is greedy (MODE_SAMPLING) though the resource names other modes only.
        ("test", {}, ProxyConfig(), {"temperature": 0.0, "max_tokens": 64}),
    ],
)
def test_sampling_merge(mode: str, agent: dict, config: ProxyConfig, expected: dict) -> None:
    call = prepare("chat", {**CHAT, **agent}, RESOURCE, mode, config)
    assert call.body["model"] == "policy-7" and call.original["model"] == "gpt"
    assert {key: call.body.get(key) for key in expected} == expected
    assert call.body["return_token_ids"] is True and call.body["logprobs"] is True
    assert not call.wants_logprobs and not call.wants_token_ids


@pytest.mark.parametrize(
    ("mode", "resource", "expected"),
    [
        ("train", LLM(endpoints=["http://a/v1"], model="m"), {"temperature": 1.0, "top_p": 1.0}),
        ("val", LLM(endpoints=["http://a/v1"], model="m"), {"temperature": 0.7, "top_p": 0.5}),
        ("test", LLM(endpoints=["http://a/v1"], model="m"), {"temperature": 0.0, "top_p": 0.5}),
        (
            "train",
            LLM(endpoints=["http://a/v1"], model="m", respect_agent_sampling=["train"]),
            {"temperature": 0.2, "top_p": 0.5},
        ),
        (
            "val",
            LLM(endpoints=["http://a/v1"], model="m", sampling_by_mode={"val": {"top_p": 0.95}}),
            {"temperature": 0.7, "top_p": 0.95},
        ),
    ],
)
def test_mode_defaults_replace_the_agents_sampling(mode: str, resource: LLM, expected: dict) -> None:
    agent = {**CHAT, "temperature": 0.2, "top_p": 0.5}
    call = prepare("chat", agent, resource, mode, ProxyConfig())
    assert {key: call.body.get(key) for key in expected} == expected
    attributes = request_attributes("chat", call.body, "openai", call.original)
    overridden = {
        key: agent[key] for key in ("temperature", "top_p") if expected[key] != agent[key]
    }  # the agent's values the proxy did not send are on the span, and only those
    assert {
        key: attributes[attribute]
        for key, attribute in AGENT_SAMPLING_KEYS.items()
        if attribute in attributes
    } == overridden
    assert attributes[semconv.GEN_AI_TEMPERATURE] == expected["temperature"]


def test_completions_ask_for_one_logprob_unless_the_agent_asked_more() -> None:
    plain = prepare("completion", {"prompt": "x"}, RESOURCE, "train", ProxyConfig())
    asked = prepare("completion", {"prompt": "x", "logprobs": 3}, RESOURCE, "train", ProxyConfig())
    assert (plain.body["logprobs"], plain.wants_logprobs) == (1, False)
    assert (asked.body["logprobs"], asked.wants_logprobs) == (3, True)
    observed = prepare("completion", {"prompt": "x"}, RESOURCE, "train", ProxyConfig(), ask_tokens=False)
    assert "return_token_ids" not in observed.body and "logprobs" not in observed.body


def test_seed_calls_gives_each_call_a_seed_from_its_rollout_and_request() -> None:
    seeded = LLM(endpoints=["http://a/v1"], model="m", seed_calls=True)
    first = prepare("chat", CHAT, seeded, "train", ProxyConfig(), rollout_id="ro-1")
    again = prepare(
        "chat", dict(reversed(list(CHAT.items()))), seeded, "train", ProxyConfig(), rollout_id="ro-1"
    )
    other_rollout = prepare("chat", CHAT, seeded, "train", ProxyConfig(), rollout_id="ro-2")
    next_turn = {**CHAT, "messages": [*CHAT["messages"], {"role": "user", "content": "and?"}]}
    other_call = prepare("chat", next_turn, seeded, "train", ProxyConfig(), rollout_id="ro-1")
    seeds = [c.body["seed"] for c in (first, again, other_rollout, other_call)]
    assert seeds[0] == seeds[1] and len(set(seeds)) == 3 and all(0 <= s < 2**31 for s in seeds)
    own = prepare("chat", {**CHAT, "seed": 7}, seeded, "train", ProxyConfig(), rollout_id="ro-1")
    assert own.body["seed"] == 7  # the agent's own seed is kept
    assert "seed" not in prepare("chat", CHAT, RESOURCE, "train", ProxyConfig(), rollout_id="ro-1").body


def test_routing_is_sticky_spread_and_stable_when_an_endpoint_is_added() -> None:
    three = ["http://a/v1", "http://b/v1", "http://c/v1"]
    homes = {f"ro-{i}": endpoint_order(f"ro-{i}", three)[0] for i in range(600)}
    assert all(endpoint_order(r, three)[0] == home for r, home in homes.items())
    assert all(n > 150 for n in Counter(homes.values()).values())
    four = [*three, "http://d/v1"]
    moved = [r for r, home in homes.items() if endpoint_order(r, four)[0] != home]
    assert all(endpoint_order(r, four)[0] == "http://d/v1" for r in moved)  # only to the new endpoint
    assert sorted(endpoint_order("ro-1", three)) == sorted(three)


def test_a_chat_stream_is_assembled_like_a_whole_body() -> None:
    chunks = [
        {
            "id": "c1",
            "model": "m",
            "prompt_token_ids": [1, 2],
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
        },
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"content": "Hel"},
                    "token_ids": [7],
                    "logprobs": {"content": [{"logprob": -0.1}]},
                }
            ]
        },
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"content": "lo"},
                    "token_ids": [8, 9],
                    "logprobs": {"content": [{"logprob": -0.2}, {"logprob": -0.3}]},
                    "finish_reason": "stop",
                }
            ]
        },
    ]
    record = CallRecord("chat")
    for chunk in chunks:
        record.absorb(chunk)
    (choice,) = record.ordered_choices()
    assert (choice.text, choice.token_ids, choice.logprobs, choice.finish_reason) == (
        "Hello",
        [7, 8, 9],
        [-0.1, -0.2, -0.3],
        "stop",
    )
    assert record.prompt_ids() == [1, 2] and record.has_tokens() and record.response_id == "c1"


def test_completion_prompt_ids_come_from_the_choice() -> None:
    record = CallRecord("completion")
    record.absorb(
        {
            "choices": [
                {
                    "index": 0,
                    "text": "a",
                    "prompt_token_ids": [4],
                    "token_ids": [5],
                    "logprobs": {"token_logprobs": [-1.0]},
                }
            ]
        }
    )
    assert record.prompt_ids() == [4] and record.has_tokens()


def test_shaping_drops_only_what_the_agent_did_not_ask_for() -> None:
    call = prepare("chat", {**CHAT, "logprobs": True}, RESOURCE, "train", ProxyConfig())
    body = {"prompt_token_ids": [1], "choices": [{"index": 0, "token_ids": [2], "logprobs": {"content": []}}]}
    assert shape_for_agent(body, call) == {"choices": [{"index": 0, "logprobs": {"content": []}}]}


def test_backoff_is_exponential_jittered_and_bounded() -> None:
    upstream = Upstream(client=None, config=ProxyConfig(backoff_base_s=0.1, backoff_max_s=1.0))  # type: ignore[arg-type]
    for retry in range(10):
        ceiling = min(1.0, 0.1 * 2**retry)
        assert ceiling / 2 <= upstream.backoff(retry) <= ceiling
    assert upstream.backoff(0, floor=30.0) == 1.0


async def test_the_mounted_proxy_owns_one_client_for_the_apps_lifetime(tmp_path) -> None:
    from lightningstore import SqlStore
    from lightningstore.proxy import Gateway
    from lightningstore.server import build_app

    app = build_app(SqlStore(tmp_path / "store.db"), sweep_interval=None)
    gateway = app.state.proxy
    assert isinstance(gateway, Gateway)
    assert "/proxy/admin/drain" in app.openapi()["paths"]
    for _ in range(2):  # a restarted app gets a fresh client
        async with app.router.lifespan_context(app):
            client = gateway.upstream.client
            assert not client.is_closed
        assert client.is_closed


def test_config_refuses_negative_bounds() -> None:
    with pytest.raises(ValueError, match="max_retries"):
        ProxyConfig(max_retries=-1)
    with pytest.raises(ValueError, match="pause_wait_s"):
        ProxyConfig(pause_wait_s=-1)


def test_fast_call_matching_agrees_with_the_routes() -> None:
    from lightningstore.proxy.fast_call import ProxyCall, match_call

    base = "/proxy/rollout/ro%2F1/attempt/at-1/mode/train"
    assert match_call("POST", base + "/v1/chat/completions") == ProxyCall("chat", "ro/1", "at-1", "train")
    assert match_call("POST", base + "/openai/v1/completions") == ProxyCall(
        "completion", "ro/1", "at-1", "train", agl=True
    )
    # Left to the FastAPI routes (which answer 404/405/422 as before):
    assert match_call("GET", base + "/v1/chat/completions") is None
    assert match_call("POST", base + "/v1/models") is None
    assert match_call("POST", base.replace("train", "bogus") + "/v1/chat/completions") is None
    assert match_call("POST", "/proxy/rollout//attempt/a/mode/train/v1/chat/completions") is None
    assert match_call("POST", base + "/v1/chat/completions/extra") is None


def test_a_tool_choice_but_auto_is_on_the_span() -> None:
    tools = [{"type": "function", "function": {"name": "add"}}]
    named = {"type": "function", "function": {"name": "add"}}
    for choice, recorded in (
        (None, None),
        ("auto", None),
        ("required", '"required"'),
        (named, json.dumps(named)),
    ):
        body = {**CHAT, "tools": tools, **({"tool_choice": choice} if choice else {})}
        attributes = request_attributes("chat", body, "openai")
        assert attributes.get(semconv.LLM_REQUEST_TOOL_CHOICE) == recorded
