"""The verl configs of one actor: what `ActorRolloutRefWorker.init_model` would build from ours."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lightningrl.models.adapter import base_of, is_adapter_dir
from lightningrl.trainer.config import TrainerConfig
from lightningrl.trainer.loss import actor_loss_fields


def verl_configs(model_dir: Path, cfg: TrainerConfig, device: str) -> tuple[Any, Any]:
    """(FSDPActorConfig, TrainingWorkerConfig) for training the checkpoint at `model_dir`.

    `model_dir` may be a LoRA adapter directory: the engine then loads its base and continues the
    adapter (`lora_rank` must be set, as it is for the run that wrote it).
    """
    from verl.workers.config import (
        FSDPActorConfig,
        FSDPEngineConfig,
        FSDPOptimizerConfig,
        HFModelConfig,
        TrainingWorkerConfig,
    )

    adapter = is_adapter_dir(model_dir)
    if adapter and cfg.lora_rank == 0:
        raise ValueError(
            f"checkpoint {str(model_dir)!r} is a LoRA adapter: set trainer.lora_rank > 0 to continue it"
        )
    param_dtype = actor_dtype(cfg, device)
    lora: dict[str, Any] = {}
    if cfg.lora_rank > 0:
        lora = {
            "lora_rank": cfg.lora_rank,
            "lora_alpha": cfg.lora_alpha,
            "target_modules": cfg.lora_targets,
            "lora_adapter_path": str(model_dir) if adapter else None,
        }
    model = HFModelConfig(
        path=str(base_of(model_dir)),
        override_config={"attn_implementation": cfg.attn_implementation},
        # Packed (padding-free) batches need flash-attn varlen kernels; sdpa needs the padded path.
        use_remove_padding=False,
        enable_gradient_checkpointing=cfg.gradient_checkpointing,
        **lora,
    )
    engine = FSDPEngineConfig(
        strategy=cfg.strategy,
        model_dtype="fp32",
        mixed_precision={"param_dtype": param_dtype, "reduce_dtype": "fp32", "buffer_dtype": "fp32"},
        use_torch_compile=cfg.use_torch_compile,
        use_dynamic_bsz=False,
        micro_batch_size_per_gpu=cfg.micro_batch_size,
        infer_micro_batch_size_per_gpu=cfg.micro_batch_size,
        use_remove_padding=False,
        seed=cfg.seed,
        full_determinism=cfg.full_determinism,
    )
    optim = FSDPOptimizerConfig(
        lr=cfg.lr,
        betas=cfg.betas,
        weight_decay=cfg.weight_decay,
        clip_grad=cfg.grad_clip,
        total_training_steps=cfg.total_training_steps,
        optimizer=cfg.optimizer,
        lr_scheduler_type=cfg.lr_schedule,
        min_lr_ratio=cfg.min_lr_ratio,
        lr_warmup_steps=cfg.lr_warmup_steps,
        override_optimizer_config=cfg.optimizer_kwargs,
    )
    actor = FSDPActorConfig(
        strategy=cfg.strategy,
        rollout_n=1,
        # Only validated here: the mini-batch size travels with each batch (see train_step).
        ppo_mini_batch_size=cfg.mini_batch_size or cfg.micro_batch_size,
        ppo_micro_batch_size_per_gpu=cfg.micro_batch_size,
        ppo_epochs=cfg.ppo_epochs,
        shuffle=cfg.shuffle,
        data_loader_seed=cfg.seed,
        use_torch_compile=cfg.use_torch_compile,
        fsdp_config=engine,
        optim=optim,
        model_config=model,
        **actor_loss_fields(cfg.loss),
    )
    worker = TrainingWorkerConfig(
        model_type="language_model",
        model_config=model,
        engine_config=actor.engine,
        optimizer_config=optim,
        checkpoint_config=actor.checkpoint,
    )
    return actor, worker


FAST_CPU_HALF = ("AVX512", "AVX512_BF16", "AMX")
"""torch CPU capabilities with bf16 matmul kernels; below them (AVX2) torch multiplies bf16 matrices in a
reference kernel on one thread: ~70x fp32's time on a 2-core AVX2 EPYC (2048x576 @ 576x1536)."""


def slow_half_precision(dtype: str, device: str) -> str | None:
    """Why `dtype` would be slow on this CPU, or None (fp32, a GPU, or a CPU with bf16 kernels)."""
    import torch

    if device != "cpu" or dtype == "fp32":
        return None
    capability = torch.backends.cpu.get_cpu_capability()
    if capability.startswith(FAST_CPU_HALF):
        return None
    return (
        f"param_dtype={dtype!r} on a CPU with {capability} only: torch multiplies {dtype} matrices in a "
        "single-threaded reference kernel here, tens of times slower than fp32; set param_dtype='fp32' "
        "(or leave it unset)"
    )


def actor_dtype(cfg: TrainerConfig, device: str) -> str:
    """The actor's parameter dtype: the config's, else fp32 on the CPU (bf16 costs accuracy there), bf16 on GPUs."""
    return cfg.param_dtype or ("fp32" if device == "cpu" else "bf16")
