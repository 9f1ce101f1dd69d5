"""Engine: decodes batches of jobs with a KV cache, left padding, per-row sampling and continuous admission."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from lightningrl.serving.job import Failed, Job, Started
from lightningrl.serving.kv_cache import GrowingCache, stack_layers
from lightningrl.serving.lean import LeanDecoder, lean_decoder
from lightningrl.serving.model import LoadedModel
from lightningrl.serving.prefix_cache import PrefixCache
from lightningrl.serving.sampling import row_generator, sample_step
from lightningrl.serving.sequence import Sequence

logger = logging.getLogger(__name__)


Admit = Callable[[int], list[Job]]
"""Called between decode steps with the free rows; returns queued jobs that fit (possibly none)."""


@dataclass
class _Batch:
    """The rows being decoded and their model state: the KV cache, the attention mask over it, each
    row's last position, the tokens to feed next, and whether any row has padding in the cache."""

    rows: list[tuple[Job, Sequence]]
    cache: Any
    mask: torch.Tensor
    positions: torch.Tensor
    next_tokens: torch.Tensor
    padded: bool = True

    def decode_mask(self, ready_4d: bool) -> torch.Tensor | None:
        """The attention mask of a one-token step: none without padding (attention needs none then),
        else a ready 4-D boolean mask where the model takes one, else the 2-D one."""
        if not self.padded:
            return None
        return self.mask.bool()[:, None, None, :] if ready_4d else self.mask


