"""What an agent key may write within its attempt: no LLM-call training data, and nothing once the
attempt has ended. Role tokens (runner, admin) are not limited here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from lightningstore.auth.tokens import Caller, Role
from lightningstore.errors import NotFoundError, PermissionDeniedError
from lightningstore.semconv import LLM_TRAINING_ATTRIBUTES

if TYPE_CHECKING:
    from lightningstore.data.attempt import Attempt
    from lightningstore.data.span import SpanIn
    from lightningstore.store import LightningStore


def refuse_training_attributes(caller: Caller, spans: Sequence[SpanIn]) -> None:
    """Raise PermissionDeniedError (403) when an agent key sends a span carrying a training attribute.

    Credit assignment trains on an LLM-call span's token ids, logprobs and `trainable` flag
    (`semconv.LLM_TRAINING_ATTRIBUTES`), which the proxy records from what the model served: one an
    agent wrote would be training data of its own choosing that nothing tells apart from the proxy's.
    """
    if caller.role != Role.AGENT:
        return
    for span in spans:
        reserved = LLM_TRAINING_ATTRIBUTES.intersection(span.attributes)
        if reserved:
            raise PermissionDeniedError(
                f"an agent key may not write the attribute {', '.join(sorted(reserved))} (span "
                f"{span.name!r}, span_id {span.span_id!r}): LLM calls' token ids, logprobs and trainable "
                "flag are recorded by the model proxy; call the model through the proxy"
            )


async def require_live_attempt(store: LightningStore, caller: Caller) -> None:
    """Raise PermissionDeniedError (403) when the caller is an agent key whose attempt has ended.

    An agent key is valid while its attempt is preparing, running or unresponsive (a late span
    revives it); once the attempt succeeded, failed or timed out, nothing more is its agent's to say.
    An attempt that is not found is left to the write itself to report.
    """
    rollout_id, attempt_id = caller.rollout_id, caller.attempt_id
    if caller.role != Role.AGENT or rollout_id is None or attempt_id is None:
        return
    attempt = await _find_attempt(store, rollout_id, attempt_id)
    if attempt is not None and attempt.status.terminal:
        raise PermissionDeniedError(
            f"the agent key of attempt {attempt_id!r} of rollout {rollout_id!r} is no longer valid: "
            f"attempt {attempt_id!r} ended ({attempt.status.value})"
        )


async def _find_attempt(store: LightningStore, rollout_id: str, attempt_id: str) -> Attempt | None:
    # Writes come almost always from the rollout's latest attempt: one row, where listing them all
    # would also read the rollout.
    try:
        latest = await store.get_latest_attempt(rollout_id)
        if latest is not None and latest.attempt_id == attempt_id:
            return latest
        return next((a for a in await store.query_attempts(rollout_id) if a.attempt_id == attempt_id), None)
    except NotFoundError:
        return None
