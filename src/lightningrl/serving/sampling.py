"""SamplingParams and the batched sampler: greedy or temperature/top-p, one seeded generator per row."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SamplingParams:
    """How one sequence is sampled and when it stops."""

    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    seed: int | None = None
    logprobs: int | None = None  # None: no logprobs; k >= 0: the sampled token's plus the top k


def row_generator(seed: int | None, index: int) -> torch.Generator:
    """A CPU generator for choice `index` of a request: derived from `seed`, or random without one."""
    if seed is None:
        derived = secrets.randbits(63)
    else:
        digest = hashlib.sha256(f"{seed}:{index}".encode()).digest()
        derived = int.from_bytes(digest[:8], "little") >> 1
    return torch.Generator(device="cpu").manual_seed(derived)


@dataclass(frozen=True)
class SampledStep:
    """One decoding step for a batch: chosen tokens (as a list and a [batch] tensor), their raw
    logprobs, and top-k alternatives."""

    token_tensor: torch.Tensor
    tokens: list[int]
    logprobs: list[float]
    top_ids: list[list[int]]
    top_logprobs: list[list[float]]


def sample_step(
    logits: torch.Tensor, params: list[SamplingParams], generators: list[torch.Generator], top_k: int
) -> SampledStep:
    """Pick the next token of every row of `logits` [batch, vocab] under that row's parameters.

    Logprobs are the model's raw log-softmax (temperature 1, before top-p) of the chosen tokens.
    """
    logits = logits.float()
    batch, vocab = logits.shape
    device = logits.device
    greedy = logits.argmax(dim=-1)
    if all(p.temperature == 0 for p in params):
        tokens = greedy
    else:
        temperatures = torch.tensor([p.temperature for p in params], device=device)
        # One uniform draw per sampled row from the row's own generator: a row's samples do not depend
        # on its batch (a greedy row's generator serves no one else, so it need not draw).
        draws = [
            torch.rand(1, generator=g) if p.temperature != 0 else torch.zeros(1)
            for p, g in zip(params, generators, strict=True)
        ]
        uniforms = torch.cat(draws).to(device)
        probs = torch.softmax(logits / temperatures.clamp(min=1e-5)[:, None], dim=-1)
        if all(p.top_p >= 1.0 for p in params):
            # No nucleus to cut: invert the CDF in vocabulary order (no sort, the costliest step).
            ids, kept = None, probs
        else:
            top_ps = torch.tensor([p.top_p for p in params], device=device)
            kept, ids = probs.sort(dim=-1, descending=True, stable=True)
            outside_top_p = (kept.cumsum(dim=-1) - kept) >= top_ps[:, None]
            kept = kept.masked_fill(outside_top_p, 0.0)
        cdf = kept.cumsum(dim=-1)
        cdf = cdf / cdf[:, -1:]
        # right=True: the first entry whose CDF exceeds the draw, so a zero-probability token is never picked.
        position = torch.searchsorted(cdf, uniforms[:, None], right=True).clamp(max=vocab - 1)
        sampled = (ids.gather(1, position) if ids is not None else position).squeeze(1)
        tokens = torch.where(temperatures == 0, greedy, sampled)

    raw = torch.log_softmax(logits, dim=-1)
    chosen = raw.gather(1, tokens[:, None]).squeeze(1)
    if top_k > 0:
        top_values, top_indices = raw.topk(min(top_k, vocab), dim=-1)
        top_ids, top_logprobs = top_indices.tolist(), top_values.tolist()
    else:
        top_ids, top_logprobs = [[] for _ in range(batch)], [[] for _ in range(batch)]
    return SampledStep(tokens, tokens.tolist(), chosen.tolist(), top_ids, top_logprobs)
