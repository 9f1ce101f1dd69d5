"""LightningRLConfig: every knob of the learning loop in one place."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lightningrl.rl.advantages import AdvantageConfig
from lightningrl.rl.continuous import ContinuousConfig
from lightningrl.rl.trackers import check_tracker_names
from lightningrl.trainer.config import TrainerConfig


@dataclass
class LightningRLConfig:
    resource_name: str = "llm"
    """The LLM resource being trained; its current version's `checkpoint` is where training starts."""
    steps: int = 20
    """RL steps per run (each: enqueue, wait, credit, one update, publish)."""
    tasks_per_step: int = 8
    """Train tasks drawn per step (shuffled passes over the train set)."""
    rollouts_per_task: int = 8
    """n: rollouts per task, one GRPO group."""
    val_every: int = 5
    """Validate on the held-out tasks every k steps (and after the last); 0 disables."""
    validate_first: bool = True
    """Validate before the first step too (logged as step 0: the pre-RL baseline)."""
    val_rollouts_per_task: int = 1
    """Rollouts per held-out task at each validation."""
    val_mode: str = "val"
    """The rollout mode of validation (the proxy's sampling for it comes from the LLM resource)."""
    success_threshold: float = 1.0
    """A rollout whose primary reward is at least this counts as a success."""
    balance_by: str | None = None
    """A task tag (e.g. "op"): every step draws the same number of tasks of each of its values, so no
    slice of the task distribution dominates a batch (a one-sided batch drifts a tiny policy's
    marginal choice and can collapse a slice before its own signal is learned). `tasks_per_step` is
    rounded up to a multiple of the number of values (said once when the run starts)."""
    gamma: float = 1.0
    """Discount of the episode return over the calls of a rollout (credit assignment)."""
    return_to_judged_calls: bool = True
    """False: a call the agent judged with a step reward is valued by that judgement alone, not
    also by the episode return (see `lightningrl.credit.assign`)."""
    agent_names: frozenset[str] | None = None
    """Train only on LLM calls of these agents (multi-agent systems); None trains on all."""
    reward_name: str | None = None
    """Which reward is the training signal; None uses the primary reward."""
    advantage: AdvantageConfig = field(default_factory=AdvantageConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    continuous: ContinuousConfig = field(default_factory=ContinuousConfig)
    """How `run_continuous` polls, filters by freshness and baselines traffic it did not enqueue."""
    step_timeout: float = 900.0
    """Seconds to wait for one step's rollouts before giving up with a clear error."""
    output_dir: Path = Path("runs/lightningrl")
    """Where metrics.csv, reward_curve.png and checkpoints/ go (`fit` sets it to its output_dir)."""
    keep_checkpoints: int | None = 3
    """Keep the newest this many step checkpoints in output_dir/checkpoints/, and always the checkpoints
    of the resource's `approved` version and of the best validated step; the rest are deleted after each
    update (their versions can no longer be served, promoted or resumed from). The run says so once when
    it starts. None keeps every step's: a full checkpoint of SmolLM2-135M is ~0.5 GB, of a 1.5B model
    ~6 GB, every step. Before each save the free disk is checked (a clear error instead of a full disk)."""
    seed: int = 0
    """Seeds the order in which train tasks are drawn."""
    deterministic: bool = False
    """Same seed, same metrics: rollouts are named by step, position and task instead of at random,
    and `fit` publishes the LLM with `seed_calls` (each call's sampling seeded by its rollout id and
    request), its inference server generates one sequence at a time (batched float math shifts logits
    in the last bits, enough to change a seeded draw from the distribution's tail), and trains without
    the rollout-logprob correction. Batches already follow enqueue order, never finish order. Costs
    wall time: see the README's demo section."""
    reload_servers: bool = True
    """After each publish, make the LLM's endpoints serve the new checkpoint (with the proxy paused
    and drained around it): `lightningrl.serving.endpoint.sync_weights`."""
    engine: str = "auto"
    """The engine behind the LLM's endpoints, which decides how weights are synced: "ours"
    (POST /reload), "vllm" (reload_weights + prefix-cache reset), or "auto" (ask each endpoint)."""
    show_progress: bool = True
    """A progress bar on a terminal; one plain line per step when output is not a terminal."""
    async_rollouts: bool = False
    """Collect step k+1's rollouts while step k trains (one step off-policy; docs/scaling.md): they are
    sampled by the version step k trains from, servers reload between batches, and the trainer's
    rollout-logprob correction (`trainer.loss.rollout_is_threshold`) weighs them by the behaviour
    policy's recorded log-probs. Off: every step samples from the version it trains."""
    async_max_staleness: int = 1
    """Async rollouts: train only on rollouts sampled by a version at most this many publishes behind
    the one being trained; older ones (and ones whose version cannot be told) are dropped and counted
    (`async/stale_dropped`, `async/unversioned_dropped`). Each async batch is 1 behind (0 drops them)."""
    gate_stop: bool = False
    """After each step, ask the release gate's `stop_reason` (span coverage, retry debt, protected
    regressions of `latest`); when it names a reason the loop stops before the next step."""
    # ---- dynamic sampling ----
    dynamic_sampling: bool = True
    """Every update is informative (DAPO's dynamic sampling, `lightningrl.rl.batch_fill`): after a
    step's rollouts, the groups whose rewards all agree are replaced by fresh tasks' groups (same
    slice under `balance_by`) in extra rounds until the step has `tasks_per_step` informative groups.
    Synchronous runs only: with `async_rollouts` the groups are measured (`sample/`) but not refilled."""
    max_fill_rounds: int = 2
    """Dynamic sampling: at most this many extra rounds per step; then it trains on what there is."""
    hard_slice_factor: int = 2
    """A slice (a `balance_by` value, else the whole set) whose running success rate is below
    1/rollouts_per_task, and one of whose groups agreed on failure, gets groups this many times
    larger until the rate recovers (1 turns it off)."""
    trackers: tuple[str, ...] = ()
    """Experiment trackers that get every metrics row too: any of "tensorboard", "mlflow", "wandb", all
    local files under `output_dir` (`lightningrl.rl.trackers`; the `trackers` extra installs them)."""
    # ---- learning health ----
    rollback_on_regression: float | None = None
    """When a validation's held-out success falls more than this below the best validated so far, move
    the resource's `latest` back to that best version and train on from it (the trainer is rebuilt from
    its checkpoint; logged as `rollback/` columns and a console line). None never rolls back."""

    def __post_init__(self) -> None:
        for name in ("steps", "tasks_per_step", "rollouts_per_task", "val_rollouts_per_task"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        if self.engine not in ("auto", "ours", "vllm"):
            raise ValueError(f"engine must be one of ('auto', 'ours', 'vllm'), got {self.engine!r}")
        if self.async_max_staleness < 0:
            raise ValueError(f"async_max_staleness must be >= 0, got {self.async_max_staleness!r}")
        if self.async_rollouts and (self.deterministic or self.trainer.loss.rollout_is_threshold is None):
            raise ValueError(
                "async_rollouts trains on samples of an older version and needs the rollout-logprob "
                "correction: set trainer.loss.rollout_is_threshold and deterministic=False "
                "(deterministic runs train without it)"
            )
        if self.keep_checkpoints is not None and self.keep_checkpoints < 1:
            raise ValueError(f"keep_checkpoints must be >= 1 or None, got {self.keep_checkpoints!r}")
        if self.val_every < 0:
            raise ValueError(f"val_every must be >= 0, got {self.val_every!r}")
        if self.max_fill_rounds < 0:
            raise ValueError(f"max_fill_rounds must be >= 0, got {self.max_fill_rounds!r}")
        if self.hard_slice_factor < 1:
            raise ValueError(f"hard_slice_factor must be >= 1, got {self.hard_slice_factor!r}")
        if self.rollback_on_regression is not None and not 0 <= self.rollback_on_regression < 1:
            raise ValueError(
                f"rollback_on_regression must be in [0, 1) or None, got {self.rollback_on_regression!r}"
            )
        self.output_dir = Path(self.output_dir)
        self.trackers = check_tracker_names(self.trackers)

    def effective_trainer(self) -> TrainerConfig:
        """The trainer's config as the loop builds it: a deterministic run trains without the
        rollout-logprob correction, whose inputs carry the inference server's batch-dependent float
        noise (~1e-7)."""
        trainer = self.trainer
        if self.deterministic and trainer.loss.rollout_is_threshold is not None:
            loss = dataclasses.replace(trainer.loss, rollout_is_threshold=None)
            trainer = dataclasses.replace(trainer, loss=loss)
        return trainer

    def summary(self) -> dict[str, Any]:
        """What a version and its training plan record of the config (the settings a reviewer compares)."""
        return {
            "rollouts_per_task": self.rollouts_per_task,
            "tasks_per_step": self.tasks_per_step,
            "estimator": self.advantage.estimator,
            "lr": self.trainer.lr,
            "gamma": self.gamma,
            "seed": self.seed,
            "balance_by": self.balance_by,
            "fill_rounds": self.max_fill_rounds if self.dynamic_sampling else 0,
            "hard_slice_factor": self.hard_slice_factor,
        }
