"""lightningrl: train any agent with RL. `fit` is the front door; the rest is imported on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lightningstore.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from lightningrl.evaluating import evaluate
    from lightningrl.evaluation import EvalReport, ServedModel
    from lightningrl.fitting.result import TrainResult
    from lightningrl.fitting.run import FitInterrupted, fit
    from lightningrl.models import cached_model, check_checkpoint, export_checkpoint, import_model
    from lightningrl.rl.config import LightningRLConfig
    from runner import AglAgent, emit_reward, rollout

# Lazy: `import lightningrl` must stay cheap (the CLI and runner processes import it).
__getattr__ = lazy_exports(
    __name__,
    {
        "fit": "lightningrl.fitting.run",
        "FitInterrupted": "lightningrl.fitting.run",
        "LightningRLConfig": "lightningrl.rl.config",
        "TrainResult": "lightningrl.fitting.result",
        "rollout": "runner",
        "emit_reward": "runner",
        "import_model": "lightningrl.models",
        "check_checkpoint": "lightningrl.models",
        "cached_model": "lightningrl.models",
        "export_checkpoint": "lightningrl.models",
        "AglAgent": "runner",
        "evaluate": "lightningrl.evaluating",
        "EvalReport": "lightningrl.evaluation",
        "ServedModel": "lightningrl.evaluation",
    },
)

__all__ = [
    "AglAgent",
    "EvalReport",
    "FitInterrupted",
    "LightningRLConfig",
    "ServedModel",
    "TrainResult",
    "cached_model",
    "check_checkpoint",
    "emit_reward",
    "evaluate",
    "export_checkpoint",
    "fit",
    "import_model",
    "rollout",
]
