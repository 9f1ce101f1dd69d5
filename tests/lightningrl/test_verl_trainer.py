"""verl's own actor update on the CPU: plugin, parity with a bare-torch step, learning, checkpoints."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from importlib.metadata import entry_points
from pathlib import Path

import pytest
import torch

from lightningrl.credit import SequenceBatch, TrainingSequence, assign_credit, collate
from lightningrl.rl.advantages import compute_advantages
from lightningrl.trainer import (
    Trainer,
    TrainerConfig,
    VerlActorTrainer,
    reference_optimizer,
    response_log_probs,
    torch_reference_step,
)
from lightningrl.trainer.batch_layout import (
    RowLayout,
    by_length,
    packed_micro_batches,
    padded_share,
    whole_micro_batches,
)
from lightningrl.trainer.loss import PolicyLossConfig
from lightningstore import semconv
from lightningstore.data.reward import Reward
from lightningstore.data.span import Span

VOCAB = 128


def build_tiny_model(path: Path, seed: int = 0) -> Path:
    """A ~27k-parameter Qwen2 and a word-level tokenizer, saved as a normal HF directory."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    Qwen2ForCausalLM(config).save_pretrained(path)
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3} | {f"w{i}": i for i in range(4, VOCAB)}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token="<pad>", bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    ).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-qwen2"))


def random_batch(size: int = 8, seed: int = 0) -> tuple[SequenceBatch, torch.Tensor]:
    """Ragged prompts/responses, some masked response tokens, off-policy rollout logprobs, advantages."""
    gen = torch.Generator().manual_seed(seed)
    sequences = []
    for i in range(size):
        response = torch.randint(4, VOCAB, (4 + i % 4,), generator=gen).tolist()
        mask = [1] * len(response)
        if i % 2:
            mask[1] = 0
        sequences.append(
            TrainingSequence(
                rollout_id=f"r{i}",
                prompt_ids=torch.randint(4, VOCAB, (3 + i % 3,), generator=gen).tolist(),
                response_ids=response,
                response_mask=mask,
                rollout_logprobs=(-5 * torch.rand(len(response), generator=gen)).tolist(),
                token_rewards=[0.0] * len(response),
                call_ids=[0] * len(response),
            )
        )
    batch = collate(sequences)
    advantages = torch.randn(batch.responses.shape, generator=gen) * batch.response_mask
    return batch, advantages


