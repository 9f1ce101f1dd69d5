"""A vLLM worker extension (`--worker-extension-cls lightningrl_vllm_ext.WeightSyncExtension`) whose
`lightningrl_reload_weights` reloads a checkpoint in place and then rebuilds tied output heads.

Why: vLLM 0.32's layerwise `reload_weights` copies the new embedding into the tensor the LM head
shares, but a tied head loads no weight of its own, so the kernel state its `process_weights_after_
loading` derived from the OLD weight stays: on a CPU the prepacked GEMM weight (`layer.cpu_linear`,
a packed copy or a oneDNN handle). Running that processing again on the head packs the new weight.

Runs inside vLLM's worker process: torch and vllm only, imported when called.
"""

from __future__ import annotations

from typing import Any


class WeightSyncExtension:
    """Mixed into vLLM's worker class; its methods are reachable through `POST /collective_rpc`."""

    model_runner: Any

    def lightningrl_reload_weights(self, weights_path: str | None = None) -> dict[str, Any]:
        """`reload_weights(weights_path=)`, then every LM head that shares its embedding's weight is
        re-tied to it and its derived kernel state rebuilt; returns the names of the heads rebuilt."""
        self.reload_weights(weights_path=weights_path)  # type: ignore[attr-defined]
        config = self.model_runner.vllm_config.model_config.hf_text_config
        tied = bool(getattr(config, "tie_word_embeddings", False))
        return {"retied": retie_output_heads(self.model_runner.get_model(), tied)}


def retie_output_heads(model: Any, tied: bool) -> list[str]:
    """Rebuild the kernel state of each LM head of `model` that shares its embedding's weight (or, for a
    model whose config ties them, of its one embedding) from that embedding's current weight."""
    import torch
    from vllm.model_executor.layers.vocab_parallel_embedding import ParallelLMHead, VocabParallelEmbedding

    embeddings = [
        module
        for module in model.modules()
        if isinstance(module, VocabParallelEmbedding) and not isinstance(module, ParallelLMHead)
    ]
    rebuilt = []
    with torch.no_grad():
        for name, head in model.named_modules():
            if not isinstance(head, ParallelLMHead) or head.weight.is_meta:
                continue
            shared = [e for e in embeddings if e.weight.data_ptr() == head.weight.data_ptr()]
            if not shared and tied and len(embeddings) == 1:
                shared = embeddings  # a reload gave the head a tensor of its own: tie it again
            if not shared:
                continue
            head.weight = shared[0].weight
            head.quant_method.process_weights_after_loading(head)
            rebuilt.append(name)
    return rebuilt
