"""The training page's "Learning health" panel: the RL loop's health lines, from its metrics.csv or, on a
server without one, from what the trained versions recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from lightningrl.rl.health import step_health
from lightningrl.rl.metrics import MetricsLog
from lightningstore import LLM, SqlStore
from lightningstore.auth import TokenConfig
from lightningstore.server import build_app

VIEWER = {"authorization": "Bearer view"}
NO_SIGNAL = "every group agreed for 3 steps (all failed): no signal"


async def metrics_of(store: SqlStore, csv: Path | None) -> dict[str, Any]:
    tokens = TokenConfig.from_mapping({"admin": "adm", "viewer": "view"})
    app = build_app(store, tokens=tokens, sweep_interval=None, proxy=False, gate=False, ui_metrics_csv=csv)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        answer = await client.get("/ui/api/metrics", headers=VIEWER)
        page = await client.get("/ui/training", headers=VIEWER)
    assert answer.status_code == 200 and page.status_code == 200
    assert 'id="health"' in page.text and "Learning health" in page.text
    return answer.json()


def log_steps(path: Path, shares: list[float]) -> MetricsLog:
    """A run's metrics.csv with the loop's health columns, one row per informative-group share."""
    log = MetricsLog(path)
    log.log({"step": 0, "val/success": 0.2})
    for step, share in enumerate(shares, start=1):
        row = {
            "step": step,
            "train/success": 0.0,
            "train/reward_mean": 0.0,
            "health/informative_share": share,
        }
        log.log({**row, **step_health(log.rows, row).columns})
    return log


async def test_the_panel_lists_the_newest_rows_health_lines(tmp_path: Path) -> None:
    store = SqlStore(tmp_path / "store.db")
    csv = tmp_path / "run" / "metrics.csv"
    log_steps(csv, [0.5, 0.0, 0.0, 0.0])
    body = await metrics_of(store, csv)
    assert body["health"] == {"step": 4, "lines": [NO_SIGNAL]}

    log_steps(csv, [0.0, 0.0, 0.0, 0.5])  # the run recovered: nothing to say after step 4
    assert (await metrics_of(store, csv))["health"] == {"step": 4, "lines": []}

    MetricsLog(csv).log({"step": 1, "train/success": 0.5})  # a run without health columns
    assert (await metrics_of(store, csv))["health"] is None
    await store.close()


async def test_without_a_metrics_csv_the_newest_version_says(tmp_path: Path) -> None:
    store = SqlStore(tmp_path / "store.db")
    llm = LLM(endpoints=["http://127.0.0.1:1/v1"], model="m", checkpoint="/m")
    base = await store.add_resource_version("llm", llm)
    first = await store.add_resource_version(
        "llm", llm, parent_id=base.version_id, metadata={"step": 1, "metrics": {}, "health": []}
    )
    await store.add_resource_version(
        "llm", llm, parent_id=first.version_id, metadata={"step": 2, "metrics": {}, "health": [NO_SIGNAL]}
    )
    # A malformed record does not count.
    await store.add_resource_version("other", llm, metadata={"step": 9, "health": "not a list"})
    body = await metrics_of(store, None)
    assert body["source"].startswith("the metrics stored with each published version")
    assert body["health"] == {"step": 1, "lines": [NO_SIGNAL]}  # recorded over the steps before step 2
    await store.close()