def test_verl_finds_the_plugin_by_its_entry_point_alone() -> None:
    [plugin] = [ep for ep in entry_points(group="verl.plugins") if ep.name == "lightningrl_cpu"]
    assert plugin.value == "lightningrl.verl_cpu"

    # A fresh interpreter that imports only verl: the entry point must switch it to the CPU.
    code = (
        "from verl.utils.device import get_device_name, get_device_id, get_torch_device\n"
        "from verl.workers.engine import EngineRegistry\n"
        "print(get_device_name(), get_device_id(), get_torch_device().get_device_name(),\n"
        "      EngineRegistry.get_engine_cls('language_model', 'fsdp2').__name__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.split() == ["cpu", "cpu", "CPU", "FSDPEngineWithLMHead"]


def test_fsdp1_is_not_offered_on_the_cpu() -> None:
    # `import verl` loads the plugin (entry point), which registers fsdp2 engines only.
    from verl.workers.engine import EngineRegistry

    with pytest.raises(ValueError, match="No engine registered for device='cpu'"):
        EngineRegistry.get_engine_cls("language_model", "fsdp")


@pytest.mark.parametrize("rows", [8, 7])
def test_verl_step_matches_the_bare_torch_step(model_dir: Path, rows: int) -> None:
    """Two micro-batches (gradient accumulation); 7 rows: the second completed by a loss-free padding row."""
    from transformers import AutoModelForCausalLM

    config = TrainerConfig(lr=1e-2, micro_batch_size=4)
    batch, advantages = random_batch(size=rows)
    trainer = VerlActorTrainer(model_dir, config)
    reference = AutoModelForCausalLM.from_pretrained(
        model_dir, attn_implementation="sdpa", dtype=torch.float32
    )
    optimizer = reference_optimizer(reference, config)
    assert isinstance(trainer, Trainer)

    with torch.no_grad():
        torch.testing.assert_close(
            trainer.compute_log_probs(batch), response_log_probs(reference, batch), atol=1e-5, rtol=0
        )
    for _ in range(3):
        verl_metrics = trainer.train_step(batch, advantages)
        torch_metrics = torch_reference_step(reference, optimizer, batch, advantages, config)
        assert verl_metrics["loss"] == pytest.approx(torch_metrics["loss"], abs=1e-5)
        assert verl_metrics["grad_norm"] == pytest.approx(torch_metrics["grad_norm"], abs=1e-5)
    assert verl_metrics["tokens"] == batch.response_mask.sum().item()
    assert verl_metrics["padding_rows"] == 8 - rows
    assert {"pg_clipfrac", "ppo_kl", "rollout_is_mean", "step_time_s"} <= verl_metrics.keys()


def test_one_mini_batch_is_laid_out_in_whole_micro_batches_of_whole_prompt_groups() -> None:
    # (rows, ranks, cap) -> (micro-batch, rows after padding): never a micro-batch below the cap that a
    # divisor would force (25 rows: 5 of 5 before, cutting every GRPO group of 8).
    assert whole_micro_batches(25, 1, 8) == (8, 32)
    assert whole_micro_batches(24, 1, 8) == (8, 24)
    assert whole_micro_batches(5, 1, 8) == (5, 5)
    assert whole_micro_batches(9, 2, 4) == (4, 16)
    # A group is split only where it exceeds a micro-batch; smaller ones packed first-fit.
    assert packed_micro_batches([[0, 1, 2], [3, 4, 5, 6, 7], [8, 9, 10, 11, 12]], 4) == [
        [0, 1, 2, 7],
        [3, 4, 5, 6],
        [8, 9, 10, 11],
        [12],
    ]
    # Three groups of 8 and a stray row (a rollout whose calls did not merge): 4 forwards, each of one
    # prompt, the stray row's completed by 7 padding rows copying it.
    prompts = torch.tensor([[10 + i % 3, 1] for i in range(24)] + [[20, 2]])
    mask = torch.ones((25, 6), dtype=torch.long)
    layout = RowLayout.for_one_mini_batch(prompts, mask, ranks=1, cap=8, by_prompt=True)
    assert layout.micro_batch == 8 and len(layout.index) == 32 and layout.padding == 7
    micro_batches = [layout.index[i : i + 8] for i in range(0, 32, 8)]
    assert [{int(prompts[row, 0]) for row in micro} for micro in micro_batches] == [{10}, {11}, {12}, {20}]
    assert micro_batches[3] == [24] * 8 and layout.pad[24:] == [False] + [True] * 7

    batch, advantages = random_batch(size=3)
    layout = RowLayout.for_one_mini_batch(batch.prompts, batch.attention_mask, ranks=1, cap=2, by_prompt=True)
    laid = layout.apply(batch)
    pads = torch.tensor(layout.pad)
    width = batch.prompts.shape[1]
    assert len(laid) == 4 and laid.response_mask[pads].sum() == 0 and (laid.call_ids[pads] == -1).all()
    assert laid.attention_mask[pads, width:].sum().item() == 1  # cut to one response token
    assert (layout.rows_of(advantages)[pads] == 0).all()
    torch.testing.assert_close(layout.restore(layout.rows_of(advantages)), advantages)


def test_rows_sorted_by_length_pad_less() -> None:
    lengths = [3, 9, 4, 8]
    mask = torch.tensor([[1] * n + [0] * (9 - n) for n in lengths])
    assert by_length(mask) == [1, 3, 2, 0]
    assert padded_share(mask, 2) == pytest.approx(1 - 24 / (2 * 9 + 2 * 8))  # [3, 9], [4, 8]
    assert padded_share(mask[by_length(mask)], 2) == pytest.approx(1 - 24 / (2 * 9 + 2 * 4))
    assert padded_share(mask, 1) == 0.0


def test_an_on_policy_step_without_the_old_log_prob_pass_is_the_same_step(model_dir: Path) -> None:
    """One epoch, one mini-batch: the update's own forward stands in for verl's separate old-log-prob
    pass (the PPO ratio is 1 either way); the loss, gradient, weights and what that pass measured agree."""
    batch, advantages = random_batch()
    config = TrainerConfig(lr=1e-2, micro_batch_size=4)
    own = VerlActorTrainer(model_dir, config)
    recomputed = VerlActorTrainer(model_dir, replace(config, recompute_old_log_probs=True))
    infers: list[int] = []
    infer = own._infer
    own._infer = lambda data: (infers.append(1), infer(data))[1]  # type: ignore[method-assign]

    for _ in range(2):
        fast, slow = own.train_step(batch, advantages), recomputed.train_step(batch, advantages)
        for key in ("loss", "grad_norm", "rollout_is_mean", "mismatch_abs_mean", "mismatch_k3_kl", "entropy"):
            assert fast[key] == pytest.approx(slow[key], rel=1e-4, abs=1e-5), key
        assert fast["mismatch_abs_max"] == pytest.approx(slow["mismatch_abs_max"], rel=1e-4)
        assert fast["pg_clipfrac"] == 0.0 and fast["rollout_is_mean"] < 1.0  # ratios of 1; capped IS weights
    assert not infers  # no scoring pass: the update's forward was the only one
    for name, weight in own.full_state().items():
        torch.testing.assert_close(weight, recomputed.full_state()[name], atol=1e-5, rtol=1e-4)
    # Several mini-batches or epochs: the later ones are off-policy, so the old log-probs are scored first.
    several = VerlActorTrainer(model_dir, replace(config, mini_batch_size=4))
    infer_several = several._infer
    several._infer = lambda data: (infers.append(1), infer_several(data))[1]  # type: ignore[method-assign]
    several.train_step(batch, advantages)
    assert infers == [1]


def test_positive_advantages_raise_the_log_prob_of_trained_tokens(model_dir: Path) -> None:
    batch, _ = random_batch(size=4, seed=1)
    advantages = batch.response_mask.clone()
    trainer = VerlActorTrainer(model_dir, TrainerConfig(lr=1e-2))
    before_weights = trainer.full_state()
    before = trainer.compute_log_probs(batch)

    for _ in range(4):
        trainer.train_step(batch, advantages)

    after = trainer.compute_log_probs(batch)
    trained = batch.response_mask.bool()
    assert after[trained].mean() > before[trained].mean() + 0.05
    changed = [name for name, w in trainer.full_state().items() if not torch.equal(w, before_weights[name])]
    assert "lm_head.weight" in changed and len(changed) > 10


def test_kl_loss_to_the_starting_checkpoint_anchors_tokens_the_reward_ignores(model_dir: Path) -> None:
    batch, _ = random_batch(size=8, seed=3)
    pushed = torch.tensor([i % 2 == 0 for i in range(len(batch))])
    advantages = batch.response_mask * pushed[:, None]  # odd rows: no reward signal at all

    def drift_of_unrewarded_rows(kl_loss_coef: float) -> tuple[float, list[float]]:
        config = TrainerConfig(lr=1e-2, loss=PolicyLossConfig(kl_loss_coef=kl_loss_coef))
        trainer = VerlActorTrainer(model_dir, config)
        before = trainer.compute_log_probs(batch)
        kl = [trainer.train_step(batch, advantages).get("kl_loss", 0.0) for _ in range(5)]
        after = trainer.compute_log_probs(batch)
        idle = batch.response_mask.bool() & ~pushed[:, None]
        return float((after - before)[idle].abs().mean()), kl

    free, _ = drift_of_unrewarded_rows(0.0)
    anchored, kl = drift_of_unrewarded_rows(2.0)

    assert kl[0] == pytest.approx(0.0, abs=1e-6)  # the policy starts AT the reference
    assert kl[-1] > 1e-4
    assert anchored < 0.7 * free


def test_checkpoint_is_a_loadable_hugging_face_directory(model_dir: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    batch, advantages = random_batch(size=4, seed=2)
    trainer = VerlActorTrainer(model_dir, TrainerConfig(lr=1e-2))
    trainer.train_step(batch, advantages)

    out = trainer.save_checkpoint(tmp_path / "step-1")

    model = AutoModelForCausalLM.from_pretrained(out, attn_implementation="sdpa")
    with torch.no_grad():
        torch.testing.assert_close(
            response_log_probs(model, batch), trainer.compute_log_probs(batch), atol=1e-5, rtol=0
        )
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (out / name).read_bytes() == (model_dir / name).read_bytes()
    assert PreTrainedTokenizerFast.from_pretrained(out)("w5 w6")["input_ids"] == [5, 6]


def test_spans_to_a_verl_update_end_to_end(model_dir: Path) -> None:
    def rollout(rollout_id: str, answer: int, value: float) -> list[TrainingSequence]:
        attributes = {
            semconv.LLM_PROMPT_TOKEN_IDS: [1, 5, 6],
            semconv.LLM_RESPONSE_TOKEN_IDS: [answer, 2],
            semconv.LLM_RESPONSE_LOGPROBS: [-4.0, -4.0],
        }
        span = Span(
            rollout_id=rollout_id,
            attempt_id="a",
            trace_id="t",
            span_id="s",
            name="chat",
            attributes=attributes,
            sequence_id=1,
        )
        reward = Reward(rollout_id=rollout_id, value=value, reward_id=f"w-{rollout_id}", create_time=0.0)
        return assign_credit([span], [reward], group_id="task").sequences

    sequences = rollout("r1", 7, 1.0) + rollout("r2", 8, 0.0) + rollout("r3", 9, 0.0) + rollout("r4", 10, 1.0)
    batch = collate(sequences)
    result = compute_advantages(batch)
    trainer = VerlActorTrainer(model_dir, TrainerConfig(lr=5e-3))
    good = batch.responses[:, 0] == 7

    before = trainer.compute_log_probs(batch)[good, 0]
    metrics = trainer.train_step(batch.select(result.keep), result.advantages[result.keep])
    after = trainer.compute_log_probs(batch)[good, 0]

    assert metrics["sequences"] == 4.0 and metrics["tokens"] == 8.0
    assert after.item() > before.item()


def sampled_at(rollout_id: str, temperature: float | None) -> list[TrainingSequence]:
    """One rollout's sequences from an LLM span recorded at `temperature` (None: not recorded)."""
    attributes: dict[str, object] = {
        semconv.LLM_PROMPT_TOKEN_IDS: [1, 5, 6, 9],
        semconv.LLM_RESPONSE_TOKEN_IDS: [11, 40, 77, 2],
        semconv.LLM_RESPONSE_LOGPROBS: [-3.0] * 4,
    }
    if temperature is not None:
        attributes[semconv.GEN_AI_TEMPERATURE] = temperature
    span = Span(rollout_id=rollout_id, attempt_id="a", trace_id="t", span_id="s", name="chat",
                attributes=attributes, sequence_id=1)  # fmt: skip
    reward = Reward(rollout_id=rollout_id, value=1.0, reward_id=f"w-{rollout_id}", create_time=0.0)
    return assign_credit([span], [reward]).sequences


def test_log_probs_are_scored_at_the_temperature_the_spans_record(model_dir: Path) -> None:
    from transformers import AutoModelForCausalLM

    batch = collate(sampled_at("r1", 0.2) + sampled_at("r2", 0.2))
    assert batch.temperature == 0.2
    trainer = VerlActorTrainer(model_dir, TrainerConfig(lr=1e-2))
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
    with torch.no_grad():
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    prompt_len = batch.prompts.shape[1]
    steps = logits[:, prompt_len - 1 : -1].float()
    at_02 = torch.log_softmax(steps / 0.2, dim=-1).gather(2, batch.responses[:, :, None]).squeeze(2)
    at_1 = torch.log_softmax(steps, dim=-1).gather(2, batch.responses[:, :, None]).squeeze(2)
    scored = trainer.compute_log_probs(batch)
    # Measured: verl's fp32 CPU path is within 5e-7 of the plain forward at 0.2 (and 0.95 from it at 1.0).
    torch.testing.assert_close(scored, at_02, atol=1e-4, rtol=0)
    assert (scored - at_1).abs().max().item() > 0.1  # scoring at 1.0 would be detectably different

    with pytest.raises(ValueError, match="temperature 0.2, but rollout_is_threshold=2.0"):
        trainer.train_step(batch, torch.ones(batch.responses.shape))
    unrecorded = collate(sampled_at("r3", None))
    assert unrecorded.temperature == 1.0  # a span without a temperature: the servers' default
    torch.testing.assert_close(trainer.compute_log_probs(unrecorded), at_1[:1], atol=1e-4, rtol=0)


def test_a_batch_of_several_temperatures_or_a_greedy_one_is_refused() -> None:
    with pytest.raises(ValueError, match=r"temperatures \[0.2, 1.0\] cannot share one batch"):
        collate(sampled_at("r1", 0.2) + sampled_at("r2", 1.0))
    with pytest.raises(ValueError, match="temperature 0.0 .greedy."):
        collate(sampled_at("r1", 0.0))


def test_half_precision_on_a_cpu_without_its_kernels_is_called_out(monkeypatch: pytest.MonkeyPatch) -> None:
    from lightningrl.trainer.verl_config import slow_half_precision

    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    why = slow_half_precision("bf16", "cpu")
    assert why is not None and "AVX2" in why and "param_dtype='fp32'" in why
    assert slow_half_precision("fp32", "cpu") is None and slow_half_precision("bf16", "cuda") is None
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    assert slow_half_precision("bf16", "cpu") is None
