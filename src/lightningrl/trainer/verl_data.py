"""A SequenceBatch in the form verl's TrainingWorker takes: a no-padding TensorDict plus meta fields."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict

from lightningrl.credit.batch import SequenceBatch
from lightningrl.quiet import quiet_third_party


def to_verl_input(batch: SequenceBatch, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> TensorDict:
    """Padded batch -> the nested (no-padding) TensorDict `RayPPOTrainer` hands its actor worker."""
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.padding import left_right_2_no_padding

    padded = TensorDict(
        {
            "prompts": batch.prompts,
            "responses": batch.responses,
            "input_ids": batch.input_ids,
            "attention_mask": batch.attention_mask,
            "position_ids": batch.position_ids,
            "response_mask": batch.response_mask,
            **tensors,
        },
        batch_size=[len(batch)],
    )
    with quiet_third_party():  # torch.fx logs a warning the first time a nested tensor is built
        data = left_right_2_no_padding(padded)
    tu.assign_non_tensor(data, **meta)
    return data


def response_values(output: TensorDict, key: str, data: TensorDict) -> torch.Tensor:
    """A per-token model output of verl's worker, back in the padded (B, R) response layout."""
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.padding import no_padding_2_padding

    return no_padding_2_padding(tu.get(output, key), data).float()


def mean_metric(metrics: dict[str, Any], key: str) -> float | None:
    """The mean of a verl metric that arrives as a scalar or as a list per micro-/mini-batch."""
    value = metrics.get(key)
    if value is None:
        return None
    if isinstance(value, list | tuple):
        return float(sum(float(v) for v in value) / len(value)) if value else None
    return float(value)
