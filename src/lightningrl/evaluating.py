"""`evaluate`: an agent x a model x rows -> `EvalReport`, with the processes `fit` starts (see
`lightningrl.evaluation.report` for what the report holds and why it matches fit's validation)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console

from lightningrl.datasets import Rows
from lightningrl.evaluation.report import REPORT_FILE, EvalReport, ServedModel
from lightningrl.fitting.run import fit


def evaluate(
    agent: Any,
    rows: Rows,
    *,
    model: str | Path | ServedModel | None = None,
    store: str | Path | None = None,
    version: str = "latest",
    k: int = 1,
    slice_by: str | None = None,
    success_threshold: float = 1.0,
    sampling_by_mode: Mapping[str, Mapping[str, Any]] | None = None,
    output_dir: str | Path = "runs/eval",
    workers: int = 8,
    runner_processes: int | None = None,
    engine: str = "auto",
    console: Console | None = None,
) -> EvalReport:
    """Roll `agent` out `k` times per row of `rows` in the validation mode and report success per
    `slice_by` value with 95% intervals and pass@1..k. The model: a checkpoint directory; a
    `ServedModel(base_url, model)` served elsewhere (through the proxy, every call recorded); or, with
    `store`, that store's `version` of the `llm` resource ("latest", "approved" or a version id), served
    from its checkpoint. The rollouts go to a store of their own in `output_dir` (never the source
    store). `sampling_by_mode={"val": {"temperature": 0}}` evaluates greedily (default: the validation
    sampling `fit` uses, temperature 0.7)."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k!r}")
    source: dict[str, Any] = {}
    if store is not None:
        if model is not None:
            raise ValueError("give model or store (with version), not both")
        source = asyncio.run(_stored_version(str(store), version))
        model = source["checkpoint"]
    elif model is None:
        raise ValueError("give model (a checkpoint directory or a ServedModel) or store (with version)")
    if isinstance(model, ServedModel):
        source = {"base_url": model.base_url, "model": model.model}
    result = fit(
        agent,
        rows,
        model=model,
        config={"balance_by": slice_by, "success_threshold": success_threshold, "show_progress": False},
        workers=workers,
        engine=engine,
        output_dir=output_dir,
        runner_processes=runner_processes,
        sampling_by_mode=sampling_by_mode,
        console=console,
        algorithm=[],
        evaluate=k,
    )
    report = result.evaluation
    assert report is not None
    if source:
        report = dataclasses.replace(report, source=source)
        (Path(output_dir) / REPORT_FILE).write_text(json.dumps(report.as_json(), indent=2) + "\n")
    return report


async def _stored_version(target: str, version: str) -> dict[str, Any]:
    """The store's `version` of `llm` ("latest", "approved" or an id): where it is and its checkpoint."""
    from lightningstore import open_store

    store = open_store(target, role=None)
    try:
        if version in ("latest", "approved"):
            found = await store.get_pointer("llm", version)  # type: ignore[arg-type]
        else:
            found = await store.get_resource_version(version)
    finally:
        await store.close()
    checkpoint = getattr(found.resource, "checkpoint", None) if found is not None else None
    if found is None or not checkpoint:
        raise ValueError(
            f"store {target!r} has no {version!r} version of 'llm' with a checkpoint to evaluate"
        )
    return {"store": target, "version_id": found.version_id, "pointer": version, "checkpoint": checkpoint}
