"""The CLI drives a candidate of a demo-shaped store through receipt -> check -> approve -> promote -> rollback."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from ledger import ledger_tasks
from records import record_rollout

from lightningrl.cli import main
from lightningstore import LLM, SqlStore

HOLD = 3


async def _demo_shaped_store(root: Path) -> dict[str, str]:
    """As examples/calc/demo.py leaves it: base (approved) -> step 1 -> step 2 candidates of `llm`, train
    rollouts of step s bound to version s-1, val rollouts bound to each version, spans and rewards."""
    store = SqlStore(root / "store.db")
    ids: dict[str, str] = {}
    parent_id = None
    for step in range(3):
        checkpoint = root / f"checkpoints/step-{step:04d}"
        checkpoint.mkdir(parents=True)
        llm = LLM(endpoints=["http://127.0.0.1:9/v1"], model="calc-tiny", checkpoint=str(checkpoint))
        metadata = (
            {}
            if step == 0
            else {
                "step": step,
                "metrics": {"train/reward_mean": 0.4 + step / 10},
                "algorithm_config": {"estimator": "grpo", "lr": 1e-3, "seed": 0},
            }
        )
        version = await store.add_resource_version(
            "llm",
            llm,
            parent_id=parent_id,
            created_by="demo" if step == 0 else "lightningrl",
            artifact=str(checkpoint),
            metadata=metadata,
        )
        rset = (await store.add_resource_set({"llm": version.version_id})).resources_id
        ids[f"s{step}"], ids[f"set{step}"] = version.version_id, rset
        parent_id = version.version_id
    for step in (1, 2):
        for i in range(16):
            await record_rollout(
                store,
                mode="train",
                resources_id=ids[f"set{step - 1}"],
                task_id=f"plus-{i % 4}-1-0",
                reward=float(i % 2),
            )
    for step, success in ((0, 0.3), (1, 0.4), (2, 0.7)):
        for i in range(10):
            await record_rollout(
                store,
                mode="val",
                resources_id=ids[f"set{step}"],
                task_id=f"times-{i}-2-0",
                reward=1.0 if i < success * 10 else 0.0,
            )
        await record_rollout(
            store, mode="val", resources_id=ids[f"set{step}"], task_id="minus-3-1-0", reward=1.0
        )
    await store.close()
    return ids


def _cli(
    capsys: pytest.CaptureFixture[str], db: Path, *args: str, as_json: bool = True
) -> tuple[int, object]:
    code = main(
        [
            "release",
            *args[:1],
            "--store",
            str(db),
            "--actor",
            "alice",
            *(["--json"] if as_json else []),
            *args[1:],
        ]
    )
    out = capsys.readouterr().out
    return code, json.loads(out) if as_json else out


def test_cli_drives_a_demo_candidate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = asyncio.run(_demo_shaped_store(tmp_path))
    db = tmp_path / "store.db"
    assert _cli(capsys, db, "evaluator", "calc-exact", "1")[0] == 0
    assert _cli(capsys, db, "policy", "llm", "--evaluator", "calc-exact", "--retry-budget", "2")[0] == 0
    assert _cli(capsys, db, "protect", "llm", "case-minus", "minus-3-1-0")[0] == 0

    code, receipt = _cli(capsys, db, "receipt", "latest")
    assert (
        code == 0
        and receipt["candidate_version_id"] == ids["s2"]
        and receipt["parent_version_id"] == ids["s1"]
    )
    assert receipt["train"]["count"] == 16 and receipt["holdout"]["count"] == 20
    assert receipt["evaluator"]["version"] == "1" and receipt["algorithm_config"]["estimator"] == "grpo"
    rid = receipt["receipt_id"]

    tasks = tmp_path / "canary.json"
    tasks.write_text(
        json.dumps(
            [{"task_id": t.task_id, "input": t.input} for t in ledger_tasks(tmp_path / "l.db", "c", 6)]
        )
    )
    code, canary = _cli(
        capsys,
        db,
        "canary",
        rid,
        "--agent",
        "ledger:ledger_agent",
        "--verifier",
        "ledger:verify_row",
        "--tasks",
        str(tasks),
        "--max-tasks",
        "6",
    )
    assert code == 0 and all(o["verified"] for o in canary["body"]["outcomes"])
    assert _cli(capsys, db, "rollback", rid, "--drill")[0] == 0

    code, report = _cli(capsys, db, "check", rid)
    assert code == HOLD and [c["status"] for c in report["checks"]][-1] == "unavailable"
    assert _cli(capsys, db, "approve", rid)[0] == 0
    code, text = _cli(capsys, db, "check", ids["s2"], as_json=False)
    assert code == 0 and "verdict: PROMOTE TO BOUNDED CANARY" in text

    code, promoted = _cli(capsys, db, "promote", rid)
    assert (
        code == 0 and promoted["move"]["version_id"] == ids["s2"] and promoted["routes"]["proxy"] == ids["s2"]
    )
    code, rolled = _cli(capsys, db, "rollback", rid)
    assert code == 0 and rolled["body"]["routed_version_id"] == ids["s1"]

    code, status = _cli(capsys, db, "status")
    assert status["approved"] == ids["s1"]
    approved_moves = [m["version_id"] for m in status["history"] if m["pointer"] == "approved"]
    assert approved_moves == [ids["s0"], ids["s2"], ids["s1"]]
    code, text = _cli(capsys, db, "status", "--receipt", rid, as_json=False)
    assert "stale" in text  # `approved` moved since the last check: the parent-dependent checks are stale
    code, _ = _cli(capsys, db, "promote", rid, as_json=False)
    assert code == HOLD  # the approval was for the old basis: promoting again needs a new approval
