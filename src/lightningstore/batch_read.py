"""Batch reads of spans and rewards: the argument checks every store shares, and reads of any size."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from lightningstore.data.reward import Reward
from lightningstore.data.span import Span
from lightningstore.errors import InvalidInputError
from lightningstore.store import MAX_READ_ATTRIBUTES, MAX_READ_IDS, LightningStore

MAX_ATTRIBUTE_KEY_LENGTH = 200


def _shown(value: Any) -> str:
    return repr(value)[:100]


def distinct_ids(rollout_ids: Any) -> list[str]:
    """The distinct ids of a batch read, first-seen order; InvalidInputError unless a list of at most
    MAX_READ_IDS strings."""
    if isinstance(rollout_ids, str | bytes | Mapping) or not isinstance(rollout_ids, Iterable):
        raise InvalidInputError(
            "rollout_ids",
            f"must be a list of rollout ids, got {type(rollout_ids).__name__} {_shown(rollout_ids)}",
        )
    given = list(rollout_ids)
    if len(given) > MAX_READ_IDS:
        raise InvalidInputError("rollout_ids", f"at most {MAX_READ_IDS} ids per call, got {len(given)}")
    for rollout_id in given:
        if not isinstance(rollout_id, str):
            raise InvalidInputError(
                "rollout_ids", f"ids must be strings, got {type(rollout_id).__name__} {_shown(rollout_id)}"
            )
    return list(dict.fromkeys(given))


def checked_attempt(attempt: Any) -> None:
    """InvalidInputError unless `attempt` is "latest" or None (a batch spans many rollouts' attempts)."""
    if attempt is not None and attempt != "latest":
        raise InvalidInputError("attempt", f"must be 'latest' or None, got {_shown(attempt)}")


def checked_attributes(attributes: Any) -> tuple[str, ...] | None:
    """The projection's attribute keys (None: every attribute); InvalidInputError for a bad one."""
    if attributes is None:
        return None
    if isinstance(attributes, str | bytes | Mapping) or not isinstance(attributes, Iterable):
        raise InvalidInputError("attributes", f"must be a list of attribute keys, got {_shown(attributes)}")
    keys = tuple(dict.fromkeys(attributes))
    if len(keys) > MAX_READ_ATTRIBUTES:
        raise InvalidInputError("attributes", f"at most {MAX_READ_ATTRIBUTES} keys, got {len(keys)}")
    for key in keys:
        # The key becomes a quoted JSON path in SQLite: quotes, backslashes and control characters
        # would break out of it.
        if (
            not isinstance(key, str)
            or not 0 < len(key) <= MAX_ATTRIBUTE_KEY_LENGTH
            or any(c in '"\\' or ord(c) < 32 or ord(c) == 127 for c in key)
        ):
            raise InvalidInputError(
                "attributes",
                f"keys must be 1-{MAX_ATTRIBUTE_KEY_LENGTH} characters without quotes, backslashes or "
                f"control characters, got {_shown(key)}",
            )
    return keys


def _chunks(rollout_ids: Iterable[str]) -> list[list[str]]:
    ids = list(dict.fromkeys(rollout_ids))
    return [ids[i : i + MAX_READ_IDS] for i in range(0, len(ids), MAX_READ_IDS)]


async def spans_of_rollouts(
    store: LightningStore,
    rollout_ids: Iterable[str],
    attempt: Literal["latest"] | None = "latest",
    *,
    attributes: Sequence[str] | None = None,
) -> dict[str, list[Span]]:
    """`store.query_spans_many` for any number of ids: one call per MAX_READ_IDS distinct ids."""
    out: dict[str, list[Span]] = {}
    for chunk in _chunks(rollout_ids):
        out.update(await store.query_spans_many(chunk, attempt, attributes=attributes))
    return out


async def rewards_of_rollouts(store: LightningStore, rollout_ids: Iterable[str]) -> dict[str, list[Reward]]:
    """`store.query_rewards_many` for any number of ids: one call per MAX_READ_IDS distinct ids."""
    out: dict[str, list[Reward]] = {}
    for chunk in _chunks(rollout_ids):
        out.update(await store.query_rewards_many(chunk))
    return out
