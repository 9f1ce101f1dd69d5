"""The update receipt: immutable release evidence joining a candidate version to what produced it."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable
from typing import Any, ClassVar, Self

import orjson
from pydantic import BaseModel, ConfigDict, Field


def digest(value: Any) -> str:
    """SHA-256 of a JSON value with sorted keys (the identity of a record's content)."""
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()


def content_id(prefix: str, body: BaseModel) -> str:
    """`prefix-` and the start of the body's digest: an id that changes with any edit of the body."""
    return f"{prefix}-" + digest(body.model_dump(mode="json"))[:24]


class Filed(BaseModel):
    """What filing adds to a content-addressed body: its id, who filed it and when.

    A record type names its body type, its id field and the id's prefix; `file` builds the record.
    """

    body_type: ClassVar[type[BaseModel]]
    id_field: ClassVar[str]
    id_prefix: ClassVar[str]

    created_by: str = "unknown"
    create_time: float

    @classmethod
    def file(cls, body: BaseModel, *, created_by: str) -> Self:
        """The record of `body` (validated again as the body type), filed now by `created_by`."""
        body = cls.body_type.model_validate(body.model_dump())
        ident = content_id(cls.id_prefix, body)
        return cls(
            **body.model_dump(), **{cls.id_field: ident}, created_by=created_by, create_time=time.time()
        )

    def body(self) -> Any:
        """The filed body alone (an instance of `body_type`), without what filing added."""
        return self.body_type.model_validate(self.model_dump(include=set(self.body_type.model_fields)))


class DataSnapshot(BaseModel):
    """A set of rollouts named by the SHA-256 of its sorted rollout ids, and how it was selected."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    selector: str
    """How the set is chosen, e.g. "mode=train bound to ver-..."."""
    count: int = Field(ge=0)
    sha256: str

    @classmethod
    def of(cls, selector: str, rollout_ids: Iterable[str]) -> DataSnapshot:
        ids = sorted(set(rollout_ids))
        return cls(selector=selector, count=len(ids), sha256=digest(ids))


class EvaluatorRef(BaseModel):
    """The evaluator a receipt was judged by: its registered name and version."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    version: str = Field(min_length=1, max_length=200)
    reward_name: str = "reward"

    def __str__(self) -> str:
        return f"{self.name}@{self.version}"


class PlannedSetup(BaseModel):
    """What a training plan fixes and each receipt of its run carries unchanged (plan.PLAN_FIELDS)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    evaluator: EvaluatorRef | None = None
    algorithm_config: dict[str, Any] = Field(default_factory=dict)
    code_revision: str = "unknown"
    scope: str = "default"
    """Where the release applies (a deployment, a tenant, a traffic slice)."""
    retry_budget: int = Field(default=0, ge=0)
    """Unexpected retries the train and holdout data may contain."""
    span_coverage: list[str] = Field(default_factory=list)
    """Span kinds every finished rollout must have (agent, llm, reward, tool, step)."""


class ReceiptBody(PlannedSetup):
    """Everything a receipt pins; its digest is the receipt id."""

    resource_name: str = Field(min_length=1, max_length=200)
    candidate_version_id: str = Field(min_length=1, max_length=64)
    parent_version_id: str | None = Field(default=None, max_length=64)
    """The candidate's exact parent (None when the candidate has none: the gate then holds)."""
    train: DataSnapshot
    holdout: DataSnapshot
    plan_id: str | None = Field(default=None, max_length=64)
    """The training plan filed before training (its setup fields are copied from it, never changed)."""


class UpdateReceipt(ReceiptBody, Filed):
    """A stored receipt: `receipt_id` is the digest of its body, so an edit is a different receipt."""

    body_type = ReceiptBody
    id_field = "receipt_id"
    id_prefix = "rcpt"
    receipt_id: str
