"""`fit` survives its own processes dying: a SIGKILLed runner, inference server or store server is
restarted, the run finishes every step, and no rollout is lost or counted twice. Ctrl-C ends with one
line saying where the run stopped and how to resume, and leaves no child behind."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fit_agents import PROMPTS, subprocess_env
from fit_fault_agents import patient_agent
from proc_state import alive
from rich.console import Console

from lightningrl import TrainResult, fit
from lightningrl.demos.tinylm import build_tiny_model
from lightningrl.processes.supervisor import Child, Supervisor
from lightningstore import Attempt, AttemptStatus, Rollout, RolloutStatus, SqlStore
from runner import runner_name_prefix

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

STEPS, TASKS, PER_TASK = 3, 2, 4
CONFIG = {
    "steps": STEPS,
    "tasks_per_step": TASKS,
    "rollouts_per_task": PER_TASK,
    "val_every": 0,
    "trainer": {"lr": 1e-3},
    "show_progress": False,
}
KILL_STEP = 2


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(
        tmp_path_factory.mktemp("faults") / "model",
        seed=0,
        tokenizer_kind="word",
        extra_text=PROMPTS,
        hidden_size=32,
        num_layers=1,
        num_heads=2,
    )


def _pids(out: Path) -> dict[str, int]:
    try:
        return json.loads((out / "logs" / "pids.json").read_text())
    except (OSError, ValueError):
        return {}


def _running_in_step(db: Path, step: int, worker_prefix: str = "") -> bool:
    """True when an attempt of step `step` runs (on a worker whose id starts with `worker_prefix`)."""
    if not db.exists():
        return False
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1.0) as conn:
            row = conn.execute(
                "SELECT count(*) FROM attempts JOIN rollouts USING (rollout_id) WHERE attempts.status = "
                "'running' AND rollouts.group_id LIKE ? AND attempts.worker_id LIKE ?",
                (f"s{step}/%", f"{worker_prefix}%"),
            ).fetchone()
    except sqlite3.Error:  # the schema is not there yet, or the writer holds a lock
        return False
    return bool(row and row[0])


def _killer(out: Path, victim: str, killed: dict[str, object]) -> Callable[[], None]:
    """SIGKILL `victim` (a name in pids.json) once an attempt of step KILL_STEP runs (on it, for a
    runner); then record the command line of the process the supervisor starts in its place."""

    def kill() -> None:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            pid = _pids(out).get(victim)
            prefix = runner_name_prefix(pid) if pid and victim.startswith("runner") else ""
            if pid and _running_in_step(out / "store.db", KILL_STEP, prefix):
                os.kill(pid, signal.SIGKILL)
                killed[victim] = pid
                break
            time.sleep(0.02)
        while time.monotonic() < deadline and victim in killed:
            again = _pids(out).get(victim)
            if again and again != killed[victim]:
                with contextlib.suppress(OSError):
                    killed["cmdline"] = Path(f"/proc/{again}/cmdline").read_bytes().split(b"\0")
                return
            time.sleep(0.05)

    return kill


def _fit_killing(model: Path, out: Path, victim: str) -> tuple[TrainResult, str, dict[str, Any]]:
    """Run fit here while a thread SIGKILLs `victim` mid-step; the result, console text and kills."""
    killed: dict[str, Any] = {}
    thread = threading.Thread(target=_killer(out, victim, killed), daemon=True)
    thread.start()
    text = io.StringIO()
    rows = [{"prompt": p} for p in PROMPTS]
    result = fit(
        patient_agent,
        rows,
        model=model,
        config=CONFIG,
        workers=4,
        runner_processes=2,
        output_dir=out,
        console=Console(file=text, width=200),
    )
    thread.join(5)
    return result, text.getvalue(), killed


def _train_rollouts(db: Path) -> list[tuple[Rollout, list[Attempt]]]:
    async def read() -> list[tuple[Rollout, list[Attempt]]]:
        store = SqlStore(db)
        try:
            rollouts = await store.query_rollouts(mode="train")
            return [(r, await store.query_attempts(r.rollout_id)) for r in rollouts]
        finally:
            await store.close()

    return asyncio.run(read())


def _check_every_rollout_once(result: TrainResult, db: Path) -> list[list[Attempt]]:
    """Each step's groups hold exactly PER_TASK rollouts, each succeeded by exactly one attempt; the
    attempt lists of the retried rollouts."""
    assert [r["step"] for r in result.metrics] == list(range(1, STEPS + 1))
    assert all(r["train/rollouts"] == TASKS * PER_TASK and r["train/failed"] == 0 for r in result.metrics)
    groups: dict[str, list[Rollout]] = defaultdict(list)
    attempts_of = _train_rollouts(db)
    for rollout, _ in attempts_of:
        groups[rollout.group_id or ""].append(rollout)
    assert sorted({g.split("/")[0] for g in groups}) == [f"s{s}" for s in range(1, STEPS + 1)]
    assert len(groups) == STEPS * TASKS
    for group, members in groups.items():
        assert len(members) == PER_TASK, group
        assert all(r.status == RolloutStatus.SUCCEEDED for r in members), group
    for _, attempts in attempts_of:
        assert sum(a.status == AttemptStatus.SUCCEEDED for a in attempts) == 1
        assert attempts[-1].status == AttemptStatus.SUCCEEDED
    return [a for _, a in attempts_of if len(a) > 1]


def _faults(result: TrainResult, column: str) -> float:
    return sum(float(r.get(f"faults/{column}", 0)) for r in result.metrics)


@pytest.mark.slow
@linux_only
def test_a_killed_runner_is_restarted_and_its_rollouts_retried(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result, console, killed = _fit_killing(model, out, "runner-0")
    assert "runner-0" in killed, "the runner never ran a step-2 attempt"
    assert re.search(rf"runner-0 died \(signal 9\) at step {KILL_STEP}; restarted \(1/3\)", console), console
    retried = _check_every_rollout_once(result, out / "store.db")
    assert retried, "the killed runner's attempts were not retried"
    for attempts in retried:
        first = attempts[0]
        assert first.status == AttemptStatus.UNRESPONSIVE and "runner-0 died (signal 9)" in (
            first.failure_reason or ""
        )
        assert (first.worker_id or "").startswith(runner_name_prefix(killed["runner-0"]))
    assert _faults(result, "runner_restarts") == 1 and _faults(result, "restarts") == 1
    assert _faults(result, "attempts_released") == len(retried)
    assert _pids(out)["runner-0"] != killed["runner-0"]


@pytest.mark.slow
@linux_only
def test_a_killed_store_server_is_restarted_on_its_database(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result, console, killed = _fit_killing(model, out, "store")
    assert "store" in killed
    assert re.search(rf"store died \(signal 9\) at step {KILL_STEP}; restarted \(1/3\)", console), console
    _check_every_rollout_once(result, out / "store.db")
    assert _faults(result, "store_restarts") == 1 and _faults(result, "restarts") == 1
    assert (out / "logs" / "store.log").read_text().count("restarted by the supervisor") == 1


@pytest.mark.slow
@linux_only
def test_a_killed_inference_server_is_restarted_on_the_version_it_served(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result, console, killed = _fit_killing(model, out, "inference")
    assert "inference" in killed
    assert re.search(rf"inference died \(signal 9\) at step {KILL_STEP}; restarted \(1/3\)", console), console
    _check_every_rollout_once(result, out / "store.db")
    assert _faults(result, "inference_restarts") == 1
    # Step 2 ran on step 1's version: the restarted server loads that checkpoint, not the base model.
    log = (out / "logs" / "inference.log").read_text()
    assert "restarted by the supervisor" in log
    assert str(out / "checkpoints" / "step-0001").encode() in killed["cmdline"]


SCRIPT = """
import sys
from fit_fault_agents import patient_agent
from fit_agents import PROMPTS
from lightningrl import fit

