"""`lightningrl.fit`: trains through real processes, resumes on a second call, and leaves no child behind."""

from __future__ import annotations

import asyncio
import csv
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from backends import create_pg_database, drop_pg_database
from fit_agents import PROMPTS, reply_length_agent, subprocess_env
from proc_state import alive as _alive

import lightningrl.fitting.run as fit_module
from lightningrl import TrainResult, fit
from lightningrl.config_fields import config_from
from lightningrl.demos.tinylm import build_tiny_model
from lightningrl.rl.config import LightningRLConfig
from lightningstore import SqlStore

CONFIG = {
    "steps": 2,
    "tasks_per_step": 2,
    "rollouts_per_task": 6,
    "val_every": 2,
    "trainer": {"lr": 1e-3},
    "show_progress": False,
}


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(
        tmp_path_factory.mktemp("fit") / "model",
        seed=0,
        tokenizer_kind="word",
        extra_text=PROMPTS,
        hidden_size=32,
        num_layers=1,
        num_heads=2,
    )


def _versions(db: Path | str) -> list:
    async def read() -> list:
        store = SqlStore(db)
        try:
            return await store.list_resource_versions("llm")
        finally:
            await store.close()

    return asyncio.run(read())


def _fit(model: Path, out: Path, **config: object) -> TrainResult:
    rows = [{"prompt": p} for p in PROMPTS]
    return fit(
        reply_length_agent,
        rows,
        rows[:2],
        model=model,
        config={**CONFIG, **config},
        workers=4,
        runner_processes=1,
        output_dir=out,
    )


