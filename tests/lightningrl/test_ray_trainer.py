"""RayTrainer: verl's RayWorkerGroup over 2 ranks (FSDP2 over gloo, logical GPUs) equals 1 rank; LoRA.

One local Ray for the module (started the way a run starts it: `connect_ray`), the ~27k-parameter
Qwen2 of test_verl_trainer, one or two steps per trainer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from test_verl_trainer import build_tiny_model, random_batch

from lightningrl.adapter import ADAPTER_CONFIG, ADAPTER_WEIGHTS, base_of, is_adapter_dir, load_causal_lm
from lightningrl.advantages import PolicyLossConfig
from lightningrl.trainer import (
    RayTrainer,
    Trainer,
    TrainerConfig,
    VerlActorTrainer,
    build_trainer,
    response_log_probs,
)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-qwen2"))


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    import ray

    from lightningrl.trainer.ray_cluster import ADDRESS_ENV, connect_ray

    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(ADDRESS_ENV, raising=False)
        assert connect_ray(2)  # started here: 2 logical GPUs on this GPU-less machine
    assert ray.cluster_resources()["GPU"] == 2
    yield
    ray.shutdown()


def run_steps(trainer: Trainer, steps: int, out: Path) -> tuple[torch.Tensor, list[dict[str, float]]]:
    """Step-0 log-probs, the metrics of `steps` steps on one fixed batch, then a checkpoint at `out`."""
    batch, advantages = random_batch(size=8, seed=4)
    log_probs = trainer.compute_log_probs(batch)
    metrics = [trainer.train_step(batch, advantages) for _ in range(steps)]
    trainer.save_checkpoint(out)
    return log_probs, metrics


def test_two_ranks_match_one_rank_with_a_kl_term(model_dir: Path, local_ray: None, tmp_path: Path) -> None:
    # Two micro-batches per rank on 1 rank, one on each of 2 ranks; the KL term pulls to the start.
    config = TrainerConfig(
        lr=1e-2, micro_batch_size=4, backend="ray", loss=PolicyLossConfig(kl_loss_coef=0.5)
    )
    runs = {}
    for ranks in (1, 2):
        trainer = build_trainer(model_dir, TrainerConfig(**{**vars(config), "num_workers": ranks}))
        assert isinstance(trainer, RayTrainer) and isinstance(trainer, Trainer)
        try:
            runs[ranks] = run_steps(trainer, 2, tmp_path / f"ranks-{ranks}")
            if ranks == 2:
                batch, _ = random_batch(size=8, seed=4)
                trained = trainer.compute_log_probs(batch)
        finally:
            trainer.close()
    (lp1, m1), (lp2, m2) = runs[1], runs[2]

    # Measured (this machine, 5 runs): step-0 log-probs and losses bit-identical; grad-norms
    # within 1.2e-7; weights after 2 steps within 4e-7.
    torch.testing.assert_close(lp2, lp1, atol=1e-6, rtol=0)
    for one, two in zip(m1, m2, strict=True):
        assert two["loss"] == pytest.approx(one["loss"], abs=1e-5)
        assert two["grad_norm"] == pytest.approx(one["grad_norm"], abs=1e-5)
        assert two["kl_loss"] == pytest.approx(one["kl_loss"], abs=1e-6)
    assert m1[0]["kl_loss"] == pytest.approx(0.0, abs=1e-7) and m1[1]["kl_loss"] > 1e-5
    w1 = load_file(tmp_path / "ranks-1" / "model.safetensors")
    w2 = load_file(tmp_path / "ranks-2" / "model.safetensors")
    assert w1.keys() == w2.keys()
    assert max((w1[k] - w2[k]).abs().max().item() for k in w1) < 1e-5
    start = load_file(model_dir / "model.safetensors")
    assert max((w2[k] - start[k]).abs().max().item() for k in w2) > 1e-3  # it did train

    # The 2-rank checkpoint is an ordinary HF directory scoring what the ranks score.
    model = load_causal_lm(tmp_path / "ranks-2", dtype=torch.float32)
    with torch.no_grad():
        torch.testing.assert_close(response_log_probs(model, batch), trained, atol=1e-5, rtol=0)
    assert (tmp_path / "ranks-2" / "tokenizer.json").read_bytes() == (
        model_dir / "tokenizer.json"
    ).read_bytes()


def test_lora_trains_and_saves_only_the_adapter_on_both_backends(
    model_dir: Path, local_ray: None, tmp_path: Path
) -> None:
    config = TrainerConfig(lr=1e-2, micro_batch_size=4, lora_rank=4, lora_alpha=8, full_determinism=True)
    try:
        local = VerlActorTrainer(model_dir, config)
        base_before = local.full_state()  # under LoRA without merging: the base weights
        local_lp, local_metrics = run_steps(local, 1, tmp_path / "local")
        base_after = local.full_state()
    finally:
        torch.use_deterministic_algorithms(False)  # full_determinism sets it process-wide
    assert base_before.keys() == base_after.keys()
    assert all(torch.equal(base_before[k], base_after[k]) for k in base_before)  # the base is frozen

    ray_trainer = RayTrainer(model_dir, TrainerConfig(**{**vars(config), "backend": "ray", "num_workers": 2}))
    try:
        ray_lp, ray_metrics = run_steps(ray_trainer, 1, tmp_path / "ray")
        batch, _ = random_batch(size=8, seed=4)
        trained = ray_trainer.compute_log_probs(batch)
    finally:
        ray_trainer.close()

    for out in (tmp_path / "local", tmp_path / "ray"):
        assert is_adapter_dir(out) and base_of(out) == model_dir.resolve()
        names = {p.name for p in out.iterdir()}
        assert {ADAPTER_CONFIG, ADAPTER_WEIGHTS, "tokenizer.json"} <= names
        assert not names & {"model.safetensors", "config.json"}  # the adapter only, never the base
        config_json = json.loads((out / ADAPTER_CONFIG).read_text())
        assert (config_json["r"], config_json["lora_alpha"]) == (4, 8)
    local_adapter = load_file(tmp_path / "local" / ADAPTER_WEIGHTS)
    ray_adapter = load_file(tmp_path / "ray" / ADAPTER_WEIGHTS)
    assert local_adapter.keys() == ray_adapter.keys() and all("lora_" in k for k in local_adapter)
    assert any(v.abs().max() > 0 for k, v in ray_adapter.items() if "lora_B" in k)  # B starts at 0
    # Seeded (full_determinism): the 2-rank adapter equals the in-process one (measured: within 5e-7).
    assert max((local_adapter[k] - ray_adapter[k]).abs().max().item() for k in local_adapter) < 1e-5
    torch.testing.assert_close(ray_lp, local_lp, atol=1e-6, rtol=0)
    assert ray_metrics[0]["grad_norm"] == pytest.approx(local_metrics[0]["grad_norm"], abs=1e-5)

    # The artifact (adapter + base pointer) loads with PEFT and scores what the ranks score.
    model = load_causal_lm(tmp_path / "ray", dtype=torch.float32)
    with torch.no_grad():
        torch.testing.assert_close(response_log_probs(model, batch), trained, atol=1e-5, rtol=0)
