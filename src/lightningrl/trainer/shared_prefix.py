"""Shared-prefix forward: each prompt of a micro-batch computed once, its keys/values reused by every row.

A GRPO group's rows share their prompt (the first call's system prompt, tool header and question:
~430 of ~470 tokens for the calculator agents), and only the response tokens are scored. verl's
engine runs every row's full sequence and the vocabulary head at every position. Here, per prompt:

    prefix = prompt[:-1]                       (1, P-1)   forward with gradients, its KV cache kept
    suffix = [prompt[-1]] + response_i         (k, S)     forward on the cache, repeated k times
    logits of suffix positions 0..S-2          (k, S-1, V) -> log-prob of response token j at j

The cache's tensors are outputs of the prefix forward, so the backward through every suffix reaches
the prefix once, summed: the gradient is the full forward's (`test_shared_prefix.py` compares them).
The log-probs go back to verl in its own layout (a jagged tensor over each row's whole sequence,
zero at prompt positions), so verl's loss, backward and optimiser step run unchanged.

It replaces the engine's `forward_step` on the batches that ask for it (meta `SHARED_PREFIX`).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch

SHARED_PREFIX = "lightningrl_shared_prefix"


def prompt_groups(prompts: list[list[int]]) -> list[list[int]]:
    """Row indexes grouped by identical prompt, in order of first appearance."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for row, prompt in enumerate(prompts):
        groups.setdefault(tuple(prompt), []).append(row)
    return list(groups.values())


def prompt_order(prompts: torch.Tensor, attention_mask: torch.Tensor) -> list[int]:
    """Row indexes with each prompt's rows together (so a micro-batch shares its prompts), longest
    response first within a prompt."""
    width = prompts.shape[1]
    keys = [
        tuple(row[keep].tolist()) for row, keep in zip(prompts, attention_mask[:, :width].bool(), strict=True)
    ]
    first = {key: keys.index(key) for key in keys}
    lengths = attention_mask.sum(dim=1).tolist()
    return sorted(range(len(keys)), key=lambda i: (first[keys[i]], -lengths[i]))


def _rows(micro_batch: Any) -> tuple[list[list[int]], list[list[int]]]:
    """Each row's real prompt and response ids (left-padded prompts, right-padded responses)."""
    prompts, responses, mask = micro_batch["prompts"], micro_batch["responses"], micro_batch["attention_mask"]
    width = prompts.shape[1]
    prompt_mask, response_mask = mask[:, :width].bool(), mask[:, width:].bool()
    return (
        [row[keep].tolist() for row, keep in zip(prompts, prompt_mask, strict=True)],
        [row[keep].tolist() for row, keep in zip(responses, response_mask, strict=True)],
    )


