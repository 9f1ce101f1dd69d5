"""The hostile-agent suite: an agent under RL tries to reach the training signal; each try is refused.

Shared fixtures for tests/security/ live here (add to this file; do not replace it)."""

from __future__ import annotations

from live_model import inference_url, tiny_model
from live_model import serve_in_thread as serve_in_thread

__all__ = ["inference_url", "serve_in_thread", "tiny_model"]
