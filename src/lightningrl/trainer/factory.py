"""build_trainer: the actor trainer `TrainerConfig.backend` names."""

from __future__ import annotations

from pathlib import Path

from lightningrl.trainer.config import TrainerConfig
from lightningrl.trainer.protocol import Trainer


def build_trainer(model_dir: str | Path, config: TrainerConfig) -> Trainer:
    """ "local": verl's worker in this process; "ray": `num_workers` ranks on Ray (`RayTrainer`)."""
    if config.backend == "ray":
        from lightningrl.trainer.ray_trainer import RayTrainer

        return RayTrainer(model_dir, config)
    from lightningrl.trainer.verl_actor import VerlActorTrainer

    return VerlActorTrainer(model_dir, config)
