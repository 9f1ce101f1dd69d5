"""TrainResult: what a `fit` run leaves behind."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class TrainResult:
    """The metrics, the final version, held-out success before/after and where everything is."""

    metrics: list[dict[str, Any]]
    """Every metrics row of the output directory so far (a resumed run's earlier rows included)."""
    final_version_id: str
    """The resource's `latest` version when training stopped."""
    held_out_before: float | None
    """Held-out success of the starting model (the step-0 row); None without val tasks."""
    held_out_after: float | None
    """Held-out success at the last validation after step 0; None without val tasks."""
    metrics_csv: Path
    reward_curve: Path | None
    last_checkpoint: Path | None
    """The checkpoint of the final version (the starting model when no update was published)."""
    output_dir: Path
    store: str
    """The store URL the trainer used (a store server's http URL)."""
    proxy_url: str
    model_endpoints: list[str] = field(default_factory=list)
    stopped_reason: str | None = None
    prompt_version_id: str | None = None
    """The `prompt` resource's latest version at the end (APO's best), when the run has one."""
    apo: Any = None
    """APO's result (`lightningrl.algorithms.apo.APOResult`: start, candidates, best, notes) when it ran."""
    probe: Any = None
    """The pass-rate probe's `lightningrl.curation.Curation` (pass counts, kept tasks) when `probe` ran."""
    evaluation: Any = None
    """The `EvalReport` of `fit(evaluate=k)` / `lightningrl.evaluate`, else None."""

    @property
    def steps(self) -> int:
        """The last step number in the metrics."""
        return max((int(r["step"]) for r in self.metrics), default=0)
