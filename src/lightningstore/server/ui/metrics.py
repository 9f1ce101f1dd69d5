"""The training page's numbers: a run's metrics.csv when the server was given one, else what the store
itself knows: each published version's `metadata.step` and `metadata.metrics` (the update statistics the RL
loop stores with it), and the mean primary reward of the rollouts that sampled each version (train: the
step's parent, as the loop trains on it; val: the version itself, step 0 for the base).

The run's learning health (the RL loop's `health/lines`, rules that say in words why a run is flat or
falling) comes from the newest row that has it, or from the newest version's `metadata.health` (the
lines over the steps before that version was published).
"""

from __future__ import annotations

import csv
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lightningstore.data.resource import ResourceVersion
from lightningstore.data.reward import Reward
from lightningstore.data.status import RolloutStatus
from lightningstore.server.ui.outcome import primary_reward
from lightningstore.store import MAX_READ_IDS, LightningStore

STORE_METRICS_TTL = 15.0
MAX_ROLLOUTS = 5000
"""The most recent rollouts the store-derived rewards read (a long run's older steps show no reward)."""


@dataclass(frozen=True)
class Chart:
    """One chart: x = steps, one line per series (None where a step has no value)."""

    key: str
    title: str
    steps: list[int]
    series: dict[str, list[float | None]]


@dataclass(frozen=True)
class Health:
    """The run's learning-health lines after `step` (none: no problem found)."""

    step: int
    lines: list[str]


@dataclass(frozen=True)
class MetricsView:
    source: str
    rows: int
    charts: list[Chart]
    health: Health | None = None
    """None when the run recorded no health (a run before it, or another algorithm's)."""

    def as_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "rows": self.rows,
            "charts": [
                {"key": c.key, "title": c.title, "steps": c.steps, "series": c.series} for c in self.charts
            ],
            "health": None if self.health is None else {"step": self.health.step, "lines": self.health.lines},
        }


REWARD_COLUMNS = ("train/reward_mean", "train/success", "val/success", "val/reward_mean")
TOKEN_CHARTS = (
    (
        "tokens-mismatch",
        "Train-inference mismatch: |logp(server) - logp(trainer)| per token",
        ("tokens/mismatch_abs_mean", "tokens/mismatch_abs_p99", "tokens/mismatch_abs_max"),
    ),
    ("tokens-kl", "Train-inference KL (k3 estimate)", ("tokens/mismatch_k3_kl",)),
    (
        "tokens-drift",
        "Retokenization drift (share of calls) and prefix continuity (share of multi-call rollouts)",
        ("tokens/response_drift", "tokens/prompt_drift", "tokens/prefix_continuity"),
    ),
    ("tokens-lag", "Version lag of the batch (async)", ("async/staleness",)),
)
"""The token accounting (docs/token-accounting.md), one chart per question."""
UPDATE_PREFIXES = ("actor/", "update/")
HEALTH_COUNT, HEALTH_LINES, HEALTH_SEPARATOR = "health/count", "health/lines", " | "
"""The RL loop's health columns (`lightningrl.rl.health`): how many lines, and their text joined."""


def read_csv_rows(path: Path) -> list[dict[str, float]]:
    """Rows of a metrics.csv with their numeric cells (text cells such as a skip reason left out)."""
    rows = []
    with path.open(newline="") as fh:
        for raw in csv.DictReader(fh):
            row = {k: v for k, v in ((k, _number(v)) for k, v in raw.items() if k) if v is not None}
            if "step" in row:
                rows.append(row)
    return rows


def read_csv_health(path: Path) -> Health | None:
    """The health lines of the newest metrics.csv row that has a health count."""
    found: Health | None = None
    with path.open(newline="") as fh:
        for raw in csv.DictReader(fh):
            step, count = _number(raw.get("step")), _number(raw.get(HEALTH_COUNT))
            if step is None or count is None:
                continue
            text = raw.get(HEALTH_LINES) or ""
            found = Health(int(step), text.split(HEALTH_SEPARATOR) if text else [])
    return found


def store_health(versions: list[ResourceVersion]) -> Health | None:
    """The health lines the newest trained version recorded (over the steps before it)."""
    recorded = [
        (v.metadata["step"], v.metadata["health"])
        for v in versions
        if isinstance(v.metadata.get("step"), int)
        and isinstance(v.metadata.get("health"), list)
        and all(isinstance(line, str) for line in v.metadata["health"])
    ]
    if not recorded:
        return None
    step, lines = max(recorded, key=lambda item: item[0])
    return Health(step - 1, list(lines))


