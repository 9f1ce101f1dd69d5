"""Training metrics: appended to a CSV as they come, drawn as a reward-curve PNG; a batch's outcome summary."""

from __future__ import annotations

import csv
import logging
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from algorithm import RolloutOutcome
from lightningrl.credit import TrainingSequence

if TYPE_CHECKING:
    from lightningrl.rl.trackers import RunTrackers

logger = logging.getLogger(__name__)


class MetricsLog:
    """Rows of metrics (one per step); every row is also appended to `csv_path` at once, and handed to
    the run's experiment trackers when it has any."""

    def __init__(self, csv_path: str | Path | None = None) -> None:
        self.rows: list[dict[str, Any]] = []
        self.csv_path = Path(csv_path) if csv_path else None
        self._columns: list[str] = []
        self.trackers: RunTrackers | None = None

    def log(self, row: dict[str, Any]) -> None:
        self.rows.append(dict(row))
        if self.trackers is not None:
            self.trackers.log(row)
        if self.csv_path is None:
            return
        self.csv_path.parent.mkdir(parents=True, exist_ok=True)
        new_columns = [k for k in row if k not in self._columns]
        if new_columns or not self.csv_path.exists():
            # A new column: rewrite the file so every row has the full header.
            self._columns += new_columns
            with self.csv_path.open("w", newline="") as fh:
                writer = csv.DictWriter(fh, fieldnames=self._columns)
                writer.writeheader()
                writer.writerows(self.rows)
            return
        with self.csv_path.open("a", newline="") as fh:
            csv.DictWriter(fh, fieldnames=self._columns).writerow(row)

    @classmethod
    def resume(cls, csv_path: str | Path) -> MetricsLog:
        """A log continuing `csv_path`: its rows are read back (numbers as numbers), new rows append."""
        log = cls(csv_path)
        if log.csv_path is None or not log.csv_path.exists():
            return log
        with log.csv_path.open(newline="") as fh:
            reader = csv.DictReader(fh)
            log._columns = list(reader.fieldnames or [])
            log.rows = [{k: _number(v) for k, v in row.items() if v not in ("", None)} for row in reader]
        return log

    def column(self, key: str) -> list[tuple[int, float]]:
        """(step, value) for every row that has `key`."""
        return [(int(r["step"]), float(r[key])) for r in self.rows if r.get(key) is not None and "step" in r]


def _number(text: str) -> Any:
    """A CSV cell back as int, float or the text itself."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def plot_reward_curve(log: MetricsLog, path: str | Path, *, title: str = "LightningRL training") -> Path:
    """Train reward per step and held-out success at each validation, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    train = log.column("train/reward_mean")
    if log.column("val/success") and train and log.column("val/success")[0][0] == 0:
        ax.axhline(
            log.column("val/success")[0][1],
            color="tab:gray",
            ls="--",
            lw=1,
            label="held-out success before RL",
        )
    if train:
        ax.plot(
            *zip(*train, strict=True), label="train reward (mean over rollouts)", color="tab:blue", alpha=0.8
        )
    val = log.column("val/success")
    if val:
        ax.plot(*zip(*val, strict=True), "o-", label="held-out success", color="tab:orange")
    ax.set_xlabel("RL step")
    ax.set_ylabel("reward / success")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    ax.set_title(title)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out


def outcome_metrics(outcomes: Sequence[RolloutOutcome], threshold: float, *, prefix: str) -> dict[str, float]:
    """Mean reward, success rate, failures and per-tag success of a batch of outcomes, and the share of
    its groups that carry a learning signal (`informative_shares`)."""
    rewards = [o.reward or 0.0 for o in outcomes]
    row = {
        f"{prefix}/rollouts": float(len(outcomes)),
        f"{prefix}/reward_mean": sum(rewards) / max(1, len(rewards)),
        f"{prefix}/success": sum(1 for r in rewards if r >= threshold) / max(1, len(rewards)),
        f"{prefix}/failed": float(sum(1 for o in outcomes if not o.succeeded)),
    }
    by_tag: dict[str, list[float]] = defaultdict(list)
    for o in outcomes:
        for key, value in o.task.tags.items():
            by_tag[f"{key}={value}"].append(1.0 if (o.reward or 0.0) >= threshold else 0.0)
    row.update({f"{prefix}/success[{k}]": sum(v) / len(v) for k, v in sorted(by_tag.items())})
    row.update(informative_shares(outcomes))
    return row


def informative_shares(outcomes: Sequence[RolloutOutcome]) -> dict[str, float]:
    """`health/informative_share` (and `[tag=value]` per slice): of the groups of at least two finished
    rollouts, the share whose rewards differ. A group whose rewards all agree has no advantage to learn
    from (`update/dropped_groups`); failed rollouts are not trained on, so they are left out here too."""
    groups: dict[str, list[RolloutOutcome]] = defaultdict(list)
    for o in outcomes:
        if o.succeeded and o.rollout.group_id is not None:
            groups[o.rollout.group_id].append(o)
    informative: dict[str, list[float]] = defaultdict(list)
    for members in groups.values():
        if len(members) < 2:
            continue
        differ = 1.0 if len({m.reward or 0.0 for m in members}) > 1 else 0.0
        informative["health/informative_share"].append(differ)
        for key, value in members[0].task.tags.items():
            informative[f"health/informative_share[{key}={value}]"].append(differ)
    return {k: sum(v) / len(v) for k, v in sorted(informative.items())}


def dropped_sequences_row(
    kept: Sequence[TrainingSequence], dropped: Sequence[TrainingSequence]
) -> dict[str, Any]:
    """`update/dropped_sequences` (and, when some were, why) for sequences one batch could not take
    (`credit.batch.batchable`); each drop is also logged as a warning."""
    if not dropped:
        return {"update/dropped_sequences": 0}
    temperatures = sorted({s.temperature for s in dropped})
    reason = (
        f"sampled at temperatures {temperatures}, not the batch's "
        f"{kept[0].temperature if kept else 'none (every sequence greedy)'}"
    )
    rollouts = sorted({s.rollout_id for s in dropped})
    logger.warning("dropped %d training sequences of rollouts %s: %s", len(dropped), rollouts[:10], reason)
    return {"update/dropped_sequences": len(dropped), "update/dropped_reason": reason}
