"""The inference engine's prefix cache: prompts that share a long head decode as they do without it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch

from lightningrl.demos.tinylm import build_tiny_model
from lightningrl.serving import SamplingParams, load_model
from lightningrl.serving.engine import Engine
from lightningrl.serving.job import Job
from lightningrl.serving.model import LoadedModel
from lightningrl.serving.prefix_cache import BLOCK

HEAD = " ".join(["The red sun sets over the quiet sea and the old boat"] * 12)
TAILS = ["Once", "Once upon a time", "The cat", "A dog ran into the garden and"]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> LoadedModel:
    path = build_tiny_model(
        tmp_path_factory.mktemp("prefix") / "m", seed=0, hidden_size=64, num_layers=2, num_heads=4
    )
    return load_model(path, device="cpu", version=0)


def _generate(
    engine: Engine, prompts: list[list[int]], **sampling: object
) -> list[tuple[list[int], list[float]]]:
    """Each prompt's (token ids, logprobs), all prompts in one batch."""
    loop = asyncio.new_event_loop()
    params = SamplingParams(max_tokens=8, ignore_eos=True, **sampling)
    jobs = [Job([p], 1, params, False, lambda m, p=p: [p], 0, loop) for p in prompts]
    engine.run(jobs)
    loop.run_until_complete(asyncio.sleep(0))
    out = []
    for job in jobs:
        ids: list[int] = []
        logprobs: list[float] = []
        while not job.events.empty():
            event = job.events.get_nowait()
            ids += getattr(event, "token_ids", []) or []
            logprobs += getattr(event, "logprobs", []) or []
        out.append((ids, logprobs))
    loop.close()
    return out


def _same(got: list[tuple[list[int], list[float]]], want: list[tuple[list[int], list[float]]]) -> bool:
    """The same tokens, and log-probs equal to float rounding (the prefix ran as its own forward)."""
    return len(got) == len(want) and all(
        ids == want_ids
        and len(ids) == 8
        and torch.allclose(torch.tensor(lp), torch.tensor(want_lp), atol=1e-4)
        for (ids, lp), (want_ids, want_lp) in zip(got, want, strict=True)
    )


def _prompts(model: LoadedModel) -> list[list[int]]:
    encode = model.tokenizer.encode
    return [encode(HEAD + " " + tail) for tail in TAILS]


def test_shared_heads_decode_as_whole_prompts(served: LoadedModel) -> None:
    prompts = _prompts(served)
    assert min(len(p) for p in prompts) > 2 * BLOCK  # the head is worth caching
    whole = _generate(Engine(served, prefix_cache=False), prompts, temperature=0.0)
    cached_engine = Engine(served)
    first = _generate(cached_engine, prompts, temperature=0.0)
    again = _generate(cached_engine, prompts[1:], temperature=0.0)  # a later batch: a cache hit
    cache = cached_engine.prefix_cache
    assert cache is not None and cache.misses == 1 and cache.hits == 1 and len(cache) == 1
    for (ids, logprobs), (want_ids, want_logprobs) in zip(
        [*first, *again], [*whole, *whole[1:]], strict=True
    ):
        assert ids == want_ids and len(ids) == 8
        assert torch.allclose(torch.tensor(logprobs), torch.tensor(want_logprobs), atol=1e-4)


def test_sampling_with_a_seed_draws_the_same_tokens(served: LoadedModel) -> None:
    prompts = _prompts(served)
    whole = _generate(Engine(served, prefix_cache=False), prompts, temperature=1.0, seed=7)
    cached = _generate(Engine(served), prompts, temperature=1.0, seed=7)
    assert [ids for ids, _ in cached] == [ids for ids, _ in whole]


def test_new_weights_start_an_empty_cache(served: LoadedModel, tmp_path: Path) -> None:
    engine = Engine(served)
    _generate(engine, _prompts(served), temperature=0.0)
    other = load_model(
        build_tiny_model(tmp_path / "b", seed=1, hidden_size=64, num_layers=2, num_heads=4),
        device="cpu",
        version=1,
    )
    engine.model = other
    fresh = _generate(engine, _prompts(other), temperature=0.0)
    assert engine.prefix_cache is not None and engine.prefix_cache.misses == 2  # nothing reused across models
    assert _same(fresh, _generate(Engine(other, prefix_cache=False), _prompts(other), temperature=0.0))


def test_prompts_sharing_less_than_a_block_run_whole(served: LoadedModel) -> None:
    engine = Engine(served)
    encode = served.tokenizer.encode
    _generate(engine, [encode("Once upon a time"), encode("The cat sat")], temperature=0.0)
    assert engine.prefix_cache is not None and len(engine.prefix_cache) == 0