class Engine:
    """Generates for a batch of jobs on the current model; `model` may be swapped between batches.

    Continuous batching: between decode steps, jobs that arrived meanwhile are prefilled and join the
    running batch (their cache left-padded to its length), so a request never waits for a whole
    batch to end. A batch admits nothing once the model has been swapped. A prompt prefix that a
    batch's prompts share is prefilled once per model and reused (`prefix_cache`; off: every prompt
    runs whole)."""

    def __init__(self, model: LoadedModel, prefix_cache: bool = True) -> None:
        """Serve `model` until it is replaced."""
        self.model = model
        self._lean: tuple[LoadedModel, LeanDecoder | None] | None = None
        self.prefix_cache = PrefixCache() if prefix_cache else None

    def _lean_for(self, model: LoadedModel) -> LeanDecoder | None:
        """The lean decoder of `model` (built once per model), or None if it decodes through transformers."""
        if self._lean is None or self._lean[0] is not model:
            self._lean = (model, lean_decoder(model.model))
        return self._lean[1]

    def run(self, jobs: list[Job], admit: Admit | None = None, max_rows: int | None = None) -> None:
        """Generate every choice of `jobs` and of what `admit` adds while at most `max_rows` sequences
        decode together (blocking; called on the generation thread)."""
        model = self.model  # a reload mid-batch does not affect this batch
        rows = self._rows(model, jobs)
        if not rows:
            return
        try:
            with torch.inference_mode():
                self._decode(model, rows, admit, max_rows or len(rows))
        except Exception as error:  # a model failure fails this batch's requests, not the server
            logger.exception("generation failed for a batch of %d sequences", len(rows))
            for job in {id(job): job for job, _ in rows}.values():
                job.emit(Failed(f"generation failed: {type(error).__name__}: {error}"))

    def _rows(self, model: LoadedModel, jobs: list[Job]) -> list[tuple[Job, Sequence]]:
        """One row per choice of each job's prompts; a job that cannot be tokenized fails alone."""
        rows: list[tuple[Job, Sequence]] = []
        for job in jobs:
            if job.cancelled:
                continue
            try:
                prompts = job.prompts_for(model)
                _check_prompts(prompts, job.params.max_tokens, model)
            except ValueError as error:
                job.emit(Failed(str(error), status=400))
                continue
            except Exception as error:  # e.g. a new tokenizer without a chat template
                job.emit(
                    Failed(f"could not tokenize the prompt: {type(error).__name__}: {error}", status=400)
                )
                continue
            job.emit(Started(prompts, model))
            for prompt_index, prompt in enumerate(prompts):
                for choice in range(job.n):
                    index = prompt_index * job.n + choice
                    sequence = Sequence(
                        index=index,
                        prompt_ids=prompt,
                        params=job.params,
                        generator=row_generator(job.params.seed, index),
                        eos_ids=model.eos_ids,
                    )
                    rows.append((job, sequence))
        return rows

    def _decode(
        self, model: LoadedModel, rows: list[tuple[Job, Sequence]], admit: Admit | None, max_rows: int
    ) -> None:
        """Prefill the left-padded prompts, then decode one token per active row per step, letting
        newly queued jobs join between steps."""
        batch = self._prefill(model, rows)
        lean = self._lean_for(model)
        ready_4d = lean is not None or _takes_4d_mask(model)
        idle_steps = 0
        while batch is not None:
            if admit is not None and self.model is model and len(batch.rows) < max_rows:
                joined = self._rows(model, admit(max_rows - len(batch.rows)))
                if joined:
                    rows.extend(joined)  # a failure from here on fails them too
                    idle_steps = 0
                    newcomers = self._prefill(model, joined)
                    if newcomers is not None:
                        batch = _trim(_merge(batch, newcomers))
                        batch.padded = _has_padding(batch.mask)
            idle_steps += 1
            if idle_steps > model.max_model_len:
                raise RuntimeError(f"decoding did not finish within {model.max_model_len} steps")
            batch.mask = torch.cat([batch.mask, torch.ones_like(batch.mask[:, :1])], dim=-1)
            batch.positions = batch.positions + 1
            mask = batch.decode_mask(ready_4d)
            if lean is not None:
                logits = lean(batch.next_tokens, batch.positions, mask, batch.cache)
            else:
                output = model.model(
                    input_ids=batch.next_tokens,
                    attention_mask=mask,
                    position_ids=batch.positions,
                    past_key_values=batch.cache,
                    use_cache=True,
                    logits_to_keep=1,
                )
                logits = output.logits[:, -1, :]
            batch = self._step(model, batch, logits)

    def _prefill(self, model: LoadedModel, rows: list[tuple[Job, Sequence]]) -> _Batch | None:
        """Run the rows' left-padded prompts and sample their first tokens; None if all are done.

        With a cached shared prefix the cache starts from its keys and values and only the rest of
        each prompt runs, left-padded after the prefix (the padding then sits mid-row, masked)."""
        device = model.device
        prompts = [seq.prompt_ids for _, seq in rows]
        prefix = self.prefix_cache.prefix_for(model, prompts) if self.prefix_cache is not None else None
        shared = len(prefix.tokens) if prefix is not None else 0
        rests = [prompt[shared:] for prompt in prompts]
        longest = max(len(rest) for rest in rests)
        input_ids = torch.tensor(
            [[model.pad_id] * (longest - len(rest)) + rest for rest in rests], device=device
        )
        mask = torch.tensor(
            [[1] * shared + [0] * (longest - len(rest)) + [1] * len(rest) for rest in rests], device=device
        )
        padded = any(len(rest) < longest for rest in rests)
        positions = (mask.cumsum(dim=-1) - 1).clamp(min=0)[:, shared:]
        cache = GrowingCache()
        if prefix is not None:
            for index, (keys, values) in enumerate(prefix.layers):
                cache.update(keys.expand(len(rows), -1, -1, -1), values.expand(len(rows), -1, -1, -1), index)
        lean = self._lean_for(model)
        if (
            lean is not None and not padded and prefix is None
        ):  # causal attention alone, as transformers does then
            logits = lean(input_ids, positions, None, cache)
        else:
            output = model.model(
                input_ids=input_ids,
                attention_mask=mask if padded else None,
                position_ids=positions,
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=1,
            )
            logits = output.logits[:, -1, :]
        batch = _Batch(list(rows), cache, mask, positions[:, -1:], input_ids[:, -1:], padded)
        return self._step(model, batch, logits)

    def _step(self, model: LoadedModel, batch: _Batch, logits: torch.Tensor) -> _Batch | None:
        """Sample each row's next token from `logits` [rows, vocab], hand out what is ready, drop
        finished rows."""
        rows = batch.rows
        top_k = max((seq.params.logprobs or 0) for _, seq in rows)
        step = sample_step(
            logits,
            [seq.params for _, seq in rows],
            [seq.generator for _, seq in rows],
            top_k,
        )
        decode, tokens, logprobs = model.decode, step.tokens, step.logprobs
        for position, (job, seq) in enumerate(rows):
            if job.cancelled:
                seq.abort()
                continue
            wanted = seq.params.logprobs
            top = (
                list(zip(step.top_ids[position][:wanted], step.top_logprobs[position][:wanted], strict=True))
                if wanted
                else []
            )
            seq.append(tokens[position], logprobs[position], top, decode)
            if job.stream or seq.finished:  # a non-streamed choice is handed out once, at its end
                delta = seq.take_delta(decode, final_only=not job.stream)
                if delta is not None:
                    job.emit(delta)
        batch.next_tokens = step.token_tensor[:, None]
        keep = [position for position, (_, seq) in enumerate(rows) if not seq.finished]
        if not keep:
            return None
        if len(keep) < len(rows):
            # Drop finished rows from the batch and the cache, so the tail runs at the size it needs.
            index = torch.tensor(keep, device=model.device)
            batch.cache.batch_select_indices(index)
            batch.rows = [rows[position] for position in keep]
            batch.next_tokens, batch.mask, batch.positions = (
                batch.next_tokens[index],
                batch.mask[index],
                batch.positions[index],
            )
            batch = _trim(batch)
            batch.padded = _has_padding(batch.mask)
        return batch


