"""The inference server, for real: a tiny model behind uvicorn, called with the openai client."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import torch
import uvicorn
from fastapi import FastAPI
from openai import AsyncOpenAI
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from lightningrl.demos.tinylm import build_tiny_model
from lightningrl.serving import SamplingParams, create_app, load_model
from lightningrl.serving.sampling import row_generator
from lightningrl.serving.sequence import Sequence

TINY = {"hidden_size": 64, "num_layers": 2, "num_heads": 4}
CHAT = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "What is 12 plus 7?"}]
TOLERANCE = 1e-3


@dataclass
class Reference:
    """A served checkpoint loaded a second time, for plain forward passes."""

    path: Path
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase

    @torch.inference_mode()
    def logprobs(self, prompt_ids: list[int], token_ids: list[int]) -> list[float]:
        """Raw log-softmax of each of `token_ids` after `prompt_ids`, from one forward pass."""
        logits = self.model(torch.tensor([prompt_ids + token_ids])).logits[0].float()
        steps = torch.log_softmax(logits[len(prompt_ids) - 1 : -1], dim=-1)
        return steps.gather(1, torch.tensor(token_ids)[:, None]).squeeze(1).tolist()

    @torch.inference_mode()
    def greedy(self, prompt_ids: list[int], max_tokens: int) -> list[int]:
        """Greedy continuation without a cache, ending after EOS."""
        tokens: list[int] = []
        for _ in range(max_tokens):
            logits = self.model(torch.tensor([prompt_ids + tokens])).logits[0, -1]
            tokens.append(int(logits.argmax()))
            if tokens[-1] == self.tokenizer.eos_token_id:
                break
        return tokens

    def chat_ids(self, messages: list[dict[str, str]]) -> list[int]:
        """The prompt ids the chat template gives."""
        return self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=False)


@dataclass
class Running:
    """A live server."""

    url: str
    app: FastAPI


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two tiny models with the same tokenizer and different weights."""
    root = tmp_path_factory.mktemp("served")
    return build_tiny_model(root / "a", seed=0, **TINY), build_tiny_model(root / "b", seed=1, **TINY)


@pytest.fixture(scope="module")
def references(model_dirs: tuple[Path, Path]) -> Iterator[tuple[Reference, Reference]]:
    """Both models for plain forward passes (one torch thread: the machine is shared)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    loaded = tuple(
        Reference(
            path, AutoModelForCausalLM.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)
        )
        for path in model_dirs
    )
    yield loaded  # type: ignore[misc]
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def reference(references: tuple[Reference, Reference]) -> Reference:
    """The model the server starts with."""
    return references[0]


@pytest.fixture(scope="module")
def server(model_dirs: tuple[Path, Path]) -> Iterator[Running]:
    """uvicorn serving the first model on a free local port, in a background thread."""
    with _serving(
        create_app(model_dirs[0], device="cpu", max_batch_size=16, batch_wait_ms=20, cpu_threads=1)
    ) as running:
        yield running


@contextlib.contextmanager
def _serving(app: FastAPI) -> Iterator[Running]:
    """Serve `app` with uvicorn on a free local port in a background thread."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    instance = uvicorn.Server(config)
    thread = threading.Thread(target=instance.run, name="test-inference-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not instance.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert instance.started, "the inference server did not start"
    yield Running(url=f"http://127.0.0.1:{port}", app=app)
    instance.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
async def client(server: Running) -> AsyncIterator[AsyncOpenAI]:
    """The real openai client pointed at the server."""
    async with AsyncOpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0, timeout=60) as api:
        yield api


@pytest.fixture
async def http(server: Running) -> AsyncIterator[httpx.AsyncClient]:
    """A raw HTTP client for the non-OpenAI routes and malformed bodies."""
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as raw:
        yield raw


def _close(served: list[float], recomputed: list[float]) -> bool:
    """Logprobs agree within TOLERANCE."""
    return len(served) == len(recomputed) and all(
        abs(a - b) < TOLERANCE for a, b in zip(served, recomputed, strict=True)
    )


