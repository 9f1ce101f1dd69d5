"""The torch.distributed process group verl's workers expect, made for a single process if absent."""

from __future__ import annotations

import os

import torch.distributed as dist

from lightningstore.server.run import free_port


def ensure_process_group(device: str) -> None:
    """Set the rank variables verl's `Worker` reads; on the CPU also start a 1-rank gloo group.

    Under torchrun or Ray the variables and the group exist already and are left alone. On GPUs
    verl starts its own group ("cpu:gloo,cuda:nccl"); on the CPU verl's backend string would name
    the cpu device twice, which torch rejects, so plain gloo is started here first.
    """
    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(free_port()))
        os.environ.setdefault("RANK", "0")
        os.environ.setdefault("WORLD_SIZE", "1")
        os.environ.setdefault("LOCAL_RANK", "0")
        if device == "cpu":
            dist.init_process_group(
                backend="gloo", rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"])
            )
