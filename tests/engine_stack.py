"""Shared parts of the serving-engine tests: a real vLLM server started through `lightningrl serve-model
--engine vllm`, the store server with its proxy, tiny untied models, and an HF reference forward."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import torch
import uvicorn
from fastapi import FastAPI
from live_model import serve_in_thread
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from lightningrl.demos.tinylm import build_tiny_model
from lightningrl.processes.supervisor import Supervisor, child_env, cli_command
from lightningrl.serving.vllm import find_vllm_python
from lightningstore import LLM, SqlStore
from lightningstore.proxy import ProxyConfig
from lightningstore.server import build_app
from lightningstore.server.run import free_port

VLLM_START_TIMEOUT = 420.0
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    }
]
TOOL_QUESTION = [{"role": "user", "content": "What is 12 plus 7?"}]
TOOL_ANSWER = '<tool_call>\n{"name": "add", "arguments": {"a": 12, "b": 7}}\n</tool_call>'


def require_vllm_python() -> str:
    """The vLLM interpreter, or a failure saying how to build it (CI builds it in scripts/test)."""
    python = find_vllm_python()
    assert python and Path(python).is_file(), (
        "no vLLM environment: run scripts/setup-vllm (scripts/test does), or set LIGHTNINGRL_VLLM_PYTHON"
    )
    return python


def untied_model(path: Path, seed: int = 0) -> Path:
    """A tiny model with an output head of its own (synced by vLLM's plain `reload_weights`)."""
    return build_tiny_model(path, seed=seed, tie_word_embeddings=False)


@dataclass
class Reference:
    """A checkpoint loaded with transformers, for plain forward passes."""

    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase

    @classmethod
    def load(cls, path: Path) -> Reference:
        return cls(AutoModelForCausalLM.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path))

    @torch.inference_mode()
    def logprobs(self, prompt_ids: list[int], token_ids: list[int]) -> list[float]:
        """Raw log-softmax of each of `token_ids` after `prompt_ids`."""
        logits = self.model(torch.tensor([prompt_ids + token_ids])).logits[0].float()
        steps = torch.log_softmax(logits[len(prompt_ids) - 1 : -1], dim=-1)
        return steps.gather(1, torch.tensor(token_ids)[:, None]).squeeze(1).tolist()

    def chat_ids(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> list[int]:
        return self.tokenizer.apply_chat_template(
            messages, tools=tools, add_generation_prompt=True, return_dict=False
        )

    @torch.inference_mode()
    def greedy(self, prompt_ids: list[int], max_new_tokens: int = 80) -> list[int]:
        out = self.model.generate(torch.tensor([prompt_ids]), max_new_tokens=max_new_tokens, do_sample=False)
        return out[0, len(prompt_ids) :].tolist()


def overfit_tool_caller(base: Path, out: Path, steps: int = 300, margin_steps: int = 10) -> Path:
    """`base` trained on one conversation until its greedy answer to TOOL_QUESTION (with TOOLS) is
    TOOL_ANSWER (~80 Adam steps, ~6 s): a real model that calls a tool, and weights that differ
    visibly from `base`. `margin_steps` more steps keep float noise from flipping a greedy token."""
    torch.manual_seed(0)
    reference = Reference.load(base)
    model, tokenizer = reference.model.train(), reference.tokenizer
    prompt = reference.chat_ids(TOOL_QUESTION, TOOLS)
    target = tokenizer.encode(TOOL_ANSWER, add_special_tokens=False) + [tokenizer.eos_token_id]
    ids = torch.tensor([prompt + target])
    labels = ids.clone()
    labels[0, : len(prompt)] = -100
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    extra = None
    for _ in range(steps):
        result = model(ids, labels=labels)
        predicted = result.logits[0, len(prompt) - 1 : -1].argmax(-1)
        # Every next token right given the true prefix = the greedy answer is the target.
        if extra is None and predicted.tolist() == target:
            extra = margin_steps
        if extra is not None:
            if extra == 0:
                break
            extra -= 1
        optimizer.zero_grad()
        result.loss.backward()
        optimizer.step()
    model.eval()
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    assert Reference.load(out).greedy(prompt) == target, (
        "the overfit model does not answer with the tool call"
    )
    return out


@dataclass
class Live:
    """A uvicorn server in a background thread."""

    url: str
    server: uvicorn.Server
    thread: threading.Thread

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def serve(app: FastAPI, name: str) -> Live:
    url, server, thread = serve_in_thread(app, name)
    return Live(url, server, thread)  # type: ignore[arg-type]


@dataclass
class VllmProcess:
    """vLLM's server, started as `lightningrl serve-model --engine vllm` (the CLI execs vLLM)."""

    supervisor: Supervisor
    url: str
    startup_s: float
    log: Path

    @property
    def root(self) -> str:
        return self.url.removesuffix("/v1")

    def stop(self) -> None:
        self.supervisor.stop()


def start_vllm(
    checkpoint: Path,
    log_dir: Path,
    *extra: str,
    name: str = "policy",
    meanwhile: Callable[[], Any] | None = None,
) -> VllmProcess:
    """Start vLLM on `checkpoint` through our CLI, run `meanwhile` while it starts, and wait for
    /health (a failure carries vLLM's log tail)."""
    python = require_vllm_python()
    port = free_port()
    command = cli_command(
        "serve-model",
        *("--engine", "vllm", "--vllm-python", python, "--checkpoint", str(checkpoint)),
        *("--port", str(port), "--served-model-name", name, "--enforce-eager", "--max-model-len", "1024"),
        *extra,
    )
    supervisor = Supervisor(log_dir)
    started = time.monotonic()
    child = supervisor.start("vllm", command, env=child_env())
    try:
        if meanwhile is not None:
            meanwhile()
        asyncio.run(
            supervisor.wait_http(
                child, f"http://127.0.0.1:{port}/health", timeout=VLLM_START_TIMEOUT, interval=0.5
            )
        )
    except BaseException:
        supervisor.stop()
        raise
    return VllmProcess(supervisor, f"http://127.0.0.1:{port}/v1", time.monotonic() - started, child.log_path)


@dataclass
class ProxyStack:
    """The store server (dev mode: no tokens) with its proxy, and one LLM resource per engine URL."""

    store: SqlStore
    live: Live
    resources: dict[str, str] = field(default_factory=dict)

    @property
    def proxy(self) -> str:
        return f"{self.live.url}/proxy"

    async def add_llm(self, endpoint: str, model: str, **fields: Any) -> str:
        """A resource set whose LLM is `model` at `endpoint`; its id."""
        resources = await self.store.add_resources({"llm": LLM(endpoints=[endpoint], model=model, **fields)})
        return resources.resources_id

    async def client_url(self, resources_id: str, mode: str = "train") -> tuple[str, str, str]:
        """(base URL, rollout id, attempt id) of a fresh claimed rollout on `resources_id`."""
        claimed = await self.store.start_rollout({"task": "t"}, mode=mode, resources_id=resources_id)
        base = f"{self.proxy}/rollout/{claimed.rollout_id}/attempt/{claimed.attempt_id}/mode/{mode}/v1"
        return base, claimed.rollout_id, claimed.attempt_id

    async def span(self, rollout_id: str, attempt_id: str) -> Any:
        (span,) = await self.store.query_spans(rollout_id, attempt_id)
        return span

    def stop(self) -> None:
        self.live.stop()


def proxy_stack(root: Path) -> ProxyStack:
    store = SqlStore(root / "store.db")
    app = build_app(store, proxy=ProxyConfig(pause_wait_s=60.0), sweep_interval=None)
    return ProxyStack(store, serve(app, "store-server"))


async def chat(base_url: str, body: dict[str, Any], timeout: float = 120.0) -> httpx.Response:
    async with httpx.AsyncClient(timeout=timeout) as client:
        return await client.post(f"{base_url}/chat/completions", json=body)
