"""`evaluate`: an agent x a model x rows -> `EvalReport`, with the processes `fit` starts (see
`lightningrl.evaluation` for what the report holds and why it matches fit's validation)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console

from lightningrl.datasets import Rows
from lightningrl.evaluation import EvalReport
from lightningrl.fitting import fit


def evaluate(
    agent: Any,
    rows: Rows,
    *,
    model: str | Path | None = None,
    k: int = 1,
    slice_by: str | None = None,
    success_threshold: float = 1.0,
    sampling_by_mode: Mapping[str, Mapping[str, Any]] | None = None,
    store: str | Path | None = None,
    output_dir: str | Path = "runs/eval",
    workers: int = 8,
    runner_processes: int | None = None,
    engine: str = "auto",
    console: Console | None = None,
) -> EvalReport:
    """Roll `agent` out `k` times per row of `rows` on `model` (a checkpoint directory; with `store`, the
    store's latest version of the LLM resource) in the validation mode, and report success per
    `slice_by` value with 95% intervals and pass@1..k. `sampling_by_mode={"val": {"temperature": 0}}`
    evaluates greedily (default: the validation sampling `fit` uses, temperature 0.7)."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k!r}")
    if model is None:
        if store is None:
            raise ValueError("give model (a checkpoint directory) or store (its latest LLM version)")
        model = asyncio.run(_latest_checkpoint(str(store)))
    result = fit(
        agent,
        rows,
        model=model,
        config={"balance_by": slice_by, "success_threshold": success_threshold, "show_progress": False},
        store=store,
        workers=workers,
        engine=engine,
        output_dir=output_dir,
        runner_processes=runner_processes,
        sampling_by_mode=sampling_by_mode,
        console=console,
        algorithm=[],
        evaluate=k,
    )
    assert result.evaluation is not None
    return result.evaluation


async def _latest_checkpoint(target: str) -> str:
    """The checkpoint of the store's latest `llm` version (what fit serves when given that store)."""
    from lightningstore import open_store

    store = open_store(target, role=None)
    try:
        latest = await store.get_latest_version("llm")
    finally:
        await store.close()
    checkpoint = getattr(latest.resource, "checkpoint", None) if latest is not None else None
    if not checkpoint:
        raise ValueError(f"store {target!r} has no LLM version with a checkpoint to evaluate")
    return str(checkpoint)
