"""Real checkpoints: importing a GGUF file as a Hugging Face directory, checking any directory, and
exporting a trained version as one."""

from __future__ import annotations

import os
from pathlib import Path

from lightningrl.models.check import CheckpointError, CheckpointReport, check_checkpoint
from lightningrl.models.export import EXPORT_MANIFEST, export_checkpoint, export_version
from lightningrl.models.gguf_import import (
    KNOWN_SOURCES,
    ImportRecord,
    ModelImportError,
    import_model,
    import_record,
)

__all__ = [
    "EXPORT_MANIFEST",
    "KNOWN_SOURCES",
    "CheckpointError",
    "CheckpointReport",
    "ImportRecord",
    "ModelImportError",
    "cached_model",
    "check_checkpoint",
    "export_checkpoint",
    "export_version",
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
