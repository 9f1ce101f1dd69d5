"""The stack the algorithm tests run on: a SQLite store behind the store server (its proxy included), an
inference server on a checkpoint, and runner PROCESSES (`lightningrl runner --agent module:fn`)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from lightningrl.fitting.local_stack import StackUrls, local_stack
from lightningrl.processes.supervisor import Supervisor, child_env, cli_command
from lightningstore import LLM, ResourceVersion, SqlStore


@dataclass
class AlgorithmStack:
    store: SqlStore
    urls: StackUrls
    supervisor: Supervisor

    async def publish_llm(self, checkpoint: Path, model: str = "policy") -> ResourceVersion:
        """`checkpoint` as the `llm` resource served by the stack's inference server."""
        return await self.store.add_resource_version(
            "llm", LLM(endpoints=[self.urls.model_v1], model=model, checkpoint=str(checkpoint))
        )


@contextlib.asynccontextmanager
async def algorithm_stack(
    root: Path, checkpoint: Path, agent: str, *, workers: int = 8, model: str = "policy"
) -> AsyncIterator[AlgorithmStack]:
    """Store and inference servers in this event loop, one runner process running `agent`."""
    store = SqlStore(root / "store.db")
    try:
        async with local_stack(store, checkpoint, model_name=model) as urls:
            with Supervisor(root / "logs", grace=5.0) as supervisor:
                command = cli_command(
                    "runner", "--store", urls.store, "--proxy-url", urls.proxy, "--agent", agent,
                    "--workers", str(workers), "--no-progress", "--stop-timeout", "5",
                )  # fmt: skip
                supervisor.start("runner-0", command, env=child_env())
                yield AlgorithmStack(store, urls, supervisor)
    finally:
        await store.close()
