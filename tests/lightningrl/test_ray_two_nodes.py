"""Two Ray nodes on this machine (ray.cluster_utils.Cluster), one trainer rank on each: 2 steps, a
checkpoint, and a new pair of ranks that loads it. The driver attaches through RAY_ADDRESS."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from test_verl_trainer import build_tiny_model, random_batch

from lightningrl.trainer import RayTrainer, TrainerConfig
from lightningrl.trainer.ray_cluster import ADDRESS_ENV


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[str]:
    """A head and a worker node, one CPU and one logical GPU each; yields the cluster's address."""
    import ray
    from ray.cluster_utils import Cluster

    assert not ray.is_initialized()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 1})
    try:
        cluster.add_node(num_cpus=1, num_gpus=1)
        cluster.wait_for_nodes()
        yield cluster.address
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()


def test_one_rank_per_node_trains_saves_and_loads(
    two_nodes: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ray
    from ray.util import placement_group_table

    monkeypatch.setenv(ADDRESS_ENV, two_nodes)
    model_dir = build_tiny_model(tmp_path / "model")
    config = TrainerConfig(lr=1e-2, micro_batch_size=4, backend="ray", num_workers=2)
    batch, advantages = random_batch(size=8, seed=5)

    trainer = RayTrainer(model_dir, config)
    try:
        assert trainer.layout.per_node == [1, 1] and trainer.layout.use_gpu
        nodes = {placement_group_table(pg)["bundles_to_node_id"][0] for pg in trainer._pool.pgs}
        assert len(nodes) == 2  # one rank on each node
        before = trainer.compute_log_probs(batch)
        metrics = [trainer.train_step(batch, advantages) for _ in range(2)]
        after = trainer.compute_log_probs(batch)
        trainer.save_checkpoint(tmp_path / "step-2")
    finally:
        trainer.close()
    assert not ray.is_initialized()  # attached by the trainer, so detached by its close()
    assert all(m["grad_norm"] > 0 for m in metrics)
    trained = batch.response_mask.bool() & (advantages > 0)
    assert after[trained].mean() > before[trained].mean()

    resumed = RayTrainer(tmp_path / "step-2", config)
    try:
        torch.testing.assert_close(resumed.compute_log_probs(batch), after, atol=1e-5, rtol=0)
    finally:
        resumed.close()