@pytest.mark.slow
def test_fit_trains_then_resumes(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = _fit(model, out)
    assert [r["step"] for r in first.metrics] == [0, 1, 2]
    assert first.held_out_before is not None and first.held_out_after is not None
    assert first.metrics_csv.exists() and first.reward_curve is not None and first.reward_curve.exists()
    assert first.last_checkpoint == out / "checkpoints" / "step-0002"
    assert (first.last_checkpoint / "config.json").exists()
    assert first.store.startswith("http://127.0.0.1:") and first.proxy_url == first.store + "/proxy"
    assert {p.name for p in (out / "logs").iterdir()} >= {"store.log", "inference.log", "runner-0.log"}
    versions = _versions(out / "store.db")
    assert versions[-1].version_id == first.final_version_id and len(versions) == 3
    # fit installs the release gate's plan hook: every trained version names the plan filed before step 1.
    plans = {v.metadata.get("plan_id") for v in versions[1:]}
    assert len(plans) == 1 and next(iter(plans)).startswith("plan-"), plans

    # `steps` is the total, as in HF Trainer, verl and Agent Lightning: the same call again has nothing to do.
    again = _fit(model, out)
    assert [r["step"] for r in again.metrics] == [
        0,
        1,
        2,
    ] and again.final_version_id == first.final_version_id
    second = _fit(model, out, steps=3, keep_checkpoints=1)
    assert [r["step"] for r in second.metrics] == [0, 1, 2, 3]  # no second step-0 validation
    # Resumed from step-0002, then kept only the newest checkpoint (the one the last version serves) and
    # the best validated one when step 3's update ended (a tie: the newer), i.e. of the first run.
    validated = [(r["val/success"], r["step"]) for r in first.metrics if r["step"] > 0 and "val/success" in r]
    kept = sorted({"step-0003", f"step-{max(validated)[1]:04d}"})
    assert second.metrics[-1]["update/checkpoints_pruned"] == 3 - len(kept)
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == kept
    with first.metrics_csv.open(newline="") as fh:
        assert [int(r["step"]) for r in csv.DictReader(fh)] == [0, 1, 2, 3]
    assert second.last_checkpoint == out / "checkpoints" / "step-0003"
    chain = _versions(out / "store.db")
    assert [v.version_id for v in chain[: len(versions)]] == [v.version_id for v in versions]
    assert len(chain) > len(versions) and chain[-1].version_id == second.final_version_id
    for parent, child in zip(chain, chain[1:], strict=False):
        assert child.parent_id == parent.version_id
    assert chain[-1].resource.checkpoint == str(second.last_checkpoint)


@pytest.mark.slow
def test_fit_on_postgresql_from_a_running_event_loop(model: Path, tmp_path: Path, pg_server) -> None:
    """As in a notebook cell: fit is called where an event loop already runs; the store is PostgreSQL."""
    server = pg_server()
    url = create_pg_database(server)
    rows = [{"prompt": p} for p in PROMPTS]

    async def notebook_cell() -> TrainResult:
        assert asyncio.get_running_loop().is_running()
        return fit(
            reply_length_agent,
            rows,
            model=model,
            config={**CONFIG, "steps": 1},
            store=url,
            workers=2,
            runner_processes=1,
            output_dir=tmp_path / "run",
        )

    try:
        result = asyncio.run(notebook_cell())
        assert [r["step"] for r in result.metrics] == [1]
        assert not (tmp_path / "run" / "store.db").exists()
        chain = _versions(url)
        assert len(chain) == 2 and chain[-1].version_id == result.final_version_id
        assert chain[-1].resource.checkpoint == str(tmp_path / "run" / "checkpoints" / "step-0001")
    finally:
        drop_pg_database(server, url)


def test_fit_refuses_what_runners_cannot_load(model: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="lambda"):
        fit(lambda task: 1.0, [{"x": 1}], model=model, output_dir=tmp_path)

    def closure(task: dict) -> float:
        return 1.0

    with pytest.raises(ValueError, match="closure|inside another"):
        fit(closure, [{"x": 1}], model=model, output_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match="no-such-model"):
        fit(reply_length_agent, [{"x": 1}], model=tmp_path / "no-such-model", output_dir=tmp_path)
    with pytest.raises(ValueError, match="lora_rank > 0 is not wired in fit"):
        lora = {"trainer": {"lora_rank": 8}}
        fit(reply_length_agent, [{"x": 1}], model=model, engine="vllm", config=lora, output_dir=tmp_path)
    with pytest.raises(ValueError, match="engine must be one of"):
        fit(reply_length_agent, [{"x": 1}], model=model, engine="sglang", output_dir=tmp_path)
    with pytest.raises(ValueError, match="config.stepz"):
        fit(reply_length_agent, [{"x": 1}], model=model, config={"stepz": 1}, output_dir=tmp_path)
    with pytest.raises(ValueError, match="output_dir=.* and config's output_dir=.* differ"):
        config = {"output_dir": str(tmp_path / "a")}
        fit(reply_length_agent, [{"x": 1}], model=model, config=config, output_dir=tmp_path / "b")
    assert not (tmp_path / "logs").exists()  # nothing was started


def test_fit_honours_the_configs_output_dir(tmp_path: Path) -> None:
    where = tmp_path / "from-config"
    as_dict = {"output_dir": str(where)}
    assert fit_module._output_dir(None, as_dict, config_from(as_dict)) == where
    assert (
        fit_module._output_dir(None, LightningRLConfig(output_dir=where), LightningRLConfig(output_dir=where))
        == where
    )
    assert fit_module._output_dir(where, as_dict, config_from(as_dict)) == where  # the same, given twice
    assert fit_module._output_dir(None, None, config_from(None)) == Path("runs/fit")
    assert fit_module._output_dir(tmp_path, {"steps": 1}, config_from({"steps": 1})) == tmp_path


SCRIPT = """
    import sys
    from lightningrl import fit, rollout

    @rollout
    def slow_agent(task):
        import time
        time.sleep(0.2)
        return 1.0

    if __name__ == "__main__":
        fit(slow_agent, [{"n": i} for i in range(4)], model=sys.argv[1], output_dir=sys.argv[2],
            workers=2, runner_processes=2, config={"steps": 1000, "tasks_per_step": 2,
            "rollouts_per_task": 2, "show_progress": False})
"""


def _children(pid: int) -> set[int]:
    """Live processes whose parent is `pid` (from /proc/*/stat)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(entry.name))
    return found


def _descendants(pid: int) -> set[int]:
    out, todo = set(), [pid]
    while todo:
        for child in _children(todo.pop()) - out:
            out.add(child)
            todo.append(child)
    return out


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigint_to_fit_leaves_no_child(model: Path, tmp_path: Path) -> None:
    script = tmp_path / "train_script.py"
    script.write_text(textwrap.dedent(SCRIPT))
    out = tmp_path / "run"
    # Output to a file, not a pipe nobody reads while waiting: a full pipe would block the parent.
    log = (tmp_path / "fit-output.log").open("wb")
    parent = subprocess.Popen(
        [sys.executable, str(script), str(model), str(out)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=subprocess_env(),
        # A library imported by another test module may leave SIGINT ignored in this process, and an
        # ignored signal stays ignored in a child: give the child the default, as a terminal would.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        # store server, inference server and two runners: the runners start last
        deadline = time.monotonic() + 120
        while len(_children(parent.pid)) < 4 or not (out / "metrics.csv").exists():
            assert parent.poll() is None, (tmp_path / "fit-output.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "fit did not start its processes and a step within 120s"
            time.sleep(0.2)
        recorded = _descendants(parent.pid)
        assert len(recorded) >= 4
        parent.send_signal(signal.SIGINT)
        try:
            parent.wait(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail(
                "fit did not exit within 120 s of SIGINT:\n"
                + (tmp_path / "fit-output.log").read_text()[-3000:]
            )
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        log.close()
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in recorded) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in recorded if _alive(pid)], "children outlived the fit parent"
