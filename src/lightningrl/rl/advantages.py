"""Advantages (GRPO, REINFORCE++) per response token, from verl (the loss they feed is `trainer/loss.py`).

The maths is verl's (`verl.trainer.ppo.core_algos`); this module only maps a
`SequenceBatch` onto it. Estimators see one row per LLM call, not per merged sequence: each call
keeps its own value (see `lightningrl.credit.assign`), so merging calls never changes advantages.
verl is imported lazily: it costs seconds and `import lightningrl` must stay cheap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from lightningrl.credit.batch import SequenceBatch

ESTIMATORS = ("grpo", "reinforce_plus_plus")
# Each estimator's baseline: GRPO's is the group (`SequenceBatch.group_ids`), REINFORCE++'s the batch.
_BATCH_BASELINED = ("reinforce_plus_plus",)
BASELINES = ("role", "group", "group_and_call")


@dataclass(frozen=True)
class AdvantageConfig:
    """Which verl outcome estimator to run and how to guard groups without signal."""

    estimator: str = "grpo"
    norm_by_std: bool = True
    """GRPO divides by the group's std (False is Dr.GRPO)."""
    baseline: str = "role"
    """GRPO's comparison set for a call. "role" (the default): the calls of the task's rollouts with
    the same role, i.e. the same agent and kind of decision (`LlmCall.role`: a tool call, the final
    answer, or a key the agent names with the `x-lightningrl-decision` header), wherever they sit in
    their rollouts, so like is compared with like: a rollout that answered after one search and a
    sibling that searched again are compared answer with answer and search with search, and a group
    in which no rollout succeeded trains nothing unless a step reward tells its calls apart.
    "group": every call of the task's rollouts. "group_and_call": the call at the same position in
    its sibling rollouts (the k-th with other k-th calls; compares a shortcut's answer with a longer
    path's second search)."""
    epsilon: float = 1e-6
    drop_uniform_groups: bool = True
    """Drop baseline groups whose call values are all equal (a lone call too): they carry no signal."""
    uniform_tolerance: float = 1e-9
    scale_to_batch: bool = True
    """Dropping uniform groups only saves compute; it must not change the update. Under token-mean
    aggregation their zero-advantage tokens would sit in the loss's denominator, so the kept
    advantages are scaled by the kept rows' share of the batch's loss tokens. Without it, once most
    groups are uniform (late in training), each step is as large as an early one but driven by a few
    sampled failures: the calc demo's late oscillation."""
    negative_weight: float = 1.0
    """Scale of negative advantages (1.0: the estimator as is). Below 1 is asymmetric REINFORCE: a tiny
    policy pushed away from its failures leaks probability onto tokens no sample tried (here: broken
    tool-call format) faster than it learns which choice succeeds; down-weighting failures keeps the
    push on what worked."""

    def __post_init__(self) -> None:
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"estimator must be one of {ESTIMATORS}, got {self.estimator!r}")
        if self.baseline not in BASELINES:
            raise ValueError(f"baseline must be one of {BASELINES}, got {self.baseline!r}")
        if not 0.0 <= self.negative_weight <= 1.0:
            raise ValueError(f"negative_weight must be in [0, 1], got {self.negative_weight!r}")


@dataclass
class AdvantageResult:
    """Per-token advantages for the whole batch; rows with `keep` False carry zeros."""

    advantages: torch.Tensor  # (B, R)
    returns: torch.Tensor  # (B, R)
    keep: torch.Tensor  # (B,) bool
    groups: int
    """Baseline groups seen (GRPO: distinct group ids; REINFORCE++: 1, the batch)."""
    dropped_groups: int

    @property
    def dropped_sequences(self) -> int:
        """Sequences in dropped groups."""
        return int((~self.keep).sum().item())