fit(patient_agent, [{"prompt": p} for p in PROMPTS], model=sys.argv[1], output_dir=sys.argv[2],
    workers=2, runner_processes=2, config={"steps": 1000, "tasks_per_step": 2, "rollouts_per_task": 2,
    "val_every": 0, "show_progress": False})
"""


def _descendants(pid: int) -> set[int]:
    """Live processes below `pid`, from /proc/*/stat."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    found, todo = set(), [pid]
    while todo:
        parent = todo.pop()
        for child, its_parent in parents.items():
            if its_parent == parent and child not in found:
                found.add(child)
                todo.append(child)
    return found


@pytest.mark.slow
@linux_only
def test_ctrl_c_prints_one_line_with_the_step_and_how_to_resume(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    output = tmp_path / "fit-output.log"
    with output.open("wb") as log:
        parent = subprocess.Popen(
            [sys.executable, "-c", SCRIPT, str(model), str(out)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=subprocess_env(),
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a terminal starts it
        )
        try:
            deadline = time.monotonic() + 150
            while (
                not (out / "metrics.csv").exists() or len((out / "metrics.csv").read_text().splitlines()) < 3
            ):
                assert parent.poll() is None, output.read_text()[-3000:]
                assert time.monotonic() < deadline, "fit did not finish two steps within 150 s"
                time.sleep(0.2)
            started = _descendants(parent.pid)
            assert len(started) >= 4  # store, inference, two runners
            parent.send_signal(signal.SIGINT)
            parent.wait(timeout=120)
        finally:
            if parent.poll() is None:
                parent.kill()
                parent.wait()
    text = output.read_text()
    assert "Traceback" not in text, text
    # One line; one more first when the Ctrl-C landed during an update (run_update says it waits for it).
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("stopping: step ")]
    assert len(lines) == 1, text
    match = re.fullmatch(
        r"interrupted after step (\d+); every process fit started is stopped\. To resume, "
        r"run the same command again with the same output_dir \((.*)\)\.",
        lines[0],
    )
    assert match, lines[0]
    assert int(match.group(1)) >= 2 and match.group(2) == str(out)
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in started if alive(pid)], "children outlived the fit parent"


def test_a_child_that_keeps_dying_ends_the_watch_with_its_log_tail(tmp_path: Path) -> None:
    supervisor = Supervisor(tmp_path / "logs", max_restarts=2, restart_window=60.0)
    command = [sys.executable, "-c", "print('no database here'); raise SystemExit(3)"]
    seen: list[int] = []

    async def restart(child: Child, code: int) -> None:
        seen.append(code)
        supervisor.respawn(child)

    with supervisor:
        supervisor.start("flaky", command, restartable=True)
        with pytest.raises(
            RuntimeError, match=r"(?s)flaky exited with code 3 after 2 restarts within 60s.*no database"
        ):
            asyncio.run(asyncio.wait_for(supervisor.watch(restart, interval=0.05), 30))
    assert seen == [3, 3]
    assert json.loads((tmp_path / "logs" / "pids.json").read_text()).keys() == {"flaky"}


SLOW_UPDATE_SCRIPT = """
import sys, time
from pathlib import Path
from fit_fault_agents import patient_agent
from fit_agents import PROMPTS
from lightningrl import fit
from lightningrl.trainer.verl_actor import VerlActorTrainer

original = VerlActorTrainer.train_step

def slow_train_step(self, batch, advantages):  # an update as long as a real model's, and then some
    Path(sys.argv[3]).write_text("update running")
    time.sleep(300)
    return original(self, batch, advantages)

VerlActorTrainer.train_step = slow_train_step
fit(patient_agent, [{"prompt": p} for p in PROMPTS], model=sys.argv[1], output_dir=sys.argv[2],
    workers=2, runner_processes=2, config={"steps": 3, "tasks_per_step": 2, "rollouts_per_task": 2,
    "val_every": 0, "show_progress": False})
"""


@pytest.mark.slow
@linux_only
def test_ctrl_c_during_an_update_says_so_and_a_second_one_stops_now(model: Path, tmp_path: Path) -> None:
    out, marker = tmp_path / "run", tmp_path / "update-running"
    output = tmp_path / "fit-output.log"
    with output.open("wb") as log:
        parent = subprocess.Popen(
            [sys.executable, "-c", SLOW_UPDATE_SCRIPT, str(model), str(out), str(marker)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=subprocess_env(),
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a terminal starts it
        )
        try:
            deadline = time.monotonic() + 180
            while not marker.exists():
                assert parent.poll() is None, output.read_text()[-3000:]
                assert time.monotonic() < deadline, "no update started within 180 s"
                time.sleep(0.2)
            started = _descendants(parent.pid)
            parent.send_signal(signal.SIGINT)
            deadline = time.monotonic() + 20
            while "stopping: step " not in output.read_text():
                assert time.monotonic() < deadline, "the first Ctrl-C said nothing: " + output.read_text()
                time.sleep(0.2)
            assert parent.poll() is None  # still waiting for the update thread
            parent.send_signal(signal.SIGINT)
            parent.wait(timeout=60)  # not the update's 300 s
        finally:
            if parent.poll() is None:
                parent.kill()
                parent.wait()
    assert parent.returncode == 130, output.read_text()
    text = output.read_text()
    said = re.search(
        r"stopping: step (\d+)'s update has run \d+ s on a thread that cannot be interrupted", text
    )
    assert said, text
    done = int(said.group(1)) - 1
    assert "Press Ctrl-C again to stop now." in text and f"the run resumes after step {done})" in text, text
    assert f"interrupted after step {done}; every process fit started is stopped" in text, text
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in started if alive(pid)], "children outlived the fit parent"
