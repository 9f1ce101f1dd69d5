"""The canary's real external effect: an agent that books one row into a SQLite ledger, and a verifier
that reads the row back (and flags rows nobody asked for as harmful)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from lightningrl.release import CanaryTask, Verification
from lightningstore import LightningStore, Rollout
from runner import AgentResources, trace

SCHEMA = "CREATE TABLE IF NOT EXISTS ledger (task_id TEXT, amount INTEGER, version TEXT)"


@trace(kind="tool")
def write_row(db: str, task_id: str, amount: int, version: str) -> None:
    """The agent's one tool: insert a ledger row."""
    with sqlite3.connect(db, timeout=30) as conn:
        conn.execute(SCHEMA)
        conn.execute("INSERT INTO ledger VALUES (?, ?, ?)", (task_id, amount, version))


def ledger_agent(task: dict[str, Any], resources: AgentResources) -> float:
    """Book `amount` for `task_id`; a policy whose template says `sloppy` books 0 on tasks marked `tricky`."""
    version = next(iter(resources.versions.values()), "none")
    policy = next(iter(resources.prompts.values()), None)
    sloppy = policy is not None and "sloppy" in policy.template and task.get("tricky", False)
    write_row(task["db"], task["task_id"], 0 if sloppy else int(task["amount"]), version)
    return 1.0


def verify_row(task: CanaryTask, rollout: Rollout, store: LightningStore) -> Verification:
    """Read the destination back: exactly one row for the task, with the asked amount."""
    db = Path(task.input["db"])
    if not db.exists():
        return Verification(False, f"ledger {db} was never created")
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT amount FROM ledger WHERE task_id = ?", (task.task_id,)).fetchall()
        strangers = conn.execute(
            "SELECT COUNT(*) FROM ledger WHERE task_id NOT LIKE ?", (task.task_id.split("-")[0] + "-%",)
        ).fetchone()[0]
    harmful = (f"{strangers} rows written for tasks nobody asked for",) if strangers else ()
    if len(rows) != 1:
        return Verification(False, f"expected one ledger row for {task.task_id}, found {len(rows)}", harmful)
    if rows[0][0] != task.input["amount"]:
        return Verification(
            False, f"row for {task.task_id} books {rows[0][0]}, not {task.input['amount']}", harmful
        )
    return Verification(True, f"row for {task.task_id} books {rows[0][0]}", harmful)


def ledger_tasks(
    db: Path, prefix: str, count: int = 20, tricky: tuple[int, ...] = (3, 7)
) -> list[CanaryTask]:
    """`count` booking tasks writing into `db`; the `tricky` ones trip a sloppy policy."""
    return [
        CanaryTask(
            f"{prefix}-{i}",
            {"db": str(db), "task_id": f"{prefix}-{i}", "amount": 10 + i, "tricky": i in tricky},
        )
        for i in range(count)
    ]
