"""Live servers for the gateway tests: two inference servers, a stub upstream, and the store with its proxy."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
import torch
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from live_model import serve_in_thread
from openai import AsyncOpenAI
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from lightningrl.demos.tinylm import build_tiny_model
from lightningrl.serving import create_app as create_inference_app
from lightningstore import LLM, AttemptedRollout, SqlStore
from lightningstore.auth import TokenConfig, agent_key
from lightningstore.proxy import Gateway, ProxyConfig
from lightningstore.server import build_app

TINY = {"hidden_size": 64, "num_layers": 2, "num_heads": 4}
SERVED = "tiny"
SECRET = "agent-secret-for-tests"
TOKENS = {
    "admin": "admin-token",
    "algorithm": "algo-token",
    "runner": "runner-token",
    "approver": "approver-token",
}


@dataclass
class Live:
    """A uvicorn server running in a background thread."""

    url: str
    app: FastAPI
    server: uvicorn.Server
    thread: threading.Thread

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def serve(app: FastAPI, name: str) -> Live:
    """Serve `app` on a free loopback port until `stop`."""
    url, server, thread = serve_in_thread(app, name)
    return Live(url, app, server, thread)  # type: ignore[arg-type]


@dataclass
class Reference:
    """The served checkpoint loaded again, for plain forward passes."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase

    @torch.inference_mode()
    def logprobs(self, prompt_ids: list[int], token_ids: list[int]) -> list[float]:
        """Raw log-softmax of each of `token_ids` after `prompt_ids`, from one forward pass."""
        logits = self.model(torch.tensor([prompt_ids + token_ids])).logits[0].float()
        steps = torch.log_softmax(logits[len(prompt_ids) - 1 : -1], dim=-1)
        return steps.gather(1, torch.tensor(token_ids)[:, None]).squeeze(1).tolist()

    def decode(self, token_ids: list[int]) -> str:
        """The text a response with these ids carries (special tokens skipped, as the server does)."""
        return self.tokenizer.decode(token_ids, skip_special_tokens=True)

    def chat_ids(self, messages: list[dict[str, str]]) -> list[int]:
        return self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=False)


def stub_upstream() -> FastAPI:
    """A stub OpenAI server (fixed answer, fixed token ids) whose next statuses can be scripted to fail."""
    app = FastAPI()
    app.state.fail = []  # statuses to answer with, one per call, before succeeding
    app.state.calls = 0
    app.state.bodies = []  # every request body, as the upstream received it

    @app.post("/v1/chat/completions", response_model=None)
    async def chat(request: Request) -> Response:
        body = orjson.loads(await request.body())
        app.state.calls += 1
        app.state.bodies.append(body)
        if app.state.fail:
            status = app.state.fail.pop(0)
            return JSONResponse({"error": {"message": f"stub failure {status}", "code": status}}, status)
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": "stub answer"},
            "finish_reason": "stop",
            "logprobs": {"content": [{"token": "x", "logprob": -0.5, "bytes": [], "top_logprobs": []}] * 3},
            "token_ids": [5, 6, 7],
        }
        answer = {
            "id": "chatcmpl-stub",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model"),
            "choices": [choice],
            "usage": {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5},
            "prompt_token_ids": [1, 2],
        }
        if body.get("stream"):
            return StreamingResponse(_stub_stream(answer), media_type="text/event-stream")
        return JSONResponse(answer)

    return app


async def _stub_stream(answer: dict[str, Any]) -> AsyncIterator[bytes]:
    """The stub answer as chunks, without token ids (an upstream that cannot stream them)."""
    for piece, finish in (("stub ", None), ("answer", "stop")):
        delta = {"index": 0, "delta": {"content": piece}, "finish_reason": finish}
        yield (
            b"data: "
            + orjson.dumps({**answer, "object": "chat.completion.chunk", "choices": [delta]})
            + b"\n\n"
        )
    yield b"data: [DONE]\n\n"


@dataclass
class Env:
    """Everything a gateway test talks to."""

    url: str
    store: SqlStore
    gateway: Gateway
    backends: list[Live]
    stub: Live
    version_id: str
    resources_id: str
    reference: Reference

    @property
    def endpoints(self) -> list[str]:
        return [f"{b.url}/v1" for b in self.backends]

    def base_url(self, rollout_id: str, attempt_id: str, mode: str = "train") -> str:
        return f"{self.url}/proxy/rollout/{rollout_id}/attempt/{attempt_id}/mode/{mode}/v1"

    async def attempt(self, resources_id: str | None = "default", mode: str = "train") -> AttemptedRollout:
        """A fresh claimed rollout bound to `resources_id` ("default": the two real backends)."""
        rid = self.resources_id if resources_id == "default" else resources_id
        return await self.store.start_rollout({"task": "t"}, mode=mode, resources_id=rid)

    def client(self, claimed: AttemptedRollout, mode: str = "train", **kwargs: Any) -> AsyncOpenAI:
        """An OpenAI client pointed at the proxy with the attempt's own agent key."""
        key = agent_key(SECRET, claimed.rollout_id, claimed.attempt_id)
        return AsyncOpenAI(
            base_url=self.base_url(claimed.rollout_id, claimed.attempt_id, mode), api_key=key, **kwargs
        )

    async def spans(self, claimed: AttemptedRollout) -> list[Any]:
        return await self.store.query_spans(claimed.rollout_id, claimed.attempt_id)


@pytest.fixture(scope="session")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    """Two inference servers on one tiny model, a stub upstream, and the store server with the proxy."""
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("gateway")
    model_dir = build_tiny_model(root / "model", seed=0, **TINY)
    backends = [
        serve(
            create_inference_app(
                model_dir,
                device="cpu",
                max_batch_size=16,
                batch_wait_ms=5,
                served_model_name=SERVED,
                cpu_threads=1,
            ),
            f"inference-{i}",
        )
        for i in range(2)
    ]
    stub = serve(stub_upstream(), "stub-upstream")
    store = SqlStore(Path(root) / "store.db")
    tokens = TokenConfig.from_mapping({**TOKENS, "agent_secret": SECRET})
    config = ProxyConfig(backoff_base_s=0.01, backoff_max_s=0.05, pause_wait_s=10.0)
    app = build_app(store, tokens=tokens, proxy=config, sweep_interval=None)
    gateway: Gateway = app.state.proxy
    endpoints = [f"{b.url}/v1" for b in backends]
    resources = asyncio.run(
        store.add_resources({"llm": LLM(endpoints=endpoints, model=SERVED, sampling={"max_tokens": 12})})
    )
    store_server = serve(app, "store-server")
    reference = Reference(
        AutoModelForCausalLM.from_pretrained(model_dir).eval(), AutoTokenizer.from_pretrained(model_dir)
    )
    yield Env(
        url=store_server.url,
        store=store,
        gateway=gateway,
        backends=backends,
        stub=stub,
        version_id=resources.versions["llm"].version_id,
        resources_id=resources.resources_id,
        reference=reference,
    )
    for live in (store_server, stub, *backends):
        live.stop()
