"""Shared-prefix training: each prompt computed once per micro-batch, the same step as verl's full forward."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from test_verl_trainer import VOCAB, build_tiny_model

from lightningrl.credit import SequenceBatch, TrainingSequence, collate
from lightningrl.models import cached_model
from lightningrl.trainer import TrainerConfig, VerlActorTrainer
from lightningrl.trainer.shared_prefix import pack, prompt_groups, prompt_order, tree_mask


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-qwen2"))


def grouped_batch(
    prompts: int = 3, n: int = 3, seed: int = 0, vocab: int = VOCAB, prompt_len: int = 6
) -> tuple[SequenceBatch, torch.Tensor]:
    """`prompts` GRPO groups of `n` rows: one prompt per group (of different lengths), responses of
    different lengths, some tokens masked (a tool's output between two calls), rows shuffled."""
    gen = torch.Generator().manual_seed(seed)
    sequences = []
    for g in range(prompts):
        prompt = torch.randint(4, vocab, (prompt_len + 2 * g,), generator=gen).tolist()
        for i in range(n):
            length = 3 + (i * 2 + g) % 5
            mask = [1] * length
            if length > 4:
                mask[2] = mask[3] = 0
            sequences.append(
                TrainingSequence(
                    rollout_id=f"g{g}-r{i}",
                    prompt_ids=prompt,
                    response_ids=torch.randint(4, vocab, (length,), generator=gen).tolist(),
                    response_mask=mask,
                    rollout_logprobs=(-4 * torch.rand(length, generator=gen)).tolist(),
                    token_rewards=[0.0] * length,
                    call_ids=[0] * length,
                )
            )
    order = torch.randperm(len(sequences), generator=gen).tolist()
    batch = collate([sequences[i] for i in order])
    advantages = torch.randn(batch.responses.shape, generator=gen) * batch.response_mask
    return batch, advantages


def test_rows_pack_by_prompt_and_see_only_their_prompt_and_themselves() -> None:
    prompts = [[5, 6, 7], [8, 9], [5, 6, 7]]
    responses = [[10, 11], [12], [13, 14, 15]]
    assert prompt_groups(prompts) == [[0, 2], [1]]
    packed = pack(prompts[0], [0, 2], responses)
    assert packed.tokens == [5, 6, 7, 10, 11, 13, 14, 15]
    assert packed.positions == [0, 1, 2, 3, 4, 3, 4, 5]  # each response continues the prompt
    assert packed.targets == {0: (3, 2), 2: (5, 3)}
    mask = tree_mask([packed], 9)[0, 0]
    assert mask[5].tolist() == [True, True, True, False, False, True, False, False, False]  # row 2's first
    assert mask[4].tolist()[:5] == [True] * 5 and not mask[4, 5:].any()
    assert mask[8].tolist() == [False] * 8 + [True]  # padding sees itself only


def test_rows_of_one_prompt_are_ordered_together_longest_first() -> None:
    batch, _ = grouped_batch()
    order = prompt_order(batch.prompts, batch.attention_mask)
    assert sorted(order) == list(range(len(batch)))
    groups = [batch.rollout_ids[i].split("-")[0] for i in order]
    assert groups == sorted(groups, key=groups.index) and len(set(groups)) == 3
    lengths = batch.attention_mask.sum(dim=1)[order].tolist()
    assert all(lengths[i] >= lengths[i + 1] for i in range(len(order) - 1) if groups[i] == groups[i + 1])


def compare_with_full_forward(
    model_dir: Path,
    batch: SequenceBatch,
    advantages: torch.Tensor,
    config: TrainerConfig,
    steps: int,
    atol: float,
) -> None:
    shared = VerlActorTrainer(model_dir, config)
    full = VerlActorTrainer(model_dir, replace(config, shared_prefix=False))
    torch.testing.assert_close(
        shared.compute_log_probs(batch), full.compute_log_probs(batch), atol=atol, rtol=0
    )
    for _ in range(steps):
        a, b = shared.train_step(batch, advantages), full.train_step(batch, advantages)
        for key in (
            "loss",
            "grad_norm",
            "entropy",
            "entropy_decision",
            "mismatch_abs_mean",
            "rollout_is_mean",
        ):
            assert a[key] == pytest.approx(b[key], abs=atol, rel=1e-4), key
    after = shared.full_state()
    for name, weight in full.full_state().items():
        torch.testing.assert_close(after[name], weight, atol=atol, rtol=1e-4)


def test_a_shared_prefix_step_is_the_full_forwards_step(model_dir: Path) -> None:
    batch, advantages = grouped_batch()
    # Micro-batches of 4 of the 9 rows: a group split over two micro-batches is still exact. SGD at lr 1:
    # each weight moves by its gradient (Adam turns float noise in a ~0 gradient into a +-lr step).
    config = TrainerConfig(lr=1.0, optimizer="SGD", micro_batch_size=4)
    compare_with_full_forward(model_dir, batch, advantages, config, 2, 1e-6)


@pytest.mark.slow
def test_a_shared_prefix_step_is_the_full_forwards_step_on_the_real_model(tmp_path: Path) -> None:
    """SmolLM2-135M-Instruct (tied head, 30 layers), fp32: 2 prompts x 3 responses, one step."""
    batch, advantages = grouped_batch(prompts=2, n=3, vocab=49152, prompt_len=40)
    config = TrainerConfig(lr=1.0, optimizer="SGD")
    compare_with_full_forward(cached_model("smollm2"), batch, advantages, config, 1, 2e-4)
