"""Row <-> model conversion for SqlStore."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from lightningstore.attempt import Attempt
from lightningstore.resource import PointerMove, ResourceVersion
from lightningstore.reward import Reward
from lightningstore.rollout import Rollout
from lightningstore.span import Span
from lightningstore.worker import Worker


def rollout_from_row(row: sa.Row[Any]) -> Rollout:
    m = row._mapping
    return Rollout.model_validate(
        {
            "rollout_id": m["rollout_id"],
            "input": m["input"],
            "mode": m["mode"],
            "resources_id": m["resources_id"],
            "config": m["config"],
            "status": m["status"],
            "metadata": m["metadata"],
            "group_id": m["group_id"],
            "enqueue_time": m["enqueue_time"],
            "start_time": m["start_time"],
            "end_time": m["end_time"],
            "num_attempts": m["num_attempts"],
            "failure_reason": m["failure_reason"],
        }
    )


def attempt_from_row(row: sa.Row[Any]) -> Attempt:
    return Attempt.model_validate(dict(row._mapping))


def span_from_row(row: sa.Row[Any]) -> Span:
    return Span.model_validate(dict(row._mapping))


def reward_from_row(row: sa.Row[Any]) -> Reward:
    m = dict(row._mapping)
    m.pop("seq", None)
    return Reward.model_validate(m)


def version_from_row(row: sa.Row[Any]) -> ResourceVersion:
    m = dict(row._mapping)
    m.pop("seq", None)
    return ResourceVersion.model_validate(m)


def pointer_move_from_row(row: sa.Row[Any]) -> PointerMove:
    m = dict(row._mapping)
    m.pop("seq", None)
    return PointerMove.model_validate(m)


def worker_from_row(row: sa.Row[Any]) -> Worker:
    return Worker.model_validate(dict(row._mapping))
