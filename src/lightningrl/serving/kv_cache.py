"""GrowingCache: a KV cache whose layers append into spare capacity instead of re-concatenating.

transformers' DynamicLayer concatenates the whole cache with each new token (O(length) copies per
step and layer); on the tiny models we serve that copy was over half of a decode step at 16 rows.
Here each layer keeps a buffer with room to grow (capacity doubles when full) and hands attention a
view of its filled part. Code that replaces `keys`/`values` wholesale (row selection, merging
batches, trimming padding) just works: the next update notices the tensors are no longer views of
its buffer and starts a new one from them.
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer

MIN_CAPACITY = 64


class GrowingLayer(DynamicLayer):
    """A DynamicLayer that writes new keys and values into spare room at the end of a buffer."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__()
        self._key_buffer: torch.Tensor | None = None
        self._value_buffer: torch.Tensor | None = None

    def _owns(self, tensor: torch.Tensor, buffer: torch.Tensor | None) -> bool:
        return (
            buffer is not None
            and tensor.data_ptr() == buffer.data_ptr()
            and tensor.shape[:2] == buffer.shape[:2]
            and tensor.shape[-1] == buffer.shape[-1]
        )

    @staticmethod
    def _grown(current: torch.Tensor, new: torch.Tensor, capacity: int) -> torch.Tensor:
        buffer = new.new_empty((*new.shape[:2], capacity, new.shape[-1]))
        if current.numel():
            buffer[..., : current.shape[-2], :] = current
        return buffer

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: object, **kwargs: object
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        length = self.keys.shape[-2] if self.keys.numel() else 0
        needed = length + key_states.shape[-2]
        owned = self._owns(self.keys, self._key_buffer) and self._owns(self.values, self._value_buffer)
        if not owned or self._key_buffer is None or needed > self._key_buffer.shape[-2]:
            capacity = max(MIN_CAPACITY, 2 * needed)
            self._key_buffer = self._grown(self.keys, key_states, capacity)
            self._value_buffer = self._grown(self.values, value_states, capacity)
        assert self._value_buffer is not None
        self._key_buffer[..., length:needed, :] = key_states
        self._value_buffer[..., length:needed, :] = value_states
        self.keys = self._key_buffer[..., :needed, :]
        self.values = self._value_buffer[..., :needed, :]
        return self.keys, self.values


class GrowingCache(DynamicCache):
    """A DynamicCache of GrowingLayers (created lazily, one per attention layer)."""

    def __init__(self) -> None:
        Cache.__init__(self, layer_class_to_replicate=GrowingLayer)
