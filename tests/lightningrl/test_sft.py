"""SFT on successes: its update is NLL through verl's actor, and two steps run end to end through the store
server, its proxy, a runner process and an inference server, training on successes only."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch
from algorithm_stack import algorithm_stack
from rich.console import Console
from toy_ab import toy_tasks, warm_ab_model
from transformers import AutoModelForCausalLM

from lightningrl.algorithms.sft import SFT, SFT_KEY, nll_advantages, sft_config
from lightningrl.credit import RolloutEvidence, TrainingSequence, assign_credit_to_rollouts, collate
from lightningrl.demos.tinylm import build_tiny_model
from lightningrl.rl.config import LightningRLConfig
from lightningrl.trainer import TrainerConfig, VerlActorTrainer, reference_optimizer, response_log_probs
from lightningstore import rewards_of_rollouts, spans_of_rollouts


def test_sft_refuses_settings_under_which_its_loss_is_not_nll() -> None:
    for trainer, field in [
        (TrainerConfig(ppo_epochs=2), "ppo_epochs"),
        (TrainerConfig(mini_batch_size=4), "mini_batch_size"),
    ]:
        with pytest.raises(ValueError, match=field):
            sft_config(LightningRLConfig(trainer=trainer))
    assert sft_config(LightningRLConfig()).trainer.loss.rollout_is_threshold is None


def _batch(vocab: int, rows: int = 6) -> list[TrainingSequence]:
    gen = torch.Generator().manual_seed(0)
    out = []
    for i in range(rows):
        response = torch.randint(4, vocab, (3 + i % 3,), generator=gen).tolist()
        mask = [1] * len(response)
        if i % 2:
            mask[0] = 0  # a token the model did not generate (a tool result): no loss
        out.append(
            TrainingSequence(
                rollout_id=f"r{i}",
                prompt_ids=torch.randint(4, vocab, (2 + i % 2,), generator=gen).tolist(),
                response_ids=response,
                response_mask=mask,
                rollout_logprobs=[-1.0] * len(response),
                token_rewards=[1.0] * len(response),
                call_ids=[0] * len(response),
            )
        )
    return out


def test_the_update_is_the_token_mean_nll_step(tmp_path: Path) -> None:
    """verl's PPO-clip step with advantage 1 and ratio 1 equals a bare-torch NLL step, twice over."""
    model_dir = build_tiny_model(tmp_path / "m", seed=0, hidden_size=32, num_layers=1, num_heads=2)
    config = sft_config(LightningRLConfig(trainer=TrainerConfig(lr=1e-2, micro_batch_size=2))).trainer
    batch = collate(_batch(vocab=100))
    trainer = VerlActorTrainer(model_dir, config)
    reference = AutoModelForCausalLM.from_pretrained(
        model_dir, attn_implementation="sdpa", dtype=torch.float32
    )
    optimizer = reference_optimizer(reference, config)
    mask = batch.response_mask
    for _ in range(2):
        stats = trainer.train_step(batch, nll_advantages(batch).advantages)
        reference.train()
        nll = -(response_log_probs(reference, batch) * mask).sum() / mask.sum()
        optimizer.zero_grad(set_to_none=True)
        nll.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(reference.parameters(), config.grad_clip)
        optimizer.step()
        assert stats["grad_norm"] == pytest.approx(float(grad_norm), rel=1e-4)
        assert stats["pg_clipfrac"] == 0.0 and abs(stats["ppo_kl"]) < 1e-5  # ratio 1, nothing clipped
    with torch.no_grad():
        torch.testing.assert_close(  # the same weights after both steps
            trainer.compute_log_probs(batch), response_log_probs(reference, batch), atol=2e-5, rtol=0
        )


async def _response_log_prob(checkpoint: str, sequences: list[TrainingSequence]) -> float:
    """Sum over `sequences` of log p(model tokens | prompt) under `checkpoint` (a plain HF forward)."""
    model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32).eval()
    batch = collate(sequences)
    with torch.no_grad():
        return float((response_log_probs(model, batch) * batch.response_mask).sum())


@pytest.mark.slow
async def test_two_sft_steps_train_on_successes_only(tmp_path: Path) -> None:
    model = warm_ab_model(tmp_path / "toy")  # answers a or b at random; pick_b_agent rewards b
    config = LightningRLConfig(
        steps=2, tasks_per_step=3, rollouts_per_task=6, val_every=0, output_dir=tmp_path / "run",
        trainer=TrainerConfig(lr=3e-3), show_progress=False,
    )  # fmt: skip
    async with algorithm_stack(tmp_path, model, "toy_ab:pick_b_agent", model="toy") as stack:
        root = await stack.publish_llm(model, model="toy")
        sft = SFT(stack.store, toy_tasks(), config=config, console=Console(file=io.StringIO()))
        metrics = await sft.run()
        versions = await stack.store.list_resource_versions("llm")
        rollouts = [r for r in await stack.store.query_rollouts() if r.group_id.startswith("s")]
        ids = [r.rollout_id for r in rollouts]
        spans = await spans_of_rollouts(stack.store, ids)
        rewards = await rewards_of_rollouts(stack.store, ids)

    assert versions[0].version_id == root.version_id
    assert [v.metadata.get("step") for v in versions] == [None, 1, 2]  # one version per step
    for parent, child in zip(versions, versions[1:], strict=False):
        assert child.parent_id == parent.version_id and child.created_by == "sft"
        assert Path(child.resource.checkpoint, "config.json").exists()
    reward = {i: rewards[i][-1].value for i in ids}
    for row, version in zip(metrics.rows, versions[1:], strict=True):
        step = row["step"]
        of_step = [r.rollout_id for r in rollouts if r.group_id.startswith(f"s{step}/")]
        successes = sorted(i for i in of_step if reward[i] == 1.0)
        assert 0 < len(successes) < len(of_step), reward  # both kinds happened in the step
        assert version.metadata[SFT_KEY]["trained_rollouts"] == successes == sft.trained_rollouts[step]
        assert version.metadata[SFT_KEY]["left_out"] == len(of_step) - len(successes)
        assert row["update/sequences"] == len(successes)  # one call per rollout: one sequence each
        assert row["update/version_id"] == version.version_id

    trained = sorted(i for ids_ in sft.trained_rollouts.values() for i in ids_)
    sequences, _ = assign_credit_to_rollouts(
        (RolloutEvidence(None, spans[i], rewards[i]) for i in trained), config
    )
    assert len(sequences) == len(trained)
    before = await _response_log_prob(str(root.resource.checkpoint), sequences)
    after = await _response_log_prob(str(versions[-1].resource.checkpoint), sequences)
    assert after > before + 0.5, (before, after)  # the successful responses became likelier
