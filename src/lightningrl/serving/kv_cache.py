"""GrowingCache: a KV cache whose layers append into spare capacity instead of re-concatenating.

transformers' DynamicLayer concatenates the whole cache with each new token (O(length) copies per
step and layer); on the tiny models we serve that copy was over half of a decode step at 16 rows.
Here each layer keeps a buffer with room to grow (capacity doubles when full) and hands attention a
view of its filled part. Code that replaces `keys`/`values` wholesale (row selection, merging
batches) just works: the next update notices the tensors are no longer views of its buffer and
starts a new one from them. Trimming columns on the left keeps a view of the buffer, so it costs
no copy, and selecting rows gathers the buffer with its spare room.
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

    def _start(self, tensor: torch.Tensor, buffer: torch.Tensor | None) -> int | None:
        """Where `tensor` begins in `buffer` if it is a run of whole columns of it (the cache as
        last written, or trimmed on the left since), else None."""
        if (
            buffer is None
            or tensor.untyped_storage().data_ptr() != buffer.untyped_storage().data_ptr()
            or tensor.stride() != buffer.stride()
            or tensor.shape[:2] != buffer.shape[:2]
            or tensor.shape[-1] != buffer.shape[-1]
        ):
            return None
        start, partial = divmod(tensor.storage_offset() - buffer.storage_offset(), buffer.stride(-2))
        return start if partial == 0 and 0 <= start <= buffer.shape[-2] - tensor.shape[-2] else None

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
        start = self._start(self.keys, self._key_buffer)
        if start is None or start != self._start(self.values, self._value_buffer):
            start = None
        if (
            start is None
            or self._key_buffer is None
            or start + length + key_states.shape[-2] > self._key_buffer.shape[-2]
        ):
            capacity = max(MIN_CAPACITY, 2 * (length + key_states.shape[-2]))
            self._key_buffer = self._grown(self.keys, key_states, capacity)
            self._value_buffer = self._grown(self.values, value_states, capacity)
            start = 0
        assert self._value_buffer is not None
        end = start + length + key_states.shape[-2]
        self._key_buffer[..., start + length : end, :] = key_states
        self._value_buffer[..., start + length : end, :] = value_states
        self.keys = self._key_buffer[..., start:end, :]
        self.values = self._value_buffer[..., start:end, :]
        return self.keys, self.values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep the rows `indices`, gathered with the buffers' spare room so appending goes on in place."""
        start = self._start(self.keys, self._key_buffer)
        if start is None or start != self._start(self.values, self._value_buffer):
            super().batch_select_indices(indices)
            return
        assert self._key_buffer is not None and self._value_buffer is not None
        end = start + self.keys.shape[-2]
        self._key_buffer = self._key_buffer.index_select(0, indices)
        self._value_buffer = self._value_buffer.index_select(0, indices)
        self.keys = self._key_buffer[..., start:end, :]
        self.values = self._value_buffer[..., start:end, :]


def stack_layers(top: DynamicLayer, bottom: DynamicLayer, length: int) -> None:
    """Put `bottom`'s rows below `top`'s in `top`, both right-aligned at `length` columns with zeros
    to their left (columns the attention mask hides), in a buffer with room to grow."""
    buffers = []
    for upper, lower in ((top.keys, bottom.keys), (top.values, bottom.values)):
        rows = upper.shape[0]
        buffer = upper.new_zeros(
            (rows + lower.shape[0], upper.shape[1], max(MIN_CAPACITY, 2 * length), upper.shape[-1])
        )
        buffer[:rows, :, length - upper.shape[-2] : length] = upper
        buffer[rows:, :, length - lower.shape[-2] : length] = lower
        buffers.append(buffer)
    top.keys, top.values = buffers[0][..., :length, :], buffers[1][..., :length, :]
    if isinstance(top, GrowingLayer):
        top._key_buffer, top._value_buffer = buffers


class GrowingCache(DynamicCache):
    """A DynamicCache of GrowingLayers (created lazily, one per attention layer)."""

    def __init__(self) -> None:
        Cache.__init__(self, layer_class_to_replicate=GrowingLayer)
