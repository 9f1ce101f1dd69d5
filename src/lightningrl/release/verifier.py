"""Canary tasks and verifiers: a verifier checks the destination (the file, the row) a task was to create."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from lightningstore import LightningStore, Rollout


@dataclass(frozen=True)
class CanaryTask:
    """One bounded task of a canary or rollback run."""

    task_id: str
    input: Any


@dataclass(frozen=True)
class Verification:
    """What the verifier found: the outcome is verified, and any harmful effect it saw."""

    verified: bool
    reason: str
    harmful: tuple[str, ...] = field(default_factory=tuple)
    source: str = "verifier"
    """"verifier" (a deterministic check of the destination), or "judge" / "human" when the outcome
    could not be checked that way: recorded with its `uncertainty`, shown as such, never counted verified."""
    uncertainty: float | None = None


Verifier = Callable[[CanaryTask, Rollout, LightningStore], Verification | Awaitable[Verification]]


async def verify(
    verifier: Verifier, task: CanaryTask, rollout: Rollout, store: LightningStore
) -> Verification:
    """Call a sync or async verifier; its exception counts as unverified, with the error as the reason."""
    try:
        result = verifier(task, rollout, store)
        if inspect.isawaitable(result):
            result = await result
    except Exception as error:  # noqa: BLE001 - a verifier's crash is an unverified outcome
        return Verification(False, f"verifier raised {type(error).__name__}: {error}")
    if not isinstance(result, Verification):
        return Verification(False, f"verifier returned {type(result).__name__}, not a Verification")
    return result
