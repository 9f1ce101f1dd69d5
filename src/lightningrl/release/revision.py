"""The code revision a receipt records: the git commit when there is one, else the package version."""

from __future__ import annotations

import subprocess
from importlib import metadata
from pathlib import Path


def code_revision(path: Path | None = None) -> str:
    """`git:<sha>[+dirty]` of the checkout holding this package, else `lightningrl==<version>`."""
    where = path or Path(__file__).resolve().parent
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
        return f"git:{sha}{'+dirty' if dirty else ''}"
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        return f"lightningrl=={metadata.version('lightningrl')}"
    except metadata.PackageNotFoundError:
        return "unknown"
