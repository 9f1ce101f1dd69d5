"""CpuPlatform: verl's platform interface answered for a machine without an accelerator."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import torch
from verl.plugin.platform import PlatformBase

from lightningrl.verl_cpu import device

PLATFORM_NAME = "cpu"
FORCE_ENV = "LIGHTNINGRL_VERL_CPU"
""""1" forces the CPU platform even where an accelerator is visible; "0" never offers it."""


def accelerator_visible() -> bool:
    """True when torch sees a CUDA/ROCm GPU or an Ascend NPU: verl's own platforms then apply."""
    if torch.cuda.is_available():
        return True
    npu = getattr(torch, "npu", None)
    return bool(npu is not None and npu.is_available())


def cpu_wanted() -> bool:
    """Whether this process should run verl on the CPU (the env override first, then detection)."""
    forced = os.environ.get(FORCE_ENV, "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    return not accelerator_visible()


class CpuPlatform(PlatformBase):
    """verl on the CPU: fp32, gloo, FSDP2 over a 'cpu' device mesh."""

    @property
    def device_name(self) -> str:
        return PLATFORM_NAME

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> ModuleType:
        return device

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        # Probed after verl's own platforms; answering only without an accelerator keeps GPU hosts
        # (including CPU-only Ray actors on them, which verl detects through nvidia-smi) unchanged.
        return cpu_wanted()

    def current_device(self) -> Any:
        return device.current_device()

    def device_count(self) -> int:
        return device.device_count()

    def set_device(self, device_index: int) -> None:
        device.set_device(device_index)

    def synchronize(self, device_index: int | None = None) -> None:
        device.synchronize(device_index)

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        """The CPU allocator has no settings verl could change (expandable segments are CUDA's)."""

    def empty_cache(self) -> None:
        device.empty_cache()

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        # Nothing reads it on the CPU; a name that no accelerator runtime interprets.
        return "LIGHTNINGRL_VISIBLE_CPUS"

    @contextmanager
    def nvtx_range(self, msg: str) -> Iterator[None]:
        yield

    def profiler_start(self) -> None:
        """No device profiler on the CPU."""

    def profiler_stop(self) -> None:
        """No device profiler on the CPU."""

    def ray_resource_name(self) -> str:
        # verl's placement groups already reserve "CPU" per bundle; scheduling workers on logical
        # GPUs (`ray.init(num_gpus=n)`) is what runs verl's worker groups on a CPU-only cluster.
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None
