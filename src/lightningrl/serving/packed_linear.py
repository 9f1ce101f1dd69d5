"""PackedLinear: a served model's linear layers with their weights laid out once for oneDNN's matmul.

On the CPU, `F.linear` hands each call's weight to a GEMM that re-blocks it for its kernel; with the
few rows a decode step has, that re-blocking and the plain layout's memory traffic cost more than
the arithmetic. oneDNN can lay a weight out for its kernel once (the packing inductor uses when it
freezes a CPU graph), after which a decode step's matmuls take about half the time (SmolLM2-135M at
16 rows: 48 -> 24 ms a step on two cores; its 49k-row output layer alone 17.7 -> 5.9 ms). Results
differ from `F.linear`'s in the last bits only (another summation order: ~4e-6 on outputs of size
~1), so every path of the served model — transformers' forward and the engine's lean decode step —
goes through the same packed layers, and a sequence's log-probs do not depend on which path ran it.

Only large weights are packed (`PACK_MIN_ELEMENTS`): a packed call has a fixed cost that a small
matmul does not repay. Serving only: the layers keep their `weight` (a tied embedding still shares
it) but a change to it after packing is not seen; a reload builds a new model and packs that.
"""

from __future__ import annotations

import torch
from torch import nn


def packing_available(model: nn.Module, device: str) -> bool:
    """Whether `model`'s linear layers can be packed: a float32 model on the CPU with oneDNN."""
    try:
        dtype = next(model.parameters()).dtype
    except StopIteration:
        return False
    return (
        device == "cpu"
        and dtype == torch.float32
        and torch.backends.mkldnn.is_available()
        and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
        and hasattr(torch.ops.mkldnn, "_linear_pointwise")
    )


class PackedLinear(nn.Module):
    """An inference-only stand-in for an `nn.Linear`: the same weight and bias, multiplied by oneDNN
    from a copy of the weight packed once."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight = linear.weight
        self.bias = linear.bias
        with torch.no_grad():
            self._packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        out = torch.ops.mkldnn._linear_pointwise(rows, self._packed, self.bias, "none", [], "")
        return out.view(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, packed=oneDNN"


PACK_MIN_ELEMENTS = 1 << 20
"""Only a weight of at least this many elements is packed. A packed call costs ~30 us more than
`F.linear` whatever its size (this CPU, one thread): below ~1M elements that loses at one row and
about breaks even at 16 (SmolLM2's 576x576: 37 -> 71 us at 1 row, 184 -> 187 us at 16; a tiny
model's 128x128: 8 -> 36 us), while SmolLM2's 49k-row output layer gains (7.7 -> 7.1 ms at 1 row,
27.6 -> 18.0 ms at 16). Read at each load, so a test can lower it."""


def pack_linears(model: nn.Module) -> int:
    """Replace each `nn.Linear` in `model` whose weight has at least `PACK_MIN_ELEMENTS` elements by a
    `PackedLinear` (call `packing_available` first); returns how many were replaced."""
    replaced = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear and child.weight.numel() >= PACK_MIN_ELEMENTS:
                setattr(parent, name, PackedLinear(child))
                replaced += 1
    return replaced
