"""Advantages without groups: each call's value minus a running baseline kept across steps.

Production traffic arrives one rollout per task, with no siblings to compare against, so GRPO's group
baseline has nothing to work with (every one-item group is uniform and dropped). A running baseline
remembers what the policy used to score: per task (the rollout's group id, or a hash of its input) or
over everything. A call's advantage is its value minus the baseline *before* this batch updates it; a
task seen for the first time is compared with the global baseline, and the very first batch with its
own mean. Advantages are then divided by the batch's std (REINFORCE++'s whitening, without re-centring)
so step sizes do not depend on the reward's scale.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from lightningrl.credit.batch import SequenceBatch
from lightningrl.rl.advantages import AdvantageConfig, AdvantageResult, call_segments

RUNNING_BASELINES = ("running_task", "running_global")


@dataclass
class RunningBaseline:
    """Exponential moving averages of call values, per baseline key and overall."""

    per_task: bool = True
    decay: float = 0.9
    """Weight of the old mean in each update (0 forgets everything but the last batch)."""
    normalize: bool = True
    means: dict[str, float] = field(default_factory=dict)
    global_mean: float | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.decay < 1.0:
            raise ValueError(f"baseline decay must be in [0, 1), got {self.decay!r}")

    @classmethod
    def named(cls, name: str, *, decay: float = 0.9, normalize: bool = True) -> RunningBaseline:
        """ "running_task" or "running_global"."""
        if name not in RUNNING_BASELINES:
            raise ValueError(f"a running baseline is one of {RUNNING_BASELINES}, got {name!r}")
        return cls(per_task=name == "running_task", decay=decay, normalize=normalize)

    def baseline_for(self, key: str, batch_mean: float) -> float:
        """The value a call of task `key` is compared with (before this batch is folded in)."""
        if self.per_task and key in self.means:
            return self.means[key]
        return self.global_mean if self.global_mean is not None else batch_mean

    def observe(self, keys: list[str], values: list[float]) -> None:
        """Fold one batch's call values into the running means."""
        if not values:
            return
        self.global_mean = _ema(self.global_mean, sum(values) / len(values), self.decay)
        by_key: dict[str, list[float]] = {}
        for key, value in zip(keys, values, strict=True):
            by_key.setdefault(key, []).append(value)
        for key, group in by_key.items():
            self.means[key] = _ema(self.means.get(key), sum(group) / len(group), self.decay)

    def advantages(self, batch: SequenceBatch, config: AdvantageConfig | None = None) -> AdvantageResult:
        """Per-token advantages: value - baseline on every token of the call (whitened by the batch std).

        Calls whose advantage is zero carry no signal and are dropped (`keep`), and the kept ones scaled
        by their share of loss tokens, as `compute_advantages` does for uniform groups."""
        config = config or AdvantageConfig()
        rows, positions, values, _ = call_segments(batch)
        keys = [batch.group_ids[r] if self.per_task else "all" for r in rows]
        batch_mean = sum(values) / len(values) if values else 0.0
        raw = [v - self.baseline_for(k, batch_mean) for k, v in zip(keys, values, strict=True)]
        self.observe(keys, values)
        scale = 1.0
        if self.normalize and len(raw) > 1:
            mean = sum(raw) / len(raw)
            std = math.sqrt(sum((a - mean) ** 2 for a in raw) / (len(raw) - 1))
            scale = 1.0 / (std + config.epsilon) if std > config.uniform_tolerance else 1.0
        advantages = torch.zeros_like(batch.token_rewards)
        returns = torch.zeros_like(batch.token_rewards)
        keep = torch.zeros(len(batch), dtype=torch.bool)
        dropped = 0
        for j, (row, where) in enumerate(zip(rows, positions, strict=True)):
            value = raw[j] * scale
            if value < 0:
                value *= config.negative_weight
            returns[row, where] = values[j]
            if abs(raw[j]) <= config.uniform_tolerance:
                dropped += 1
                continue
            advantages[row, where] = value
            keep[row] = True
        if config.scale_to_batch and bool(keep.any()):
            tokens = batch.response_mask.sum(dim=1)
            advantages *= float(tokens[keep].sum() / tokens.sum().clamp(min=1.0))
        return AdvantageResult(
            advantages=advantages,
            returns=returns,
            keep=keep,
            groups=len(set(keys)),
            dropped_groups=dropped,
        )

    def state(self) -> dict[str, object]:
        """What the baseline knows (recorded on each version continuous training publishes)."""
        return {
            "kind": "running_task" if self.per_task else "running_global",
            "decay": self.decay,
            "global_mean": self.global_mean,
            "tasks": len(self.means),
        }


def _ema(old: float | None, new: float, decay: float) -> float:
    return new if old is None else decay * old + (1.0 - decay) * new
