"""The bare-torch actor step: the same loss as the verl trainer (verl's core_algos), on a plain HF model.

It exists to check the verl path (parity test) and to read as the spec of one PPO-clip step.
"""

from __future__ import annotations

import torch

from lightningrl.credit.batch import SequenceBatch
from lightningrl.trainer.config import TrainerConfig
from lightningrl.trainer.loss import policy_loss, truncated_is_weights


def reference_optimizer(model: torch.nn.Module, config: TrainerConfig) -> torch.optim.Optimizer:
    """AdamW with the trainer's hyper-parameters (verl's FSDP engine builds the same)."""
    return torch.optim.AdamW(
        model.parameters(), lr=config.lr, betas=config.betas, weight_decay=config.weight_decay
    )


def response_log_probs(model: torch.nn.Module, batch: SequenceBatch) -> torch.Tensor:
    """log p(response token | everything before it) at the batch's sampling temperature, (B, R); 0 on padding."""
    from verl.utils.torch_functional import logprobs_from_logits

    prompt_len = batch.prompts.shape[1]
    logits = model(
        input_ids=batch.input_ids, attention_mask=batch.attention_mask, position_ids=batch.position_ids
    ).logits
    # Position t predicts token t + 1: the response's logits start one before it.
    logits = logits[:, prompt_len - 1 : -1].float() / batch.temperature  # (B, R, V)
    log_probs = logprobs_from_logits(logits, batch.responses)  # (B, R)
    return log_probs * batch.attention_mask[:, prompt_len:]


def torch_reference_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: SequenceBatch,
    advantages: torch.Tensor,
    config: TrainerConfig,
) -> dict[str, float]:
    """One PPO-clip step over the whole batch as one mini-batch; returns loss and pre-clip grad norm."""
    if config.loss.entropy_coeff != 0.0 or config.loss.kl_loss_coef != 0.0:
        raise ValueError(
            "the bare step has neither entropy bonus nor KL loss, got "
            f"entropy_coeff={config.loss.entropy_coeff}, kl_loss_coef={config.loss.kl_loss_coef}"
        )
    mask = batch.response_mask
    model.train()
    with torch.no_grad():
        old_log_probs = response_log_probs(model, batch)
    weights = None
    if config.loss.rollout_is_threshold is not None:
        weights, _ = truncated_is_weights(
            old_log_probs, batch.rollout_log_probs, mask, config.loss.rollout_is_threshold
        )

    log_probs = response_log_probs(model, batch)
    loss, metrics = policy_loss(
        log_probs,
        old_log_probs,
        advantages,
        mask,
        config.loss,
        rollout_is_weights=weights,
        global_batch_size=len(batch),
        batch_num_tokens=int(mask.sum().item()),
    )
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
    optimizer.step()
    return {"loss": float(loss.item()), "grad_norm": float(grad_norm.item()), **metrics}
