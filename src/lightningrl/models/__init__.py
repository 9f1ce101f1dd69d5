"""Real checkpoints: importing a GGUF file as a Hugging Face directory, and checking any directory."""

from __future__ import annotations

import os
from pathlib import Path

from lightningrl.models.check import CheckpointError, CheckpointReport, check_checkpoint
from lightningrl.models.gguf_import import (
    KNOWN_SOURCES,
    ImportRecord,
    ModelImportError,
    import_model,
    import_record,
)

__all__ = [
    "KNOWN_SOURCES",
    "CheckpointError",
    "CheckpointReport",
    "ImportRecord",
    "ModelImportError",
    "cached_model",
    "check_checkpoint",
    "import_model",
    "import_record",
    "model_cache_dir",
]


def model_cache_dir() -> Path:
    """Where imported models are kept between runs: $LIGHTNINGRL_MODEL_CACHE, else ~/.cache/lightningrl/models."""
    configured = os.environ.get("LIGHTNINGRL_MODEL_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "lightningrl" / "models"


def cached_model(source: str = "smollm2", *, dtype: str = "float32") -> Path:
    """The imported directory of `source` in the cache, importing it the first time (about a minute)."""
    name = Path(source).stem if source not in KNOWN_SOURCES else source
    return import_model(source, model_cache_dir() / f"{name}-{dtype}", dtype=dtype, reuse=True)
