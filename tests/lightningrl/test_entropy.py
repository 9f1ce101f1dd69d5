"""The trainer's entropy statistics: from a forward the step makes anyway (no extra pass), equal to a plain
forward's, and at each call's first token apart from the mean."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from test_verl_trainer import VOCAB, build_tiny_model

from lightningrl.credit import SequenceBatch, TrainingSequence, collate
from lightningrl.trainer import TrainerConfig, VerlActorTrainer
from lightningrl.trainer.entropy import entropy_stats, first_call_tokens


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model with a sharper head: its entropy varies from position to position (a freshly
    initialised one is near uniform everywhere)."""
    from transformers import AutoModelForCausalLM

    path = build_tiny_model(tmp_path_factory.mktemp("tiny-qwen2"))
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    with torch.no_grad():
        model.lm_head.weight.mul_(40.0)
    model.save_pretrained(path)
    return path


def two_call_batch(size: int = 4, seed: int = 0) -> SequenceBatch:
    """Each row: call 0 (3 tokens), two context tokens (off-call), call 1 (2-4 tokens)."""
    gen = torch.Generator().manual_seed(seed)
    sequences = []
    for i in range(size):
        second = 2 + i % 3
        response = torch.randint(4, VOCAB, (5 + second,), generator=gen).tolist()
        sequences.append(
            TrainingSequence(
                rollout_id=f"r{i}",
                prompt_ids=torch.randint(4, VOCAB, (3 + i % 2,), generator=gen).tolist(),
                response_ids=response,
                response_mask=[1, 1, 1, 0, 0] + [1] * second,
                rollout_logprobs=[-3.0] * len(response),
                token_rewards=[0.0] * len(response),
                call_ids=[0, 0, 0, -1, -1] + [1] * second,
            )
        )
    return collate(sequences)


def plain_entropy(model_dir: Path, batch: SequenceBatch) -> torch.Tensor:
    """(B, R) entropy of softmax(logits / T) at each response position, from a plain HF forward."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="sdpa", dtype=torch.float32)
    with torch.no_grad():
        logits = model(
            input_ids=batch.input_ids, attention_mask=batch.attention_mask, position_ids=batch.position_ids
        ).logits
    prompt_len = batch.prompts.shape[1]
    log_p = torch.log_softmax(logits[:, prompt_len - 1 : -1].float() / batch.temperature, dim=-1)
    return -(log_p.exp() * log_p).sum(-1)


def test_first_call_tokens_marks_each_calls_first_token() -> None:
    call_ids = torch.tensor([[0, 0, -1, -1, 1, 1, 2], [-1, 3, 3, 3, -1, -1, -1]])
    expected = torch.tensor([[1, 0, 0, 0, 1, 0, 1], [0, 1, 0, 0, 0, 0, 0]], dtype=torch.bool)
    assert torch.equal(first_call_tokens(call_ids), expected)


def test_entropy_stats_average_trained_tokens_and_first_tokens() -> None:
    entropy = torch.tensor([[2.0, 1.0, 9.0, 4.0], [3.0, 5.0, 9.0, 9.0]])
    mask = torch.tensor([[1, 1, 0, 1], [1, 1, 0, 0]], dtype=torch.float32)
    call_ids = torch.tensor([[0, 0, -1, 1], [0, 0, -1, -1]])
    assert entropy_stats(entropy, mask, call_ids) == {
        "entropy": pytest.approx((2 + 1 + 4 + 3 + 5) / 5),
        "entropy_decision": pytest.approx((2 + 4 + 3) / 3),
    }
    assert entropy_stats(entropy, torch.zeros_like(mask), call_ids) == {}


@pytest.mark.parametrize("recompute", [False, True], ids=["update-forward", "old-log-prob-pass"])
def test_train_step_reports_entropy_from_its_one_scoring_forward(model_dir: Path, recompute: bool) -> None:
    batch = two_call_batch()
    trainer = VerlActorTrainer(model_dir, TrainerConfig(lr=1e-2, recompute_old_log_probs=recompute))
    forwards: list[str] = []
    infer, train = trainer._infer, trainer._train
    trainer._infer = lambda data: (forwards.append("infer"), infer(data))[1]  # type: ignore[method-assign]
    trainer._train = lambda data: (forwards.append("train"), train(data))[1]  # type: ignore[method-assign]

    expected = plain_entropy(model_dir, batch)  # the policy before the step: what sampled the batch
    stats = trainer.train_step(batch, batch.response_mask.clone())
    first = first_call_tokens(batch.call_ids) & batch.response_mask.bool()

    # The entropy rides on the old-log-prob forward, or on the update's own when that pass is skipped.
    assert forwards == (["infer", "train"] if recompute else ["train"])
    trained = batch.response_mask.bool()
    assert int(first.sum()) == 2 * len(batch)  # two calls per row
    assert math.isfinite(stats["entropy"]) and math.isfinite(stats["entropy_decision"])
    assert stats["entropy"] == pytest.approx(float(expected[trained].mean()), abs=1e-4)
    assert stats["entropy_decision"] == pytest.approx(float(expected[first].mean()), abs=1e-4)
    assert abs(stats["entropy_decision"] - stats["entropy"]) > 0.05