def compute_advantages(batch: SequenceBatch, config: AdvantageConfig | None = None) -> AdvantageResult:
    """Advantages per response token, baselined per `config.baseline` (GRPO) or over the batch (REINFORCE++).

    Uniform baseline groups are dropped call by call; a sequence is kept when any of its calls is.
    """
    config = config or AdvantageConfig()
    rows, positions, values, call_index = call_segments(batch)
    keys = _baseline_keys(batch, rows, call_index, config)
    by_group: dict[str, list[float]] = {}
    for key, value in zip(keys, values, strict=True):
        by_group.setdefault(key, []).append(value)
    groups = sorted(by_group)
    live = set(groups)
    if config.drop_uniform_groups:
        live = {g for g in groups if max(by_group[g]) - min(by_group[g]) > config.uniform_tolerance}
    kept = [j for j, key in enumerate(keys) if key in live]
    keep = torch.zeros(len(batch), dtype=torch.bool)
    for j in kept:
        keep[rows[j]] = True
    dropped = len(groups) - len(live)
    advantages = torch.zeros_like(batch.token_rewards)
    returns = torch.zeros_like(batch.token_rewards)
    if kept:
        seg_adv, seg_ret = _run_estimator(
            [values[j] for j in kept],
            [len(positions[j]) for j in kept],
            np.array([keys[j] for j in kept], dtype=object),
            config,
        )
        if config.negative_weight != 1.0:
            seg_adv = torch.where(seg_adv < 0, seg_adv * config.negative_weight, seg_adv)
        for out_row, j in enumerate(kept):
            where = positions[j]
            advantages[rows[j], where] = seg_adv[out_row, : len(where)]
            returns[rows[j], where] = seg_ret[out_row, : len(where)]
        if config.scale_to_batch:
            tokens = batch.response_mask.sum(dim=1)
            advantages *= float(tokens[keep].sum() / tokens.sum().clamp(min=1.0))
    return AdvantageResult(
        advantages=advantages, returns=returns, keep=keep, groups=len(groups), dropped_groups=dropped
    )


def _baseline_keys(
    batch: SequenceBatch, rows: list[int], call_index: list[int], config: AdvantageConfig
) -> list[str]:
    """The baseline group of every call segment."""
    if config.estimator in _BATCH_BASELINED:
        return ["batch"] * len(rows)
    if config.baseline == "group_and_call":
        return [f"{batch.group_ids[r]}#call{k}" for r, k in zip(rows, call_index, strict=True)]
    if config.baseline == "role" and batch.call_roles is not None:
        roles = batch.call_roles
        return [f"{batch.group_ids[r]}#{roles[r].get(k, '')}" for r, k in zip(rows, call_index, strict=True)]
    return [batch.group_ids[r] for r in rows]


def call_segments(
    batch: SequenceBatch,
) -> tuple[list[int], list[torch.Tensor], list[float], list[int]]:
    """(row, token positions, value, call index) of every call in the batch; the value sits on its
    last token."""
    rows: list[int] = []
    positions: list[torch.Tensor] = []
    values: list[float] = []
    indexes: list[int] = []
    for row in range(len(batch)):
        ids = batch.call_ids[row]
        for call in torch.unique(ids[ids >= 0]).tolist():
            where = (ids == call).nonzero().flatten()
            rows.append(row)
            positions.append(where)
            values.append(float(batch.token_rewards[row, where[-1]].item()))
            indexes.append(int(call))
    return rows, positions, values, indexes


def _run_estimator(
    values: list[float], lengths: list[int], index: np.ndarray, config: AdvantageConfig
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl's estimator over one row per call: the value on the call's last token, mask over its tokens."""
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    width = max(lengths)
    rewards = torch.zeros((len(values), width))
    mask = torch.zeros((len(values), width))
    for row, (value, length) in enumerate(zip(values, lengths, strict=True)):
        rewards[row, length - 1] = value
        mask[row, :length] = 1.0
    # Discounting across calls already happened in credit assignment: within a call gamma is 1.
    algo = AlgoConfig(gamma=1.0, adv_estimator=config.estimator, norm_adv_by_std_in_grpo=config.norm_by_std)
    estimator = get_adv_estimator_fn(config.estimator)
    return estimator(
        token_level_rewards=rewards,
        response_mask=mask,
        index=index,
        epsilon=config.epsilon,
        norm_adv_by_std_in_grpo=config.norm_by_std,
        config=algo,
    )