async def test_health_models_and_metrics(http: httpx.AsyncClient, model_dirs: tuple[Path, Path]) -> None:
    health = (await http.get("/healthz")).json()
    assert health["status"] == "ok" and health["checkpoint"] == str(model_dirs[0])
    models = (await http.get("/v1/models")).json()
    assert models["object"] == "list" and models["data"][0]["id"] == str(model_dirs[0])
    metrics = (await http.get("/metrics")).json()
    assert metrics["max_batch_size"] == 16 and "sequences_per_batch" in metrics["batching"]


async def test_chat_greedy_matches_a_plain_forward(client: AsyncOpenAI, reference: Reference) -> None:
    response = await client.chat.completions.create(
        model="tiny", messages=CHAT, max_tokens=12, temperature=0, extra_body={"return_token_ids": True}
    )
    body = response.model_dump()
    choice = body["choices"][0]
    assert body["object"] == "chat.completion" and choice["message"]["role"] == "assistant"
    assert body["prompt_token_ids"] == reference.chat_ids(CHAT)
    assert choice["token_ids"] == reference.greedy(body["prompt_token_ids"], 12)
    assert choice["message"]["content"] == reference.tokenizer.decode(
        choice["token_ids"], skip_special_tokens=True
    )
    assert choice["finish_reason"] in ("stop", "length")
    usage = body["usage"]
    assert usage["prompt_tokens"] == len(body["prompt_token_ids"]) and usage["completion_tokens"] == len(
        choice["token_ids"]
    )


async def test_completion_continues_token_ids_exactly(client: AsyncOpenAI, reference: Reference) -> None:
    prompt = reference.tokenizer.encode("The big cat") + [7, 300, 42]
    response = await client.completions.create(
        model="tiny", prompt=prompt, max_tokens=10, temperature=0, extra_body={"return_token_ids": True}
    )
    body = response.model_dump()
    choice = body["choices"][0]
    assert body["prompt_token_ids"] == prompt and choice["prompt_token_ids"] == prompt
    assert choice["token_ids"] == reference.greedy(prompt, 10)
    assert choice["text"] == reference.tokenizer.decode(choice["token_ids"], skip_special_tokens=True)

    text = await client.completions.create(
        model="tiny", prompt="The big cat", max_tokens=3, temperature=0, extra_body={"return_token_ids": True}
    )
    assert text.model_dump()["choices"][0]["prompt_token_ids"] == reference.tokenizer.encode("The big cat")


async def test_logprobs_are_raw_and_match_a_recomputation(client: AsyncOpenAI, reference: Reference) -> None:
    chat = await client.chat.completions.create(
        model="tiny",
        messages=CHAT,
        max_tokens=16,
        temperature=0.7,
        top_p=0.9,
        seed=5,
        logprobs=True,
        top_logprobs=3,
        extra_body={"return_token_ids": True},
    )
    body = chat.model_dump()
    choice = body["choices"][0]
    entries = choice["logprobs"]["content"]
    served = [entry["logprob"] for entry in entries]
    assert _close(served, reference.logprobs(body["prompt_token_ids"], choice["token_ids"]))
    for entry, token_id in zip(entries, choice["token_ids"], strict=True):
        assert entry["token"] == reference.tokenizer.decode([token_id])
        alternatives = [alt["logprob"] for alt in entry["top_logprobs"]]
        assert len(alternatives) == 3 and alternatives == sorted(alternatives, reverse=True)
        assert alternatives[0] >= entry["logprob"] - TOLERANCE

    completion = await client.completions.create(
        model="tiny",
        prompt=[5, 6, 7, 8],
        max_tokens=12,
        seed=9,
        logprobs=2,
        extra_body={"return_token_ids": True},
    )
    item = completion.model_dump()["choices"][0]
    assert _close(item["logprobs"]["token_logprobs"], reference.logprobs([5, 6, 7, 8], item["token_ids"]))
    assert len(item["logprobs"]["tokens"]) == len(item["token_ids"]) == len(item["logprobs"]["text_offset"])


