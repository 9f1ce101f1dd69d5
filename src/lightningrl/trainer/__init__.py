"""Actor trainers: verl's own actor update in-process or over Ray ranks, and the bare-torch reference step."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lightningrl.trainer.config import TrainerConfig
from lightningrl.trainer.factory import build_trainer
from lightningrl.trainer.protocol import Trainer
from lightningstore.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from lightningrl.trainer.ray_trainer import RayTrainer
    from lightningrl.trainer.reference import reference_optimizer, response_log_probs, torch_reference_step
    from lightningrl.trainer.verl_actor import VerlActorTrainer

__all__ = [
    "RayTrainer",
    "Trainer",
    "TrainerConfig",
    "VerlActorTrainer",
    "build_trainer",
    "reference_optimizer",
    "response_log_probs",
    "torch_reference_step",
]

_LAZY = {
    "RayTrainer": "lightningrl.trainer.ray_trainer",
    "VerlActorTrainer": "lightningrl.trainer.verl_actor",
    "reference_optimizer": "lightningrl.trainer.reference",
    "response_log_probs": "lightningrl.trainer.reference",
    "torch_reference_step": "lightningrl.trainer.reference",
}

# verl-backed names load on first use: importing the package must not import verl.
__getattr__ = lazy_exports(__name__, _LAZY)
