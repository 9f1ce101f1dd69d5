"""lightningrl: train any agent with RL. `fit` is the front door; the rest is imported on first use."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lightningrl.config import LightningRLConfig
    from lightningrl.fit import fit
    from lightningrl.result import TrainResult
    from runner import emit_reward, rollout

# Lazy: `import lightningrl` must stay cheap (the CLI and runner processes import it).
_EXPORTS = {
    "fit": "lightningrl.fit",
    "LightningRLConfig": "lightningrl.config",
    "TrainResult": "lightningrl.result",
    "rollout": "runner",
    "emit_reward": "runner",
}

__all__ = ["LightningRLConfig", "TrainResult", "emit_reward", "fit", "rollout"]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'lightningrl' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value
