"""Row -> model conversion for SqlStore; a row is a mapping of column name to value."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lightningstore.data.attempt import Attempt
from lightningstore.data.resource import PointerMove, ResourceVersion
from lightningstore.data.reward import Reward
from lightningstore.data.rollout import Rollout
from lightningstore.data.span import Span
from lightningstore.data.worker import Worker

Row = Mapping[str, Any]

_ROLLOUT_FIELDS = tuple(Rollout.model_fields)
_NOT_A_FIELD = ("seq",)


def _fields(row: Row, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    return {key: value for key, value in row.items() if key not in drop}


def rollout_from_row(row: Row) -> Rollout:
    return Rollout.model_validate({name: row[name] for name in _ROLLOUT_FIELDS})


def attempt_from_row(row: Row) -> Attempt:
    return Attempt.model_validate(row)


def span_from_row(row: Row) -> Span:
    return Span.model_validate(row)


def reward_from_row(row: Row) -> Reward:
    return Reward.model_validate(_fields(row, _NOT_A_FIELD))


def version_from_row(row: Row) -> ResourceVersion:
    return ResourceVersion.model_validate(_fields(row, _NOT_A_FIELD))


def pointer_move_from_row(row: Row) -> PointerMove:
    return PointerMove.model_validate(_fields(row, _NOT_A_FIELD))


def worker_from_row(row: Row) -> Worker:
    return Worker.model_validate(row)