async def test_n_choices_and_seeded_sampling(client: AsyncOpenAI) -> None:
    async def sample(seed: int) -> list[list[int]]:
        """Token ids of 4 seeded choices."""
        response = await client.completions.create(
            model="tiny", prompt="hello", n=4, max_tokens=12, seed=seed, extra_body={"return_token_ids": True}
        )
        choices = sorted(response.model_dump()["choices"], key=lambda c: c["index"])
        assert [c["index"] for c in choices] == [0, 1, 2, 3]
        return [c["token_ids"] for c in choices]

    first, again, other = await sample(123), await sample(123), await sample(124)
    assert first == again
    assert len({tuple(ids) for ids in first}) > 1
    assert first != other


async def test_stop_strings_end_the_text_before_the_stop(client: AsyncOpenAI, reference: Reference) -> None:
    request: dict[str, Any] = {"model": "tiny", "prompt": "The sun", "max_tokens": 24, "seed": 3}
    extra = {"return_token_ids": True, "ignore_eos": True}
    full = (await client.completions.create(**request, extra_body=extra)).model_dump()["choices"][0]
    ids, text = full["token_ids"], full["text"]
    starts = [len(reference.tokenizer.decode(ids[:k], skip_special_tokens=True)) for k in range(len(ids))]
    cut = next(
        k
        for k in range(3, len(ids))
        if (piece := reference.tokenizer.decode([ids[k]])).strip() and text.find(piece) == starts[k]
    )
    stop = reference.tokenizer.decode([ids[cut]])
    stopped = await client.completions.create(**request, stop=["never-seen", stop], extra_body=extra)
    choice = stopped.model_dump()["choices"][0]
    assert choice["finish_reason"] == "stop" and choice["stop_reason"] == stop
    assert choice["token_ids"] == ids[:cut]
    assert (
        choice["text"]
        == text[: starts[cut]]
        == reference.tokenizer.decode(ids[:cut], skip_special_tokens=True)
    )

    streamed = await client.completions.create(**request, stop=stop, stream=True, extra_body=extra)
    pieces = [chunk.choices[0].text async for chunk in streamed if chunk.choices]
    assert "".join(pieces) == choice["text"]


async def test_stop_token_ids_are_kept_in_token_ids(client: AsyncOpenAI) -> None:
    request: dict[str, Any] = {"model": "tiny", "prompt": "One two", "max_tokens": 10, "temperature": 0}
    full = (await client.completions.create(**request, extra_body={"return_token_ids": True})).model_dump()
    ids = full["choices"][0]["token_ids"]
    stop_id = ids[min(2, len(ids) - 1)]
    body = {"return_token_ids": True, "stop_token_ids": [stop_id]}
    choice = (await client.completions.create(**request, extra_body=body)).model_dump()["choices"][0]
    assert choice["token_ids"] == ids[: ids.index(stop_id) + 1]
    assert choice["finish_reason"] == "stop" and choice["stop_reason"] == stop_id


async def test_streaming_matches_the_non_streamed_response(client: AsyncOpenAI) -> None:
    request: dict[str, Any] = {
        "model": "tiny",
        "messages": CHAT,
        "max_tokens": 14,
        "seed": 11,
        "logprobs": True,
    }
    extra = {"return_token_ids": True}
    whole = (await client.chat.completions.create(**request, extra_body=extra)).model_dump()
    stream = await client.chat.completions.create(
        **request, stream=True, stream_options={"include_usage": True}, extra_body=extra
    )
    chunks = [chunk.model_dump() async for chunk in stream]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[0]["prompt_token_ids"] == whole["prompt_token_ids"]
    content = [c for c in chunks[1:] if c["choices"]]
    assert (
        "".join(c["choices"][0]["delta"]["content"] or "" for c in content)
        == whole["choices"][0]["message"]["content"]
    )
    assert [t for c in content for t in c["choices"][0]["token_ids"]] == whole["choices"][0]["token_ids"]
    streamed_logprobs = [e["logprob"] for c in content for e in c["choices"][0]["logprobs"]["content"]]
    assert _close(streamed_logprobs, [e["logprob"] for e in whole["choices"][0]["logprobs"]["content"]])
    assert content[-1]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]
    assert (
        chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] == whole["usage"]["total_tokens"]
    )

    texts: dict[int, str] = {}
    completion_stream = await client.completions.create(
        model="tiny", prompt="A red", n=2, max_tokens=8, seed=2, stream=True
    )
    async for chunk in completion_stream:
        for choice in chunk.choices:
            texts[choice.index] = texts.get(choice.index, "") + choice.text
    whole_completion = await client.completions.create(
        model="tiny", prompt="A red", n=2, max_tokens=8, seed=2
    )
    assert texts == {c.index: c.text for c in whole_completion.choices}


