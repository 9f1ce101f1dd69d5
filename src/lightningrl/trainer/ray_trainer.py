"""RayTrainer: verl's actor update over `num_workers` Ray ranks, FSDP2 sharding the policy across them.

verl's own Ray machinery (`RayResourcePool`, `RayClassWithInitArgs`, `RayWorkerGroup`) starts one
`RankWorker` per rank; this driver makes the same calls the in-process trainer makes (`reset`,
`set_loss_fn`, `infer_batch`, `train_mini_batch`), and verl's dispatch splits each batch by
data-parallel rank. On GPUs the ranks talk NCCL; on the CPU gloo (see `ray_cluster`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tensordict import TensorDict

from lightningrl.quiet import quiet_third_party
from lightningrl.trainer.config import TrainerConfig
from lightningrl.trainer.ray_cluster import RankLayout, connect_ray, rank_layout
from lightningrl.trainer.verl_actor import VerlActorTrainer


class RayTrainer(VerlActorTrainer):
    """The `Trainer` protocol over a verl `RayWorkerGroup`; `close()` stops its ranks."""

    def __init__(self, model_dir: str | Path, config: TrainerConfig | None = None) -> None:
        self._group: Any = None
        self._pool: Any = None
        self._owns_ray = False
        super().__init__(model_dir, config)

    @property
    def ranks(self) -> int:
        return self.config.num_workers

    @property
    def layout(self) -> RankLayout:
        """Ranks per node as placed, and whether each holds a GPU."""
        return self._layout

    def _start_worker(self, worker_config: Any) -> None:
        import ray
        from verl.single_controller.ray import RayClassWithInitArgs, RayResourcePool, RayWorkerGroup

        from lightningrl.trainer.ray_worker import RankWorker

        self._owns_ray = connect_ray(self.ranks)
        try:
            self._layout = rank_layout(self.ranks)
            # One rank per bundle: verl's default bundle asks for 10 CPUs per GPU and waits forever.
            self._pool = RayResourcePool(
                process_on_nodes=self._layout.per_node, use_gpu=self._layout.use_gpu, max_colocate_count=1
            )
            worker = RayClassWithInitArgs(cls=ray.remote(RankWorker), config=worker_config)
            with quiet_third_party():
                self._group = RayWorkerGroup(
                    resource_pool=self._pool, ray_cls_with_init=worker, device_name=self.device
                )
            self._group.reset()
            self._group.set_loss_fn(self._loss_fn())
        except BaseException:
            self.close()
            raise

    def _infer(self, data: TensorDict) -> TensorDict:
        return self._group.infer_batch(data).get()

    def _train(self, data: TensorDict) -> TensorDict:
        return self._group.train_mini_batch(data).get()

    def _write(self, out: Path) -> None:
        self._group.save_policy(str(self.model_dir), str(self.base_dir), str(out.resolve()))

    def full_state(self) -> dict[str, Any]:
        raise NotImplementedError("RayTrainer keeps the weights on its ranks: use save_checkpoint")

    def close(self) -> None:
        """Stop the ranks and free their placement groups; shut Ray down if this trainer started it."""
        import ray
        from ray.util.placement_group import remove_placement_group

        if self._group is not None:
            for handle in self._group.workers:
                ray.kill(handle)
            self._group = None
        if self._pool is not None and self._pool.pgs:
            for group in self._pool.pgs:
                remove_placement_group(group)
            self._pool = None
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()
        self._owns_ray = False
