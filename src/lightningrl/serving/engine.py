"""Engine: runs one batch of jobs to completion with a KV cache, left padding and per-row sampling."""

from __future__ import annotations

import logging

import torch

from lightningrl.serving.job import Failed, Job, Started
from lightningrl.serving.model import LoadedModel
from lightningrl.serving.sampling import row_generator, sample_step
from lightningrl.serving.sequence import Sequence

logger = logging.getLogger(__name__)


class Engine:
    """Generates for a batch of jobs on the current model; `model` may be swapped between batches."""

    def __init__(self, model: LoadedModel) -> None:
        """Serve `model` until it is replaced."""
        self.model = model

    def run(self, jobs: list[Job]) -> None:
        """Generate every choice of `jobs` (blocking; called on the generation thread)."""
        model = self.model  # a reload mid-batch does not affect this batch
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
        if not rows:
            return
        try:
            with torch.inference_mode():
                self._decode(model, rows)
        except Exception as error:  # a model failure fails this batch's requests, not the server
            logger.exception("generation failed for a batch of %d sequences", len(rows))
            for job in {id(job): job for job, _ in rows}.values():
                job.emit(Failed(f"generation failed: {type(error).__name__}: {error}"))

    def _decode(self, model: LoadedModel, rows: list[tuple[Job, Sequence]]) -> None:
        """Prefill the left-padded prompts, then decode one token per active row per step."""
        device = model.device
        longest = max(len(seq.prompt_ids) for _, seq in rows)
        input_ids = torch.tensor(
            [[model.pad_id] * (longest - len(seq.prompt_ids)) + seq.prompt_ids for _, seq in rows],
            device=device,
        )
        mask = torch.tensor(
            [[0] * (longest - len(seq.prompt_ids)) + [1] * len(seq.prompt_ids) for _, seq in rows],
            device=device,
        )
        positions = (mask.cumsum(dim=-1) - 1).clamp(min=0)
        top_k = max((seq.params.logprobs or 0) for _, seq in rows)
        cache = None
        max_steps = max(seq.params.max_tokens for _, seq in rows)
        for _ in range(max_steps):
            output = model.model(
                input_ids=input_ids,
                attention_mask=mask,
                position_ids=positions,
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=1,
            )
            cache = output.past_key_values
            step = sample_step(
                output.logits[:, -1, :],
                [seq.params for _, seq in rows],
                [seq.generator for _, seq in rows],
                top_k,
            )
            for position, (job, seq) in enumerate(rows):
                if job.cancelled:
                    seq.abort()
                    continue
                wanted = seq.params.logprobs or 0
                top = list(
                    zip(step.top_ids[position][:wanted], step.top_logprobs[position][:wanted], strict=True)
                )
                seq.append(step.tokens[position], step.logprobs[position], top, model.decode)
                delta = seq.take_delta(model.decode, final_only=not job.stream)
                if delta is not None:
                    job.emit(delta)
            keep = [position for position, (_, seq) in enumerate(rows) if not seq.finished]
            if not keep:
                return
            next_tokens = torch.tensor(step.tokens, device=device)[:, None]
            if len(keep) < len(rows):
                # Drop finished rows from the batch and the cache, so the tail runs at the size it needs.
                index = torch.tensor(keep, device=device)
                cache.batch_select_indices(index)
                rows = [rows[position] for position in keep]
                next_tokens, mask, positions = next_tokens[index], mask[index], positions[index]
            input_ids = next_tokens
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=-1)
            positions = positions[:, -1:] + 1
        raise RuntimeError(f"decoding did not finish within max_tokens={max_steps} steps")


def _check_prompts(prompts: list[list[int]], max_tokens: int, model: LoadedModel) -> None:
    """Reject empty prompts, token ids outside the vocabulary, and prompts too long for the context."""
    for prompt in prompts:
        if not prompt:
            raise ValueError("the prompt is empty")
        bad = [token for token in prompt if not 0 <= token < model.vocab_size]
        if bad:
            raise ValueError(f"prompt token ids must be in [0, {model.vocab_size}), got {bad[:5]}")
        if len(prompt) + max_tokens > model.max_model_len:
            raise ValueError(
                f"this model's context is {model.max_model_len} tokens; the prompt has {len(prompt)} "
                f"and max_tokens is {max_tokens}"
            )