async def test_concurrent_requests_are_batched(client: AsyncOpenAI, http: httpx.AsyncClient) -> None:
    before = (await http.get("/metrics")).json()["batching"]["batches"]
    responses = await asyncio.gather(
        *(
            client.chat.completions.create(
                model="tiny", messages=[{"role": "user", "content": f"Count to {i}"}], max_tokens=8, seed=i
            )
            for i in range(16)
        )
    )
    assert all(r.choices and r.choices[0].message.content is not None for r in responses)
    batching = (await http.get("/metrics")).json()["batching"]
    assert batching["max_sequences_in_batch"] > 1
    assert batching["batches"] - before < 16


async def _batching_after(http: httpx.AsyncClient, earlier: dict[str, int]) -> dict[str, int]:
    """The batching counters once a batch newer than `earlier` is counted (a batch is counted when its
    last row ends, just after the answers went out); bounded at 2 s."""
    for _ in range(100):
        now = (await http.get("/metrics")).json()["batching"]
        if now["batches"] > earlier["batches"]:
            return now
        await asyncio.sleep(0.02)
    return now


async def test_a_request_joins_the_running_batch_and_decodes_as_alone(
    client: AsyncOpenAI, http: httpx.AsyncClient
) -> None:
    """Continuous batching: a request arriving mid-batch joins it between decode steps (one batch, not
    two) and gets exactly what it gets alone, though its cache is left-padded to the batch's."""
    start = (await http.get("/metrics")).json()["batching"]
    alone = await client.completions.create(model="tiny", prompt="Item 7 is", max_tokens=6, temperature=0)
    before = await _batching_after(http, start)  # the alone request's batch is counted just after it answers
    long = asyncio.create_task(
        client.completions.create(
            model="tiny", prompt="A much longer opening prompt", max_tokens=200, temperature=0
        )
    )
    await asyncio.sleep(0.05)  # the long request is decoding by now
    joined = await client.completions.create(model="tiny", prompt="Item 7 is", max_tokens=6, temperature=0)
    assert not long.done()  # it finished inside the long request's batch
    await long
    after = await _batching_after(http, before)
    assert (after["batches"] - before["batches"], after["requests"] - before["requests"]) == (1, 2)
    assert joined.choices[0].text == alone.choices[0].text


