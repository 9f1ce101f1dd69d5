"""Registering verl's FSDP2 engines for the "cpu" device, as soon as verl's engine package loads.

verl registers its FSDP engines for "cuda" and "npu" only. Importing `verl.workers.engine` costs
seconds, so the plugin does not import it; a one-shot import hook adds the "cpu" entries right after
verl itself loads that package, in every process (Ray workers included) where the plugin is active.
That import also warns about every optional engine (megatron, mindspeed, ...) that is not installed:
the hook drops those warnings, and only those.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from lightningrl.verl_cpu.platform import PLATFORM_NAME

ENGINE_PACKAGE = "verl.workers.engine"
VERL_ENGINE_WARNING = r"(torchtitan|veomni|automodel|mindspeed|megatron) engine is not available"
# FSDP1 passes sync_module_states=True, which torch rejects for CPU parameters: fsdp2 only.
CPU_BACKENDS = ("fsdp2",)


def register_cpu_engines() -> None:
    """Add the "cpu" key for verl's FSDP language- and value-model engines (idempotent)."""
    from verl.workers.engine import EngineRegistry
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead, FSDPEngineWithValueHead

    for model_type, engine_cls in (
        ("language_model", FSDPEngineWithLMHead),
        ("value_model", FSDPEngineWithValueHead),
    ):
        by_backend = EngineRegistry._engines.get(model_type, {})
        backends = [b for b in CPU_BACKENDS if PLATFORM_NAME not in by_backend.get(b, {})]
        if backends:
            EngineRegistry.register(model_type=model_type, backend=backends, device=PLATFORM_NAME)(engine_cls)


class _RegisterAfterImport(importlib.abc.MetaPathFinder):
    """Finds `verl.workers.engine` through the normal path finder and registers after it executes."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != ENGINE_PACKAGE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        loader: Any = spec.loader
        exec_module = loader.exec_module

        def exec_then_register(module: ModuleType) -> None:
            with no_verl_engine_warnings():
                exec_module(module)
            register_cpu_engines()

        loader.exec_module = exec_then_register
        return spec


def install_engine_hook() -> None:
    """Register now if verl's engines are loaded, else once they load."""
    if ENGINE_PACKAGE in sys.modules:
        register_cpu_engines()
        return
    if not any(isinstance(finder, _RegisterAfterImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _RegisterAfterImport())


@contextmanager
def no_verl_engine_warnings() -> Iterator[None]:
    """Import verl's engine package inside this block: its warnings about optional engines are dropped.

    The package imports once per process, so the block is needed only around that first import; any
    other warning raised inside still shows."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=VERL_ENGINE_WARNING, category=UserWarning)
        yield


def import_verl_engines() -> ModuleType:
    """`verl.workers.engine`, imported without its warnings about optional engines not installed."""
    with no_verl_engine_warnings():
        return importlib.import_module(ENGINE_PACKAGE)
