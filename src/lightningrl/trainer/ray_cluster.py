"""Ray for the trainer's ranks: attach to the cluster at RAY_ADDRESS, else start a quiet local one.

On a machine without GPUs the local instance declares one logical GPU per rank: verl schedules its
workers on GPUs, and our CPU platform answers verl's resource name with "GPU" (see
`lightningrl.verl_cpu.platform`). The ranks then train on the CPU over gloo.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ADDRESS_ENV = "RAY_ADDRESS"
FREE_WAIT_S = 30.0
"""How long to wait for the cluster to have a rank's resources free before saying who lacks them."""


@dataclass(frozen=True)
class RankLayout:
    """How many ranks each node hosts, and whether a rank holds a GPU (else one CPU)."""

    per_node: list[int]
    use_gpu: bool


def worker_pythonpath() -> str:
    """This process's import path minus the interpreter's own (stdlib, site-packages): the project and
    agent directories the ranks must import from, harmless on nodes whose Python lives elsewhere."""
    own = {Path(prefix) for prefix in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    paths = [
        p for p in sys.path if p and Path(p).is_dir() and not any(Path(p).is_relative_to(o) for o in own)
    ]
    existing = os.environ.get("PYTHONPATH")
    return os.pathsep.join(paths + ([existing] if existing else []))


def connect_ray(num_workers: int) -> bool:
    """Attach to RAY_ADDRESS or start a local Ray sized for `num_workers` ranks; True when started here.

    Quiet: Ray's own log lines stay below ERROR and the workers' output stays in Ray's session logs
    (`/tmp/ray/session_latest/logs`) instead of the console. Workers import what this process imports
    (see `worker_pythonpath`)."""
    import ray

    if ray.is_initialized():
        return False
    quiet = {
        "log_to_driver": False,
        "logging_level": logging.ERROR,
        "runtime_env": {"env_vars": {"PYTHONPATH": worker_pythonpath()}},
    }
    if os.environ.get(ADDRESS_ENV):
        ray.init(address=os.environ[ADDRESS_ENV], **quiet)
        return True
    import torch

    gpus = torch.cuda.device_count()
    ray.init(
        # "local": a new instance even when another Ray runs on this machine (without it, ray.init
        # attaches to the latest one it finds, with that cluster's resources, not these).
        address="local",
        num_cpus=max(os.cpu_count() or 1, num_workers),
        # Logical GPUs stand in for devices where there are none (CPU ranks over gloo).
        num_gpus=gpus if gpus else num_workers,
        include_dashboard=False,
        **quiet,
    )
    return True


def rank_layout(num_workers: int) -> RankLayout:
    """Ranks per node, filling the nodes with the most GPUs first (CPUs when the cluster has no GPUs).

    Raises naming what is missing rather than letting verl wait forever on a placement group that
    cannot be placed.
    """
    import ray

    nodes = [node for node in ray.nodes() if node.get("Alive")]
    use_gpu = sum(node["Resources"].get("GPU", 0) for node in nodes) > 0
    resource = "GPU" if use_gpu else "CPU"
    slots = sorted((int(node["Resources"].get(resource, 0)) for node in nodes), reverse=True)
    per_node, left = [], num_workers
    for count in slots:
        take = min(count, left)
        if take:
            per_node.append(take)
            left -= take
    if left:
        raise RuntimeError(
            f"trainer.num_workers={num_workers} ranks need {num_workers} {resource}s (one each), but the "
            f"Ray cluster has {sum(slots)} ({slots} per node)"
        )
    # Ranks just killed (a previous trainer's) return their resources within seconds.
    deadline = time.monotonic() + FREE_WAIT_S
    free = ray.available_resources().get(resource, 0)
    while free < num_workers and time.monotonic() < deadline:
        time.sleep(0.2)
        free = ray.available_resources().get(resource, 0)
    if free < num_workers:
        raise RuntimeError(
            f"trainer.num_workers={num_workers} ranks need {num_workers} free {resource}s; "
            f"the Ray cluster has {free:g} free after {FREE_WAIT_S:g} s (other jobs hold the rest)"
        )
    return RankLayout(per_node=per_node, use_gpu=use_gpu)
