"""RankWorker: verl's TrainingWorker as one Ray actor rank, plus the policy save every rank joins."""

from __future__ import annotations

from pathlib import Path

from verl.single_controller.base.decorator import Dispatch, register
from verl.utils.device import get_device_name
from verl.workers.engine_workers import TrainingWorker

from lightningrl.trainer import shared_prefix
from lightningrl.trainer.checkpoint import write_policy
from lightningrl.trainer.process_group import ensure_process_group


class RankWorker(TrainingWorker):
    """One FSDP2 rank. On the CPU the process group is plain gloo, started before verl's own init:
    verl's backend string there would be "cpu:gloo,cpu:gloo", which torch rejects as a duplicate."""

    def __init__(self, config: object) -> None:
        # Ray's actor env already carries RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT.
        ensure_process_group(get_device_name())
        super().__init__(config)
        shared_prefix.install(self.engine)

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def save_policy(self, source_dir: str, base_dir: str, out_dir: str) -> str:
        """Gather the policy on every rank; rank 0 writes it to `out_dir` (shared storage across nodes)."""
        return str(write_policy(self.engine, Path(source_dir), Path(base_dir), Path(out_dir)))
