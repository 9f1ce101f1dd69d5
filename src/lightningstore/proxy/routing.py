"""Sticky routing: a rollout's calls go to one endpoint (prefix-cache reuse), chosen by SHA-256."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence


def endpoint_order(rollout_id: str, endpoints: Sequence[str]) -> list[str]:
    """The endpoints in the rollout's preference order: first is its home, the rest are fail-overs.

    Rendezvous hashing: each endpoint scores SHA-256(rollout_id, endpoint); adding or removing an
    endpoint moves only the rollouts whose home it was.
    """

    def score(endpoint: str) -> bytes:
        return hashlib.sha256(f"{rollout_id}\n{endpoint}".encode()).digest()

    return sorted(endpoints, key=score, reverse=True)
