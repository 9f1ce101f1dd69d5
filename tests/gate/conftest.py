"""The gate tests share the release-gate example's evidence writers (`records`) and canary (`ledger`)."""

from __future__ import annotations

import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "release_gate"
if str(EXAMPLE) not in sys.path:
    sys.path.insert(0, str(EXAMPLE))