async def store_rows(store: LightningStore, versions: list[ResourceVersion]) -> list[dict[str, float]]:
    """One row per published version that names its training step, plus step 0 for a base version
    validated before training: the metrics stored with the version and the rewards of its rollouts."""
    rewards = await _rewards_by_version(store)
    rows: dict[int, dict[str, float]] = {}
    for version in versions:
        step, metrics = version.metadata.get("step"), version.metadata.get("metrics")
        if not isinstance(step, int):
            continue
        row = rows.setdefault(step, {"step": float(step)})
        if isinstance(metrics, dict):
            row.update({k: n for k, n in ((k, _number(v)) for k, v in metrics.items()) if n is not None})
        train = rewards.get(("train", version.parent_id or ""))
        if train:
            row["train/reward_mean"] = sum(train) / len(train)
        val = rewards.get(("val", version.version_id))
        if val:
            row["val/reward_mean"] = sum(val) / len(val)
        base_val = rewards.get(("val", version.parent_id or ""))
        if step == 1 and base_val:
            rows.setdefault(0, {"step": 0.0})["val/reward_mean"] = sum(base_val) / len(base_val)
    return list(rows.values())


async def _rewards_by_version(store: LightningStore) -> dict[tuple[str, str], list[float]]:
    """(mode, version id) -> the primary reward of each finished rollout that sampled that version (0 when
    it has none, as the loop counts a failed rollout)."""
    rollouts = await store.query_rollouts(
        status=[RolloutStatus.SUCCEEDED, RolloutStatus.FAILED],
        sort_by="enqueue_time",
        descending=True,
        limit=MAX_ROLLOUTS,
    )
    versions: dict[str, list[str]] = {}
    for rid in {r.resources_id for r in rollouts if r.resources_id}:
        found = await store.get_resources_by_id(rid)
        versions[rid] = [v.version_id for v in found.versions.values()] if found else []
    ids = [r.rollout_id for r in rollouts]
    by_rollout: dict[str, list[Reward]] = {}
    for start in range(0, len(ids), MAX_READ_IDS):
        by_rollout.update(await store.query_rewards_many(ids[start : start + MAX_READ_IDS]))
    out: dict[tuple[str, str], list[float]] = {}
    for r in rollouts:
        value = primary_reward(by_rollout.get(r.rollout_id, []))
        for version_id in versions.get(r.resources_id or "", []):
            out.setdefault((r.mode.value, version_id), []).append(value if value is not None else 0.0)
    return out


async def load_metrics(store: LightningStore, metrics_csv: Path | None) -> MetricsView:
    if metrics_csv is not None and metrics_csv.exists():
        rows, source = read_csv_rows(metrics_csv), f"metrics.csv at {metrics_csv}"
        health = read_csv_health(metrics_csv)
    else:
        versions = await store.list_resource_versions()
        rows, source = await store_rows(store, versions), "the metrics stored with each published version"
        health = store_health(versions)
        if metrics_csv is not None:
            source += f" ({metrics_csv} does not exist yet)"
    return MetricsView(source=source, rows=len(rows), charts=charts_of(rows), health=health)


@dataclass
class MetricsCache:
    """The last view, reused for `ttl` seconds: reading the store's rewards costs ~0.5-2 s for a few
    thousand rollouts, and every open training page asks every few seconds."""

    ttl: float = STORE_METRICS_TTL
    at: float = -math.inf
    view: MetricsView | None = None

    async def get(self, store: LightningStore, metrics_csv: Path | None) -> MetricsView:
        if metrics_csv is not None and metrics_csv.exists():
            return await load_metrics(store, metrics_csv)  # a small file: always fresh
        now = time.monotonic()
        if self.view is None or now - self.at > self.ttl:
            self.view, self.at = await load_metrics(store, metrics_csv), now
        return self.view


def charts_of(rows: list[dict[str, float]]) -> list[Chart]:
    """Reward and held-out success; held-out success per slice; the token accounting; then one chart per
    update statistic."""
    rows = sorted(rows, key=lambda r: r["step"])
    steps = [int(r["step"]) for r in rows]
    columns = list(dict.fromkeys(k for r in rows for k in r if k != "step"))

    def chart(key: str, title: str, names: list[str]) -> Chart | None:
        names = [n for n in names if any(n in r for r in rows)]
        if not names:
            return None
        kept = [i for i, r in enumerate(rows) if any(n in r for n in names)]
        series = {n: [rows[i].get(n) for i in kept] for n in names}
        return Chart(key=key, title=title, steps=[steps[i] for i in kept], series=series)

    charts = [
        chart("reward", "Reward and held-out success", list(REWARD_COLUMNS)),
        chart("slices", "Held-out success per slice", [c for c in columns if c.startswith("val/success[")]),
        *(chart(key, title, list(names)) for key, title, names in TOKEN_CHARTS),
    ]
    for column in columns:
        if column.startswith(UPDATE_PREFIXES) and not column.endswith("version_id"):
            charts.append(chart(column.replace("/", "-"), column, [column]))
    return [c for c in charts if c is not None]


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
    else:
        try:
            number = float(str(value))
        except ValueError:
            return None
    return number if math.isfinite(number) else None
