"""TrainerConfig: optimiser, batching and numerics of an actor trainer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lightningrl.trainer.loss import PolicyLossConfig

BACKENDS = ("local", "ray")


@dataclass(frozen=True)
class TrainerConfig:
    """One policy update per `train_step`: `ppo_epochs` passes over mini-batches of the given rows."""

    lr: float = 1e-5
    """Adam's step size. 1e-5 is the full fine-tune rate at which a bare GRPO loop teaches SmolLM2-135M
    a task in 10 steps of 4 x 8 (bench/bare_grpo.py); 1e-6, the old default, barely moved it. A LoRA
    adapter (`lora_rank` > 0) usually wants ~10x more."""
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    grad_clip: float = 1.0
    optimizer: str = "AdamW"
    """A torch.optim class name, built by verl (e.g. "SGD": no per-parameter rescaling, so weights the
    reward says nothing about stay put — Adam moves every weight by ~lr per step on noisy RL gradients)."""
    optimizer_kwargs: dict[str, Any] | None = None
    """Extra optimizer arguments (e.g. {"eps": 1e-5} or {"momentum": 0.9})."""
    mini_batch_size: int | None = None
    """Rows per optimiser step (global across ranks); None makes the whole batch one mini-batch."""
    micro_batch_size: int = 8
    """Rows per forward/backward (gradient accumulation inside a mini-batch)."""
    ppo_epochs: int = 1
    recompute_old_log_probs: bool = False
    """Score the batch in a separate pass before an on-policy update (one epoch, one mini-batch), as
    verl's trainer does. Off: the update's own forward gives the old log-probs (the PPO ratio is 1
    there, so the step is the same) and the entropy and mismatch it measured — one forward saved."""
    shared_prefix: bool = True
    """Compute each prompt once per micro-batch and score only response positions (its keys/values
    reused by every row that shares it: a GRPO group's rows); the same gradient as the full forward.
    False: verl's forward over every row's whole sequence."""
    shuffle: bool = False
    seed: int = 42
    loss: PolicyLossConfig = field(default_factory=PolicyLossConfig)
    strategy: str = "fsdp2"
    param_dtype: str | None = None
    """Mixed-precision parameter dtype; None picks fp32 on the CPU (bf16 costs accuracy there), bf16 on GPUs."""
    attn_implementation: str = "sdpa"
    gradient_checkpointing: bool = False
    use_torch_compile: bool = False
    lr_schedule: str = "constant"
    """verl's scheduler: "constant" or "cosine" (decays to `min_lr_ratio` x lr over total_training_steps)."""
    min_lr_ratio: float = 0.0
    lr_warmup_steps: int = 0
    """Optimiser steps over which the rate rises linearly from 0 to `lr` (verl's warm-up: the first
    step's rate is 0, so Adam's moment estimates see one batch before anything moves). 0: none."""
    total_training_steps: int = 1_000_000
    """Horizon of verl's LR scheduler (constant by default, so only its warm-up reads it)."""
    backend: str = "local"
    """Where the actor ranks run: "local" (verl's worker in this process, one rank) or "ray" (verl's
    RayWorkerGroup: `num_workers` ranks sharding the model with FSDP2; attaches to the cluster at
    RAY_ADDRESS when set, else starts a local Ray)."""
    num_workers: int = 1
    """Actor ranks (data-parallel, FSDP2-sharded) of the "ray" backend: one GPU each, or one logical GPU
    on a machine without any."""
    lora_rank: int = 0
    """LoRA rank (PEFT, through verl); 0 trains every weight. Above 0 only the adapter trains, and a
    checkpoint is the adapter directory, pointing at the base checkpoint it applies to."""
    lora_alpha: int = 16
    """LoRA scaling numerator (the adapter's update is scaled by lora_alpha / lora_rank)."""
    lora_target_modules: str = "all-linear"
    """Modules that get an adapter: "all-linear" or comma-separated names ("q_proj,v_proj")."""
    full_determinism: bool = False
    """Seed every rank and ask torch for deterministic kernels (verl's `full_determinism`); without it
    a LoRA adapter's initial weights differ from run to run."""

    def __post_init__(self) -> None:
        if self.lr <= 0:
            raise ValueError(f"lr must be positive, got {self.lr!r}")
        if self.micro_batch_size < 1 or self.ppo_epochs < 1:
            raise ValueError(
                f"micro_batch_size and ppo_epochs must be >= 1, got {self.micro_batch_size}, {self.ppo_epochs}"
            )
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {self.num_workers!r}")
        if self.num_workers > 1 and self.backend != "ray":
            raise ValueError(
                f"num_workers={self.num_workers} needs backend='ray' (the local backend runs one rank)"
            )
        if self.lr_warmup_steps < 0:
            raise ValueError(f"lr_warmup_steps must be >= 0, got {self.lr_warmup_steps!r}")
        if self.lora_rank < 0 or self.lora_alpha < 1:
            raise ValueError(
                f"lora_rank must be >= 0 and lora_alpha >= 1, got {self.lora_rank!r}, {self.lora_alpha!r}"
            )

    @property
    def lora_targets(self) -> str | list[str]:
        """`lora_target_modules` as PEFT takes it: "all-linear" or a list of module names."""
        if self.lora_target_modules == "all-linear":
            return "all-linear"
        return [name.strip() for name in self.lora_target_modules.split(",") if name.strip()]