async def test_reload_during_traffic_fails_no_request(
    client: AsyncOpenAI,
    http: httpx.AsyncClient,
    server: Running,
    model_dirs: tuple[Path, Path],
    references: tuple[Reference, Reference],
) -> None:
    version = (await http.get("/healthz")).json()["version"]

    async def traffic(i: int) -> str:
        """One request of a mixed stream/non-stream load."""
        if i % 3 == 0:
            stream = await client.chat.completions.create(
                model="tiny", messages=CHAT, max_tokens=16, seed=i, stream=True
            )
            return "".join([chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices])
        response = await client.completions.create(model="tiny", prompt=f"Item {i}", max_tokens=16, seed=i)
        return response.choices[0].text

    tasks = [asyncio.create_task(traffic(i)) for i in range(24)]
    await asyncio.sleep(0.05)
    reloaded = await http.post("/reload", json={"checkpoint": str(model_dirs[1])})
    more = [asyncio.create_task(traffic(i)) for i in range(24, 32)]
    results = await asyncio.gather(*tasks, *more)
    assert reloaded.status_code == 200 and reloaded.json()["version"] == version + 1
    assert len(results) == 32 and all(isinstance(text, str) for text in results)

    new = references[1]
    prompt = new.chat_ids(CHAT)
    greedy = await client.completions.create(
        model="tiny", prompt=prompt, max_tokens=8, temperature=0, extra_body={"return_token_ids": True}
    )
    assert greedy.model_dump()["choices"][0]["token_ids"] == new.greedy(prompt, 8)

    same = await http.post("/reload")
    assert same.status_code == 200 and same.json()["checkpoint"] == str(model_dirs[1])
    service = server.app.state.inference
    restored = await asyncio.to_thread(service.reload, model_dirs[0])
    assert restored.version == version + 3
    health = (await http.get("/healthz")).json()
    assert health["checkpoint"] == str(model_dirs[0]) and (await http.get("/metrics")).json()["reloads"] >= 3


@pytest.mark.parametrize(
    ("path", "body", "reason"),
    [
        ("/v1/chat/completions", {"messages": CHAT, "n": 0}, "n"),
        ("/v1/chat/completions", {"messages": CHAT, "max_tokens": -1}, "max_tokens"),
        ("/v1/chat/completions", {"messages": CHAT, "n": "many"}, "n"),
        ("/v1/chat/completions", {"messages": CHAT, "temperature": "hot"}, "temperature"),
        ("/v1/chat/completions", {"messages": []}, "messages"),
        ("/v1/chat/completions", {"model": "tiny"}, "messages"),
        ("/v1/chat/completions", {"messages": [{"role": "wizard", "content": "hi"}]}, "role"),
        ("/v1/chat/completions", {"messages": CHAT, "top_logprobs": 2}, "logprobs"),
        ("/v1/chat/completions", {"messages": CHAT, "stop": [""]}, "stop"),
        ("/v1/chat/completions", {"messages": CHAT, "max_tokens": 10**6}, "context"),
        ("/v1/completions", {"prompt": [10**7]}, "token ids"),
        ("/v1/completions", {"prompt": ""}, "empty"),
        ("/v1/completions", {"prompt": "hi", "logprobs": 99}, "logprobs"),
        ("/reload", {"checkpoint": "/no/such/checkpoint"}, "does not exist"),
    ],
)
async def test_bad_requests_get_4xx_with_a_reason(
    http: httpx.AsyncClient, path: str, body: dict[str, Any], reason: str
) -> None:
    response = await http.post(path, json=body)
    assert 400 <= response.status_code < 500
    assert reason in response.json()["error"]["message"]


