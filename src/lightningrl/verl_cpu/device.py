"""The `torch.<device>`-like module verl gets for the CPU: `torch.cpu` plus the calls it lacks.

verl calls `get_torch_device().<name>` for memory statistics, cache control, RNG state and the device
name (the MFU metric). `torch.cpu` has none of these, so they are answered here with the CPU's
honest equivalents; anything else falls through to `torch.cpu`.
"""

from __future__ import annotations

from typing import Any

import psutil
import torch

DEVICE_NAME = "CPU"


def is_available() -> bool:
    """The CPU is always there."""
    return True


def device_count() -> int:
    """One logical CPU device per process."""
    return 1


def current_device() -> torch.device:
    """A `torch.device`, never an int: FSDP reads an int as an accelerator index."""
    return torch.device("cpu")


def set_device(device: Any) -> None:
    """Nothing to select on the CPU."""


def synchronize(device: Any = None) -> None:
    """CPU kernels are synchronous."""


def empty_cache() -> None:
    """The CPU allocator keeps no cache to release."""


def ipc_collect() -> None:
    """No inter-process memory to collect."""


def memory_allocated(device: Any = None) -> int:
    """Resident memory of this process, in bytes (the closest CPU notion of allocated memory)."""
    return psutil.Process().memory_info().rss


def max_memory_allocated(device: Any = None) -> int:
    """Resident memory of this process, in bytes; no peak is tracked on the CPU."""
    return memory_allocated()


memory_reserved = memory_allocated
max_memory_reserved = max_memory_allocated


def reset_peak_memory_stats(device: Any = None) -> None:
    """No peak statistics to reset."""


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) system memory in bytes, as `torch.cuda.mem_get_info` answers for a GPU."""
    memory = psutil.virtual_memory()
    return memory.available, memory.total


def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
    """The CPU allocator takes no memory cap."""


def get_device_name(device: Any = None) -> str:
    """Answered for verl's MFU metric, whose FLOPS table has an entry for exactly "CPU"."""
    return DEVICE_NAME


def get_rng_state(device: Any = None) -> torch.Tensor:
    """The CPU generator's state."""
    return torch.get_rng_state()


def set_rng_state(state: torch.Tensor, device: Any = None) -> None:
    """Restore the CPU generator's state."""
    torch.set_rng_state(state)


def manual_seed(seed: int) -> None:
    """Seed the CPU generator."""
    torch.manual_seed(seed)


manual_seed_all = manual_seed


def __getattr__(name: str) -> Any:
    return getattr(torch.cpu, name)