def _has_padding(mask: torch.Tensor) -> bool:
    """Whether any row of a 2-D attention mask has a masked position."""
    return not bool(mask.all())


def _takes_4d_mask(model: LoadedModel) -> bool:
    """Whether decode steps may pass a ready boolean [rows, 1, 1, columns] mask: SDPA attention with
    full attention in every layer (a sliding window would need the model to build its own mask)."""
    config = model.model.config
    if getattr(config, "_attn_implementation", None) != "sdpa":
        return False
    layer_types = getattr(config, "layer_types", None) or ["full_attention"]
    return all(kind == "full_attention" for kind in layer_types) and not getattr(
        config, "use_sliding_window", False
    )


def _left_pad(tensor: torch.Tensor, length: int, dim: int) -> torch.Tensor:
    """`tensor` with zeros added before its entries along `dim` up to `length`."""
    missing = length - tensor.shape[dim]
    if missing <= 0:
        return tensor
    shape = list(tensor.shape)
    shape[dim] = missing
    return torch.cat([tensor.new_zeros(shape), tensor], dim=dim)


def _merge(running: _Batch, newcomers: _Batch) -> _Batch:
    """One batch of both: caches and masks left-padded to the longer one (masked positions are never
    attended to), rows, positions and next tokens stacked."""
    length = max(running.mask.shape[1], newcomers.mask.shape[1])
    for mine, theirs in zip(running.cache.layers, newcomers.cache.layers, strict=True):
        stack_layers(mine, theirs, length)
    running.mask = torch.cat([_left_pad(running.mask, length, 1), _left_pad(newcomers.mask, length, 1)])
    running.rows = running.rows + newcomers.rows
    running.positions = torch.cat([running.positions, newcomers.positions])
    running.next_tokens = torch.cat([running.next_tokens, newcomers.next_tokens])
    return running


def _trim(batch: _Batch) -> _Batch:
    """Drop the cache columns no row attends to any more (the padding left by rows that finished).

    Without this a batch that keeps admitting newcomers grows its cache by one column per step for as
    long as it runs, and every step attends over all of it. Keys are stored after their rotary embedding and positions are explicit, so cutting
    columns on the left changes nothing for the rows that remain."""
    used = batch.mask.any(dim=0)
    start = int(used.to(torch.int8).argmax()) if bool(used.any()) else 0
    if start == 0:
        return batch
    batch.mask = batch.mask[:, start:]
    for layer in batch.cache.layers:
        layer.keys = layer.keys[..., start:, :]
        layer.values = layer.values[..., start:, :]
    return batch


def _check_prompts(prompts: list[list[int]], max_tokens: int, model: LoadedModel) -> None:
    """Reject empty prompts, token ids outside the vocabulary, and prompts too long for the context."""
    for prompt in prompts:
        if not prompt:
            raise ValueError("the prompt is empty")
        vocab_size = model.vocab_size
        bad = [token for token in prompt if not 0 <= token < vocab_size]
        if bad:
            raise ValueError(f"prompt token ids must be in [0, {model.vocab_size}), got {bad[:5]}")
        if len(prompt) + max_tokens > model.max_model_len:
            raise ValueError(
                f"this model's context is {model.max_model_len} tokens; the prompt has {len(prompt)} "
                f"and max_tokens is {max_tokens}"
            )
