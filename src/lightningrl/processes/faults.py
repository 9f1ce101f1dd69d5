"""What `fit` does when one of its processes dies: the dead runner's open attempts are ended so their
rollouts are retried, the process is started again, and the console and the metrics say so."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from rich.console import Console

from lightningrl.processes.supervisor import Child, Supervisor, exit_text
from lightningstore import (
    AttemptStatus,
    IllegalTransitionError,
    LightningStore,
    RolloutConfig,
    RolloutStatus,
)
from runner import runner_name_prefix

FIT_ROLLOUT_CONFIG = RolloutConfig(max_attempts=3, unresponsive_seconds=60.0)
"""The rollouts `fit` enqueues: an attempt silent for 60 s (12 missed heartbeats) or ended because
its runner died is retried, up to 3 attempts; an agent's own failure is not (its rollout fails)."""
FAULT_KINDS = ("runner", "store", "inference")

Restart = Callable[[Child], Awaitable[None]]
"""Brings one exited child back (respawn, then wait until it answers)."""


def fault_kind(name: str) -> str:
    """The kind of a child by its name: "runner-2" -> "runner"."""
    return name.split("-", 1)[0]


async def release_attempts(store: LightningStore, pid: int, reason: str) -> int:
    """End as `unresponsive` every open attempt claimed by the runner process `pid` (its rollouts
    requeue while attempts remain, as the queue promises); returns how many."""
    prefix = runner_name_prefix(pid)
    released = 0
    for rollout in await store.query_rollouts(status=[RolloutStatus.PREPARING, RolloutStatus.RUNNING]):
        attempt = await store.get_latest_attempt(rollout.rollout_id)
        if attempt is None or not (attempt.worker_id or "").startswith(prefix):
            continue
        if attempt.status not in (AttemptStatus.PREPARING, AttemptStatus.RUNNING):
            continue
        # The watchdog may have ended it meanwhile: then it is retried already.
        with contextlib.suppress(IllegalTransitionError):
            await store.update_attempt(
                rollout.rollout_id,
                attempt.attempt_id,
                status=AttemptStatus.UNRESPONSIVE,
                failure_reason=reason,
            )
            released += 1
    return released


class Recovery:
    """The supervisor's `on_exit` for `fit`: restart the child by its registered `Restart`, print one
    line, and count it for the next metrics row (`faults/...` columns, `columns()`)."""

    def __init__(
        self,
        supervisor: Supervisor,
        store: LightningStore,
        console: Console,
        step: Callable[[], int],
    ) -> None:
        self.supervisor = supervisor
        self.store = store
        self.console = console
        self.step = step
        self.restarts: dict[str, Restart] = {}
        """Child name -> how to bring it back; a child without one is not restartable."""
        self._counts: Counter[str] = Counter()

    async def on_exit(self, child: Child, code: int) -> None:
        how = exit_text(code)
        step = self.step()
        released = 0
        if fault_kind(child.name) == "runner":
            released = await release_attempts(self.store, child.pid, f"{child.name} died ({how})")
        await self.restarts[child.name](child)
        count = self.supervisor.recent_restarts(child)
        retried = f"; {released} rollout(s) retried" if released else ""
        self.console.print(
            f"{child.name} died ({how}) at step {step}; restarted ({count}/{self.supervisor.max_restarts})"
            f"{retried}",
            markup=False,
            highlight=False,
        )
        self._counts["restarts"] += 1
        self._counts[f"{fault_kind(child.name)}_restarts"] += 1
        self._counts["attempts_released"] += released

    def columns(self) -> dict[str, Any]:
        """This step's `faults/` metrics (zeros when nothing happened), then start counting afresh."""
        names = ["restarts", *(f"{kind}_restarts" for kind in FAULT_KINDS), "attempts_released"]
        row = {f"faults/{name}": self._counts[name] for name in names}
        self._counts.clear()
        return row
