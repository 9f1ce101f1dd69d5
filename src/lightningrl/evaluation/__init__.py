"""Evaluation: an agent x a model x rows -> success per slice with 95% intervals and pass@k.

`report.py` holds the report, its statistics and the stage `fit` runs (`fit(evaluate=k)`); `run.py`
holds `evaluate`, which starts what `fit` starts (imported lazily: it imports `fit`, which imports
the stage from here)."""

from lightningrl.evaluation.report import (
    REPORT_FILE,
    EvalReport,
    Score,
    ServedModel,
    eval_report,
    eval_stage,
    pass_at,
    wilson_interval,
)

__all__ = [
    "REPORT_FILE",
    "EvalReport",
    "Score",
    "ServedModel",
    "eval_report",
    "eval_stage",
    "pass_at",
    "wilson_interval",
]