@dataclass
class PackedRow:
    """One forward row: a prompt once, then each of its responses, each seeing the prompt and itself."""

    prompt_len: int
    tokens: list[int] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    segment: list[int] = field(default_factory=list)
    """-1 for the prompt, i for response i (an index into the micro-batch's rows)."""
    targets: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Row -> (index in `tokens` of its response's first token, the response's length)."""


def pack(prompt: list[int], rows: list[int], responses: list[list[int]]) -> PackedRow:
    """`prompt` then every response of `rows`; a response's position ids continue the prompt's."""
    packed = PackedRow(len(prompt), list(prompt), list(range(len(prompt))), [-1] * len(prompt))
    for row in rows:
        response = responses[row]
        packed.targets[row] = (len(packed.tokens), len(response))
        packed.tokens += response
        packed.positions += list(range(len(prompt), len(prompt) + len(response)))
        packed.segment += [row] * len(response)
    return packed


def tree_mask(rows: list[PackedRow], width: int) -> torch.Tensor:
    """(G, 1, width, width) bool, True = may attend: causal, and a response token sees the prompt and
    its own response only. Padding positions see themselves (no empty row: sdpa would give NaN)."""
    mask = torch.zeros((len(rows), 1, width, width), dtype=torch.bool)
    for g, row in enumerate(rows):
        segment = torch.tensor(row.segment)
        n = len(segment)
        causal = torch.ones((n, n), dtype=torch.bool).tril()
        same = (segment[:, None] == segment[None, :]) | (segment[None, :] == -1)
        mask[g, 0, :n, :n] = causal & same
        idle = torch.arange(n, width)
        mask[g, 0, idle, idle] = True
    return mask


def packed_scores(
    module: torch.nn.Module,
    prompts: list[list[int]],
    responses: list[list[int]],
    temperature: float,
    entropy: bool,
) -> tuple[list[torch.Tensor], list[torch.Tensor] | None]:
    """Log-probs (and entropies) of each row's response tokens, with gradients, from ONE forward of the
    micro-batch packed by prompt (`pack`, `tree_mask`)."""
    device = next(module.parameters()).device
    packed = [pack(prompts[group[0]], group, responses) for group in prompt_groups(prompts)]
    width = max(len(p.tokens) for p in packed)
    tokens = torch.zeros((len(packed), width), dtype=torch.long)
    positions = torch.zeros_like(tokens)
    for g, p in enumerate(packed):
        tokens[g, : len(p.tokens)] = torch.tensor(p.tokens)
        positions[g, : len(p.positions)] = torch.tensor(p.positions)
    # The vocabulary head only where a response token is predicted: from the shortest prompt's last
    # position on (a response's token 0 is predicted by its prompt's last position, token j by j - 1).
    keep_from = min(p.prompt_len for p in packed) - 1
    logits_all = module(
        input_ids=tokens.to(device),
        position_ids=positions.to(device),
        attention_mask=tree_mask(packed, width).to(device),
        use_cache=False,
        logits_to_keep=torch.arange(keep_from, width, device=device),
    ).logits  # (G, width - keep_from, V)
    picked: list[torch.Tensor] = []
    labels: list[torch.Tensor] = []
    sizes: list[int] = []
    order: list[int] = []
    for g, p in enumerate(packed):
        for row, (start, length) in p.targets.items():
            if not length:
                continue  # an empty response: nothing to score (its row stays empty)
            predictors = torch.tensor([p.prompt_len - 1, *range(start, start + length - 1)]) - keep_from
            picked.append(logits_all[g, predictors.to(device)])
            labels.append(tokens[g, start : start + length])
            sizes.append(length)
            order.append(row)
    logits = torch.cat(picked)
    if temperature != 1.0:
        logits = logits / temperature
    log_p = torch.log_softmax(logits.float(), dim=-1)
    token_log_p = log_p.gather(-1, torch.cat(labels).to(device)[:, None]).squeeze(-1)
    by_row_lp: list[torch.Tensor] = [torch.empty(0)] * len(prompts)
    by_row_h: list[torch.Tensor] = [torch.empty(0)] * len(prompts)
    spread = -(log_p.exp() * log_p).sum(-1) if entropy else None
    offset = 0
    for row, size in zip(order, sizes, strict=True):
        by_row_lp[row] = token_log_p[offset : offset + size]
        if spread is not None:
            by_row_h[row] = spread[offset : offset + size]
        offset += size
    return by_row_lp, (by_row_h if entropy else None)


def packed_response_log_probs(module: torch.nn.Module, batch: Any, rows_per_forward: int) -> torch.Tensor:
    """log p(response token | prompt and response before it) of a `SequenceBatch`, (B, R), 0 on padding:
    `packed_scores` over forwards of at most `rows_per_forward` rows, rows of one prompt together."""
    prompts, responses = _rows(
        {"prompts": batch.prompts, "responses": batch.responses, "attention_mask": batch.attention_mask}
    )
    order = prompt_order(batch.prompts, batch.attention_mask)
    out = torch.zeros(batch.responses.shape, dtype=torch.float32)
    for begin in range(0, len(order), rows_per_forward):
        rows = order[begin : begin + rows_per_forward]
        scored, _ = packed_scores(
            module, [prompts[i] for i in rows], [responses[i] for i in rows], batch.temperature, False
        )
        for row, values in zip(rows, scored, strict=True):
            out[row, : len(values)] = values.float().cpu()
    return out


def _full_length(values: list[torch.Tensor], prompt_lengths: list[int]) -> torch.Tensor:
    """verl's layout: one jagged row per sequence over prompt + response, a response token's value at
    position prompt_len - 1 + j (zero elsewhere)."""
    rows = []
    for value, prompt_len in zip(values, prompt_lengths, strict=True):
        rows.append(torch.cat([value.new_zeros(prompt_len - 1), value, value.new_zeros(1)]))
    lengths = torch.tensor([len(r) for r in rows])
    offsets = torch.cat([lengths.new_zeros(1), lengths.cumsum(0)]).to(rows[0].device)
    return torch.nested.nested_tensor_from_jagged(torch.cat(rows), offsets)


def shared_prefix_forward_step(
    engine: Any, original: Callable[..., Any], micro_batch: Any, loss_function: Any, forward_only: bool
) -> tuple[torch.Tensor, dict[str, Any]]:
    """The engine's `forward_step` (model outputs, then the loss) by shared prefixes; the engine's own
    on batches without the `SHARED_PREFIX` meta."""
    from verl.utils import tensordict_utils as tu
    from verl.utils.device import get_device_id, get_device_name
    from verl.workers.engine.utils import detach_tree  # type: ignore[attr-defined]

    if not tu.get_non_tensor_data(data=micro_batch, key=SHARED_PREFIX, default=False):
        return original(micro_batch, loss_function=loss_function, forward_only=forward_only)
    micro_batch = micro_batch.to(get_device_id())
    temperature = float(micro_batch["temperature"])
    entropy = bool(tu.get_non_tensor_data(data=micro_batch, key="calculate_entropy", default=False))
    prompts, responses = _rows(micro_batch)
    autocast_dtype = getattr(engine, "_autocast_dtype", torch.float32)
    autocast = (
        nullcontext()
        if autocast_dtype == torch.float32
        else torch.autocast(device_type=get_device_name(), dtype=autocast_dtype)
    )
    with autocast:
        log_probs, entropies = packed_scores(engine.module, prompts, responses, temperature, entropy)
    lengths = [len(p) for p in prompts]
    model_output = {"log_probs": _full_length(log_probs, lengths)}  # type: ignore[arg-type]
    if entropy:
        model_output["entropy"] = _full_length(entropies, lengths)  # type: ignore[arg-type]
    if loss_function is not None:
        loss, metrics = loss_function(
            model_output=model_output, data=micro_batch, dp_group=engine.get_data_parallel_group()
        )
    else:
        loss, metrics = torch.tensor(1.0, device=get_device_name()), {}
    return loss, {"model_output": detach_tree(model_output), "loss": loss.detach().item(), "metrics": metrics}


def install(engine: Any) -> None:
    """Route the engine's `forward_step` through `shared_prefix_forward_step` (idempotent)."""
    if getattr(engine, "_lightningrl_shared_prefix", False):
        return
    original = engine.forward_step

    def forward_step(micro_batch: Any, loss_function: Any, forward_only: bool) -> Any:
        return shared_prefix_forward_step(engine, original, micro_batch, loss_function, forward_only)

    engine.forward_step = forward_step
    engine._lightningrl_shared_prefix = True
