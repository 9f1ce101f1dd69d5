"""One RL step on one screen: training sequences -> batch -> advantages -> log-probs -> loss -> optimiser step.

What comes before (rollouts' spans -> `TrainingSequence`s) is credit assignment (`credit/`); what comes
after (checkpoint, publish a version, reload the servers) is the loop's (`rl/loop.py`). The actor update
runs in verl (`trainer/verl_actor.py`: micro-batches, shared prompt prefixes, FSDP, Ray at scale); its
maths is the bare-torch `trainer/reference.py`, written out in the comments of steps 3-5 below.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Console

from lightningrl.credit import TrainingSequence, collate
from lightningrl.credit.batch import SequenceBatch, batchable
from lightningrl.rl.advantages import AdvantageConfig, AdvantageResult, compute_advantages
from lightningrl.rl.metrics import dropped_sequences_row
from lightningrl.rl.update_thread import run_update
from lightningrl.trainer.protocol import Trainer


async def rl_step(
    step: int,
    sequences: Sequence[TrainingSequence],
    trainer: Trainer,
    advantage: AdvantageConfig,
    *,
    pad_token_id: int,
    console: Console,
    advantages: Callable[[SequenceBatch], AdvantageResult] | None = None,
) -> dict[str, Any]:
    """Update the policy once on `sequences`: the step's `update/` and `actor/` metrics, with
    `update/skipped` (and its reason) when nothing could train. `advantages` replaces
    `compute_advantages(batch, advantage)` (SFT's all-ones, say)."""
    # 1. Sequences -> one batch. A sequence sampled at another temperature than most cannot be scored
    #    beside them: dropped and counted.
    if not sequences:
        return {"update/skipped": 1, "update/reason": "no sequences"}
    sequences, dropped = batchable(sequences)
    row: dict[str, Any] = dropped_sequences_row(sequences, dropped)
    if not sequences:
        return {"update/skipped": 1, "update/reason": "no batchable sequences", **row}
    batch = collate(sequences, pad_token_id=pad_token_id)  # prompts (B, P) left-padded, responses (B, R)

    # 2. Advantages (B, R): each call's reward minus its group's mean, over the group's std (GRPO; the
    #    group: the calls of the same task's rollouts in the same role, i.e. agent and kind of decision),
    #    on every token of its response. A group whose rewards all agree carries no signal: `keep` (B,)
    #    is False for its rows.
    adv = advantages(batch) if advantages else compute_advantages(batch, advantage)
    row |= {
        "update/sequences": len(batch),
        "update/groups": adv.groups,
        "update/dropped_groups": adv.dropped_groups,
    }
    if not bool(adv.keep.any()):
        return {**row, "update/skipped": 1, "update/reason": "every group had equal rewards"}
    kept, kept_advantages = batch.select(adv.keep), adv.advantages[adv.keep]  # (K, ...), K <= B

    # 3-5. The actor update, on a thread Ctrl-C cannot interrupt (rl/update_thread.py). verl does, per
    #    micro-batch of whole prompt groups, what trainer/reference.py writes out:
    #      log_probs = log_softmax(logits / temperature)[each response token]                (K, R)
    #      old = log_probs.detach()  (on-policy: one epoch, one mini-batch, so the PPO ratio is 1)
    #      w = min(exp(old - rollout_log_probs), 2)   truncated importance weight (TIS), (K, R)
    #      ratio = exp(log_probs - old)                                                     (K, R)
    #      loss = token_mean(w * max(-A * ratio, -A * clip(ratio, 0.8, 1.2)))   A = kept_advantages
    #      loss.backward(); clip_grad_norm_(1.0); AdamW.step()                 (lr from TrainerConfig)
    stats = await run_update(lambda: trainer.train_step(kept, kept_advantages), step=step, console=console)
    row |= {f"tokens/{k}" if k.startswith("mismatch_") else f"actor/{k}": v for k, v in stats.items()}
    return row
