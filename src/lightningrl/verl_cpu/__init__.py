"""verl platform plugin that runs verl's actor update on a machine without an accelerator.

verl loads it by itself: `import verl` loads every `verl.plugins` entry point (this package is one,
see pyproject.toml), and `VERL_USE_EXTERNAL_MODULES=lightningrl.verl_cpu` loads it too. Importing it
before verl works as well. It only registers: the "cpu" platform (offered to verl's auto-detection
after verl's own platforms, and only when torch sees no GPU/NPU, or `LIGHTNINGRL_VERL_CPU=1`) and
the FSDP2 engines for the "cpu" device. On GPU machines nothing changes.
"""

from __future__ import annotations

from lightningrl.verl_cpu.platform import FORCE_ENV, PLATFORM_NAME, CpuPlatform, cpu_wanted

__all__ = ["FORCE_ENV", "PLATFORM_NAME", "CpuPlatform", "activate", "cpu_wanted", "verl_device_name"]


def activate() -> bool:
    """Register the CPU platform and engines when this process should use them; True if so."""
    from verl.plugin.platform import PlatformRegistry

    from lightningrl.verl_cpu.engines import install_engine_hook

    if PlatformRegistry.get(PLATFORM_NAME) is None:
        PlatformRegistry.register(platform=PLATFORM_NAME)(CpuPlatform)
    if not cpu_wanted():
        return False
    install_engine_hook()
    return True


def verl_device_name() -> str:
    """The device verl resolved for this process ("cpu" when this plugin is in effect)."""
    from verl.utils.device import get_device_name

    return get_device_name()


activate()
