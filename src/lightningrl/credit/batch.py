"""SequenceBatch: training sequences collated into verl's padded layout (prompts left, responses right)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from lightningrl.credit.sequence import TrainingSequence


@dataclass
class SequenceBatch:
    """B sequences padded to P prompt and R response positions; input = [prompt | response]."""

    prompts: torch.Tensor  # (B, P) long, left-padded
    responses: torch.Tensor  # (B, R) long, right-padded
    input_ids: torch.Tensor  # (B, P + R)
    attention_mask: torch.Tensor  # (B, P + R) long, 1 on real tokens
    position_ids: torch.Tensor  # (B, P + R) long, 0.. over real tokens
    response_mask: torch.Tensor  # (B, R) float, 1 where the loss applies
    rollout_log_probs: torch.Tensor  # (B, R) float
    token_rewards: torch.Tensor  # (B, R) float
    call_ids: torch.Tensor  # (B, R) long, -1 on masked and padded positions
    sequence_rewards: torch.Tensor  # (B,) float
    group_ids: list[str]
    rollout_ids: list[str]
    temperature: float = 1.0
    """The one temperature every row was sampled at: log-probs are scored from logits / temperature."""
    call_roles: list[dict[int, str]] | None = None
    """Per row, each call's role (`TrainingSequence.call_roles`); None when not known."""

    def __len__(self) -> int:
        return self.prompts.shape[0]

    @property
    def num_tokens(self) -> int:
        """Real (prompt + response) tokens in the batch."""
        return int(self.attention_mask.sum().item())

    def to(self, device: str | torch.device) -> SequenceBatch:
        """The batch with every tensor on `device`."""
        moved = {
            name: value.to(device) if isinstance(value, torch.Tensor) else value
            for name, value in self.__dict__.items()
        }
        return SequenceBatch(**moved)

    def select(self, rows: torch.Tensor | Sequence[int]) -> SequenceBatch:
        """The batch restricted to `rows` (indexes or a boolean mask), padding unchanged."""
        index = torch.as_tensor(rows)
        if index.dtype == torch.bool:
            index = index.nonzero().flatten()
        picked = index.tolist()
        return SequenceBatch(
            prompts=self.prompts[index],
            responses=self.responses[index],
            input_ids=self.input_ids[index],
            attention_mask=self.attention_mask[index],
            position_ids=self.position_ids[index],
            response_mask=self.response_mask[index],
            rollout_log_probs=self.rollout_log_probs[index],
            token_rewards=self.token_rewards[index],
            call_ids=self.call_ids[index],
            sequence_rewards=self.sequence_rewards[index],
            group_ids=[self.group_ids[i] for i in picked],
            rollout_ids=[self.rollout_ids[i] for i in picked],
            temperature=self.temperature,
            call_roles=None if self.call_roles is None else [self.call_roles[i] for i in picked],
        )


def batch_temperature(sequences: Sequence[TrainingSequence]) -> float:
    """The temperature all `sequences` were sampled at; ValueError when they differ or one is not > 0.

    A batch is scored at one temperature (verl's `meta_info["temperature"]`), so sequences sampled at
    several are refused rather than scored at the wrong one: each sampled at temperature T has
    log-probs of logits / T, and mixing would make the policy ratio compare different distributions.
    """
    temperatures = sorted({s.temperature for s in sequences})
    if len(temperatures) > 1:
        raise ValueError(
            f"sequences sampled at temperatures {temperatures} cannot share one batch (it is scored at one "
            "temperature): keep the proxy's train-mode rewrite (1.0) or give every train-mode call one "
            "temperature"
        )
    if temperatures and not temperatures[0] > 0:
        raise ValueError(
            f"sequences sampled at temperature {temperatures[0]} (greedy) have no log-probs to train on: "
            "train-mode calls need a temperature > 0"
        )
    return temperatures[0] if temperatures else 1.0


def batchable(sequences: Sequence[TrainingSequence]) -> tuple[list[TrainingSequence], list[TrainingSequence]]:
    """(kept, dropped): the sequences sampled at the batch's temperature (that of most of them, 1.0 on a
    tie; never greedy) and the rest, which `collate` would refuse to score beside them."""
    counts = Counter(s.temperature for s in sequences if s.temperature > 0)
    if not counts:
        return [], list(sequences)
    most = max(counts.values())
    chosen = 1.0 if counts.get(1.0) == most else next(t for t, count in counts.items() if count == most)
    kept = [s for s in sequences if s.temperature == chosen]
    return kept, [s for s in sequences if s.temperature != chosen]


def collate(sequences: Sequence[TrainingSequence], pad_token_id: int = 0) -> SequenceBatch:
    """Pad sequences into one batch; a sequence without a group id is its rollout's own group.

    All sequences must share one temperature (`batch_temperature`)."""
    if not sequences:
        raise ValueError("collate needs at least one sequence, got none")
    temperature = batch_temperature(sequences)
    size = len(sequences)
    prompt_len = max(len(s.prompt_ids) for s in sequences)
    response_len = max(len(s.response_ids) for s in sequences)
    prompts = torch.full((size, prompt_len), pad_token_id, dtype=torch.long)
    responses = torch.full((size, response_len), pad_token_id, dtype=torch.long)
    prompt_mask = torch.zeros((size, prompt_len), dtype=torch.long)
    response_attention = torch.zeros((size, response_len), dtype=torch.long)
    response_mask = torch.zeros((size, response_len), dtype=torch.float32)
    logprobs = torch.zeros((size, response_len), dtype=torch.float32)
    rewards = torch.zeros((size, response_len), dtype=torch.float32)
    call_ids = torch.full((size, response_len), -1, dtype=torch.long)
    for row, seq in enumerate(sequences):
        p, r = len(seq.prompt_ids), len(seq.response_ids)
        if not p or not r:
            raise ValueError(
                f"sequence {row} of rollout {seq.rollout_id!r} has {p} prompt, {r} response tokens"
            )
        prompts[row, prompt_len - p :] = torch.tensor(seq.prompt_ids)
        prompt_mask[row, prompt_len - p :] = 1
        responses[row, :r] = torch.tensor(seq.response_ids)
        response_attention[row, :r] = 1
        response_mask[row, :r] = torch.tensor(seq.response_mask, dtype=torch.float32)
        logprobs[row, :r] = torch.tensor(seq.rollout_logprobs, dtype=torch.float32)
        rewards[row, :r] = torch.tensor(seq.token_rewards, dtype=torch.float32)
        call_ids[row, :r] = torch.tensor(seq.call_ids, dtype=torch.long)
    attention_mask = torch.cat([prompt_mask, response_attention], dim=1)
    return SequenceBatch(
        prompts=prompts,
        responses=responses,
        input_ids=torch.cat([prompts, responses], dim=1),
        attention_mask=attention_mask,
        position_ids=(attention_mask.cumsum(dim=1) - 1).clamp(min=0),
        response_mask=response_mask,
        rollout_log_probs=logprobs,
        token_rewards=rewards,
        call_ids=call_ids,
        sequence_rewards=torch.tensor([s.sequence_reward for s in sequences], dtype=torch.float32),
        group_ids=[s.group_id if s.group_id is not None else s.rollout_id for s in sequences],
        rollout_ids=[s.rollout_id for s in sequences],
        temperature=temperature,
        call_roles=[dict(s.call_roles) for s in sequences],
    )
