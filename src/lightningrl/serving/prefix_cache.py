"""PrefixCache: the keys and values of a prompt prefix that many requests share, computed once per model.

An agent's calls share a long head: the system prompt and, with tools, their whole description
(~330 tokens of SmolLM2's ~400 in the calculator agent's calls). Prefilling it again for every
call was most of a call's cost on a CPU. Here a prefill finds the longest cached prefix that every
prompt of its batch starts with, copies its keys and values into the batch's cache, and runs only
the rest; with none cached, it computes the batch's common prefix, rounded down to whole blocks so
that later batches with other questions find it. Keys are stored after their rotary embedding at
positions 0..n-1, which is where the prefix sits in every prompt. An entry belongs to one model
object: a reload (new weights) starts an empty cache. Like vLLM's automatic prefix caching, the
logits differ from a whole-prompt prefill only in float rounding.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers.cache_utils import DynamicCache

from lightningrl.serving.model import LoadedModel

BLOCK = 64
"""A new entry's length is a multiple of this many tokens (and at least one block)."""
MAX_ENTRIES = 8
"""Least recently used entries beyond this are dropped (SmolLM2: ~45 KB a token, ~15 MB an entry)."""


@dataclass(frozen=True)
class CachedPrefix:
    tokens: tuple[int, ...]
    layers: tuple[tuple[torch.Tensor, torch.Tensor], ...]
    """Per attention layer, (keys, values) of shape [1, kv_heads, len(tokens), head_dim]."""


class PrefixCache:
    """Shared prompt prefixes of one model; used on the generation thread only."""

    def __init__(self, block: int = BLOCK, max_entries: int = MAX_ENTRIES) -> None:
        self.block = block
        self.max_entries = max_entries
        self._model: LoadedModel | None = None
        self._entries: OrderedDict[tuple[int, ...], CachedPrefix] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def prefix_for(self, model: LoadedModel, prompts: Sequence[Sequence[int]]) -> CachedPrefix | None:
        """The longest cached prefix of every prompt that leaves each at least one token to prefill,
        computed now (a whole number of blocks of their common prefix) if none is cached; None when
        they share less than a block."""
        if model is not self._model:
            self._entries.clear()
            self._model = model
        room = min(len(prompt) for prompt in prompts) - 1
        best = None
        for key, entry in self._entries.items():
            size = len(key)
            if size <= room and (best is None or size > len(best.tokens)):
                if all(tuple(prompt[:size]) == key for prompt in prompts):
                    best = entry
        if best is not None:
            self._entries.move_to_end(best.tokens)
            self.hits += 1
            return best
        size = min(_common_length(prompts), room) // self.block * self.block
        if size < self.block:
            return None
        self.misses += 1
        entry = _compute(model, tuple(int(token) for token in prompts[0][:size]))
        self._entries[entry.tokens] = entry
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
        return entry


def _common_length(prompts: Sequence[Sequence[int]]) -> int:
    """How many leading tokens every prompt shares."""
    first = prompts[0]
    length = min(len(prompt) for prompt in prompts)
    for prompt in prompts[1:]:
        same = 0
        while same < length and prompt[same] == first[same]:
            same += 1
        length = same
    return length


def _compute(model: LoadedModel, tokens: tuple[int, ...]) -> CachedPrefix:
    """One row's forward over `tokens`, keeping its keys and values."""
    cache = DynamicCache()
    ids = torch.tensor([tokens], device=model.device)
    positions = torch.arange(len(tokens), device=model.device)[None]
    model.model(
        input_ids=ids, position_ids=positions, past_key_values=cache, use_cache=True, logits_to_keep=1
    )
    return CachedPrefix(tokens, tuple((layer.keys, layer.values) for layer in cache.layers))