async def test_malformed_json_and_client_errors(http: httpx.AsyncClient, client: AsyncOpenAI) -> None:
    response = await http.post(
        "/v1/completions", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400 and response.json()["error"]["message"]
    with pytest.raises(openai.BadRequestError):
        await client.chat.completions.create(model="tiny", messages=CHAT, n=0)


def test_eos_ends_a_choice_and_stays_in_token_ids(model_dirs: tuple[Path, Path]) -> None:
    served = load_model(model_dirs[0], device="cpu", version=0)
    eos = served.tokenizer.eos_token_id
    word = served.tokenizer.encode(" cat")[0]
    sequence = Sequence(0, [1], SamplingParams(max_tokens=5), row_generator(0, 0), served.eos_ids)
    sequence.append(word, -1.0, [], served.decode)
    sequence.append(eos, -2.0, [], served.decode)
    delta = sequence.take_delta(served.decode, final_only=True)
    assert delta is not None and delta.finish_reason == "stop" and delta.stop_reason is None
    assert delta.token_ids == [word, eos] and delta.text == " cat" == served.decode(delta.token_ids)


def test_streaming_holds_back_a_partial_stop_string(model_dirs: tuple[Path, Path]) -> None:
    served = load_model(model_dirs[0], device="cpu", version=0)
    ids = served.tokenizer.encode(" big cat")
    assert len(ids) == 2
    sequence = Sequence(
        0, [1], SamplingParams(max_tokens=9, stop=(" big dog",)), row_generator(1, 0), served.eos_ids
    )
    sequence.append(ids[0], -1.0, [], served.decode)
    assert sequence.take_delta(served.decode, final_only=False) is None  # " big" may start " big dog"
    sequence.append(ids[1], -1.0, [], served.decode)
    delta = sequence.take_delta(served.decode, final_only=False)
    assert delta is not None and delta.text == " big cat" and delta.token_ids == ids


async def test_one_sequence_at_a_time_is_batch_invariant(model_dirs: tuple[Path, Path]) -> None:
    """What `deterministic` fit runs rely on (max_batch_size 1): a seeded request gets the same tokens and
    bit-identical logprobs alone and among concurrent requests (batched rows differ in the last bits)."""
    request: dict[str, Any] = {
        "model": "tiny",
        "prompt": "The sun",
        "max_tokens": 16,
        "seed": 21,
        "logprobs": 1,
        "extra_body": {"return_token_ids": True},
    }
    app = create_app(model_dirs[0], device="cpu", max_batch_size=1, batch_wait_ms=20, cpu_threads=1)
    with _serving(app) as running:
        async with AsyncOpenAI(base_url=f"{running.url}/v1", api_key="x", max_retries=0, timeout=60) as api:

            async def sample(**changes: Any) -> tuple[list[int], list[float]]:
                item = (await api.completions.create(**{**request, **changes})).model_dump()["choices"][0]
                return item["token_ids"], item["logprobs"]["token_logprobs"]

            alone = await sample()
            others = [sample(prompt=f"Once {i} red", seed=100 + i) for i in range(8)]
            crowded, *_ = await asyncio.gather(sample(), *others)
        async with httpx.AsyncClient(base_url=running.url) as http:
            stats = (await http.get("/metrics")).json()
    assert stats["max_batch_size"] == 1
    assert alone[0] and len(alone[0]) == len(alone[1])
    assert crowded == alone


def test_a_batch_that_keeps_admitting_keeps_its_cache_short(model_dirs: tuple[Path, Path]) -> None:
    """Continuous admission for 60 jobs: the attention span stays near one job's length (the padding
    of finished rows is trimmed), and every job still decodes exactly as it does alone."""
    from lightningrl.serving.engine import Engine
    from lightningrl.serving.job import Job
    from lightningrl.serving.kv_cache import GrowingLayer

    served = load_model(model_dirs[0], device="cpu", version=0)
    loop = asyncio.new_event_loop()
    prompt = served.tokenizer.encode("The sun")
    params = SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True)

    def job() -> Job:
        return Job([prompt], 1, params, False, lambda m: [prompt], 0, loop)

    widths: list[int] = []
    update = GrowingLayer.update

    def spy(layer: GrowingLayer, *args: Any, **kwargs: Any) -> Any:
        keys, values = update(layer, *args, **kwargs)
        widths.append(keys.shape[-2])  # the attention span of this step
        return keys, values

    pending = [job() for _ in range(60)]
    done = list(pending)

    def admit(free: int) -> list[Job]:  # one newcomer per step while any is left
        return [pending.pop()] if pending and free else []

    engine = Engine(served)
    alone = job()
    engine.run([alone])
    GrowingLayer.update = spy  # type: ignore[method-assign]
    try:
        engine.run([pending.pop()], admit, max_rows=8)
    finally:
        GrowingLayer.update = update  # type: ignore[method-assign]
        loop.run_until_complete(asyncio.sleep(0))

    def tokens(j: Job) -> list[int]:
        events = []
        while not j.events.empty():
            events.append(j.events.get_nowait())
        return [t for e in events if hasattr(e, "token_ids") for t in e.token_ids]

    expected = tokens(alone)
    assert len(expected) == 12
    assert all(tokens(j) == expected for j in done)
    assert len(widths) > 60 and max(widths) <= len(prompt) + 12 + 8, max(widths)
    loop.close()
