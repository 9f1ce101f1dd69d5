"""Span: an OpenTelemetry span recorded during an attempt, with a store-issued sequence number."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from lightningstore.finite import non_finite_as_strings

Attributes = Annotated[dict[str, Any], AfterValidator(non_finite_as_strings)]
"""Span attributes; a NaN or infinity in them is kept as OTLP's JSON string ("NaN", "-Infinity")."""
Seconds = Annotated[float, Field(allow_inf_nan=False)]


class SpanStatus(BaseModel):
    status_code: str = "UNSET"
    """UNSET, OK or ERROR, as in OpenTelemetry."""
    description: str | None = None


class SpanEvent(BaseModel):
    name: str
    timestamp: Seconds | None = None
    attributes: Attributes = Field(default_factory=dict)


class SpanIn(BaseModel):
    """A span as a writer sends it; the store adds `sequence_id`."""

    model_config = ConfigDict(extra="forbid")

    rollout_id: str = Field(min_length=1)
    attempt_id: str = Field(min_length=1)
    trace_id: str = Field(min_length=1, max_length=64)
    span_id: str = Field(min_length=1, max_length=64)
    parent_id: str | None = Field(default=None, max_length=64)
    name: str = Field(min_length=1, max_length=500)
    kind: str = "INTERNAL"
    start_time: Seconds | None = None
    end_time: Seconds | None = None
    attributes: Attributes = Field(default_factory=dict)
    events: list[SpanEvent] = Field(default_factory=list)
    status: SpanStatus = Field(default_factory=SpanStatus)
    resource: Attributes = Field(default_factory=dict)
    """Attributes of the OpenTelemetry resource that produced the span."""


class Span(SpanIn):
    model_config = ConfigDict(extra="ignore")

    # As stored: JSON holds no NaN or infinity, so the attributes need no second look when read back.
    attributes: dict[str, Any] = Field(default_factory=dict)
    resource: dict[str, Any] = Field(default_factory=dict)

    sequence_id: int
    """Store-issued, strictly increasing across the whole store: the order spans arrived in."""
