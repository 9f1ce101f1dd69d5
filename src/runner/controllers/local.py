"""LocalController: one subprocess per rollout, given the attempt's environment; killed on timeout or stop."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from runner.agent import LitAgent
from runner.agl import env_from_map
from runner.controllers.environment import check_user_environment, local_environment
from runner.resources import AgentResources

OUTPUT_TAIL_CHARS = 4000


class RolloutProcessError(RuntimeError):
    """The rollout's process exited with a non-zero code."""

    def __init__(self, command: Sequence[str], returncode: int, output: str) -> None:
        super().__init__(
            f"rollout process {list(command)!r} exited with code {returncode}; output tail:\n{output}"
        )
        self.returncode = returncode


class LocalController(LitAgent):
    """Runs `command` for each rollout; the task arrives as JSON on stdin and in $LIGHTNINGRL_TASK.

    Exit code 0 = succeeded (rewards come from the process: POST $LIGHTNINGRL_REWARD_URL), anything else
    = failed with the output's tail. Cancelled (timeout, stop) = SIGTERM, then SIGKILL after `kill_grace`.

    The process's environment is allow-listed, never the runner's own: the attempt's variables, the safe
    base (`environment.SAFE_BASE`), the runner's values of the `pass_env` names, `env`, and the task's
    fields an `env_map` names (Agent Lightning v1.0's: `{"QUESTION": "input.question"}`, `runner.agl`).
    Naming the runner's token, a role token or the agent-key secret in any of them is a ValueError.
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        store_url: str | None = None,
        env: Mapping[str, str] | None = None,
        pass_env: Collection[str] = (),
        env_map: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        kill_grace: float = 2.0,
        name: str | None = None,
    ) -> None:
        if not command:
            raise ValueError("LocalController needs a command")
        if isinstance(pass_env, str):
            raise ValueError(f"pass_env is a list of names, got the string {pass_env!r}")
        self.command = list(command)
        self.store_url = store_url
        self.env = dict(env or {})
        self.pass_env = tuple(pass_env)
        self.env_map = dict(env_map or {})
        check_user_environment({**self.env, **self.env_map}, self.pass_env)
        self.cwd = cwd
        self.kill_grace = kill_grace
        self.name = name

    async def rollout(self, task: Any, resources: AgentResources) -> None:
        env = local_environment(
            resources,
            task,
            store_url=self.store_url,
            env={**self.env, **env_from_map(task, self.env_map)},
            pass_env=self.pass_env,
            source=os.environ,
        )
        process = await asyncio.create_subprocess_exec(
            *self.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
            cwd=self.cwd,
            start_new_session=True,
        )
        try:
            output, _ = await process.communicate(json.dumps(task).encode())
        except asyncio.CancelledError:
            await self._kill(process)
            raise
        if process.returncode != 0:
            text = output.decode(errors="replace")[-OUTPUT_TAIL_CHARS:]
            raise RolloutProcessError(self.command, int(process.returncode or 0), text)

    async def _kill(self, process: asyncio.subprocess.Process) -> None:
        """SIGTERM the process group, SIGKILL it after the grace period, and reap it."""
        if process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), self.kill_grace)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
