"""LeanDecoder: a forward step of a Llama-style model without transformers' per-call machinery.

On the tiny models we serve on CPU a decode step is mostly Python: transformers' forward wraps each
call in output capturing, config defaults, mask preparation, a fresh ModuleList slice and model
output objects, which together cost more than the arithmetic. This runs the same modules' weights
through the same operations in the same order, calling the same linear layers (so the logits are
bit-identical, packed layers or not: `packed_linear`), for the
architectures whose layers are known to be plain: Qwen2 and Llama with SDPA attention, full
attention in every layer, default rotary embeddings and a SiLU MLP. Anything else gets None and
decodes through transformers.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from transformers.integrations.sdpa_attention import sdpa_attention_forward

SUPPORTED = frozenset({"qwen2", "llama"})


def lean_decoder(model: Any) -> LeanDecoder | None:
    """A LeanDecoder for `model` (a causal LM), or None when its architecture is not a plain one."""
    config = model.config
    base = getattr(model, "model", None)
    if config.model_type not in SUPPORTED or base is None or getattr(model, "lm_head", None) is None:
        return None
    if getattr(config, "_attn_implementation", None) != "sdpa" or config.hidden_act != "silu":
        return None
    layer_types = getattr(config, "layer_types", None) or ["full_attention"]
    if any(kind != "full_attention" for kind in layer_types) or getattr(config, "use_sliding_window", False):
        return None
    if getattr(base.rotary_emb, "rope_type", None) != "default":
        return None
    return LeanDecoder(model)


class LeanDecoder:
    """Runs `model`'s decoder on new tokens against a transformers Cache and returns the last logits."""

    def __init__(self, model: Any) -> None:
        """Capture `model`'s modules (a reload builds a new decoder)."""
        base = model.model
        self.embed = base.embed_tokens.weight
        self.rotary = base.rotary_emb
        self.norm = base.norm
        self.head = model.lm_head
        first = base.layers[0].self_attn
        self.apply_rotary: Callable[..., tuple[torch.Tensor, torch.Tensor]] = sys.modules[
            type(first).__module__
        ].apply_rotary_pos_emb
        self.head_dim = first.head_dim
        self.layers = list(base.layers[: model.config.num_hidden_layers])

    def _rotary(self, x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin as the model's default rotary embedding computes them."""
        rotary = self.rotary
        inv_freq = rotary.inv_freq[None, :, None].float().expand(positions.shape[0], -1, 1)
        freqs = (inv_freq.float() @ positions[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos() * rotary.attention_scaling
        sin = emb.sin() * rotary.attention_scaling
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)

    def __call__(
        self, input_ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | None, cache: Any
    ) -> torch.Tensor:
        """Logits [rows, vocab] after `input_ids` [rows, new] at `positions`, appending to `cache`;
        `mask` is None (no padding: causal attention among the new tokens) or a boolean
        [rows, 1, new, columns] mask."""
        hidden = F.embedding(input_ids, self.embed)
        cos, sin = self._rotary(hidden, positions)
        shape = (*input_ids.shape, -1, self.head_dim)
        for index, layer in enumerate(self.layers):
            attn = layer.self_attn
            residual = hidden
            hidden = layer.input_layernorm.forward(hidden)
            query = attn.q_proj.forward(hidden).view(shape).transpose(1, 2)
            key = attn.k_proj.forward(hidden).view(shape).transpose(1, 2)
            value = attn.v_proj.forward(hidden).view(shape).transpose(1, 2)
            query, key = self.apply_rotary(query, key, cos, sin)
            key, value = cache.update(key, value, index)
            out, _ = sdpa_attention_forward(attn, query, key, value, mask, dropout=0.0, scaling=attn.scaling)
            out = out.reshape(*input_ids.shape, -1).contiguous()
            hidden = residual + attn.o_proj.forward(out)
            residual = hidden
            hidden = layer.post_attention_layernorm.forward(hidden)
            mlp = layer.mlp
            gate = F.silu(mlp.gate_proj.forward(hidden))
            hidden = residual + mlp.down_proj.forward(gate * mlp.up_proj.forward(hidden))
        hidden = self.norm.forward(hidden[:, -1:, :])
        return self.head.forward(hidden)[:, -1, :]
