"""Rollout: one task run against a resource set, and its config."""

from __future__ import annotations

from typing import Any, TypedDict, Unpack

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from lightningstore.data.status import AttemptStatus, RolloutMode, RolloutStatus
from lightningstore.errors import InvalidInputError
from lightningstore.finite import refuse_non_finite


class RolloutConfig(BaseModel):
    """How long a rollout may run, how silent it may be, and which failures are retried."""

    model_config = ConfigDict(extra="forbid")

    timeout_seconds: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    unresponsive_seconds: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    max_attempts: int = Field(default=1, ge=1, le=100)
    retry_on: list[AttemptStatus] = Field(
        default_factory=lambda: [AttemptStatus.TIMEOUT, AttemptStatus.UNRESPONSIVE]
    )

    @field_validator("retry_on")
    @classmethod
    def _only_failures(cls, value: list[AttemptStatus]) -> list[AttemptStatus]:
        for status in value:
            if not status.is_failure:
                raise ValueError(
                    f"retry_on may hold only failure kinds (failed, timeout, unresponsive), got {status.value!r}"
                )
        return value


class RolloutOptions(TypedDict, total=False):
    """The keyword arguments `enqueue_rollout` and `start_rollout` share; an absent or None one is
    the default: mode `train`, no resource set, the default config, no metadata, no group."""

    mode: RolloutMode | str
    resources_id: str | None
    config: RolloutConfig | None
    metadata: dict[str, Any] | None
    group_id: str | None


class RolloutRequest(BaseModel):
    """What a caller gives to enqueue a rollout; `rollout_id` makes the enqueue idempotent."""

    model_config = ConfigDict(extra="forbid")

    input: Any
    mode: RolloutMode = RolloutMode.TRAIN
    resources_id: str | None = None
    config: RolloutConfig = Field(default_factory=RolloutConfig)
    metadata: dict[str, Any] = Field(default_factory=dict)
    group_id: str | None = Field(default=None, max_length=200)
    rollout_id: str | None = Field(default=None, min_length=1, max_length=200)

    @classmethod
    def of(
        cls, input: Any, *, rollout_id: str | None = None, **options: Unpack[RolloutOptions]
    ) -> RolloutRequest:
        """The request `enqueue_rollout`'s arguments describe (None: the default config, no metadata);
        InvalidInputError naming the first field that does not fit."""
        unknown = sorted(set(options) - RolloutOptions.__optional_keys__)
        if unknown:
            raise TypeError(f"unexpected keyword argument {unknown[0]!r}")
        mode = options.get("mode", RolloutMode.TRAIN)
        config = options.get("config")
        metadata = options.get("metadata")
        try:
            mode = RolloutMode(mode)
        except ValueError:
            modes = ", ".join(m.value for m in RolloutMode)
            raise InvalidInputError("mode", f"must be one of {modes}, got {mode!r}") from None
        try:
            return cls(
                input=input,
                mode=mode,
                resources_id=options.get("resources_id"),
                config=config if config is not None else RolloutConfig(),
                metadata=metadata if metadata is not None else {},
                group_id=options.get("group_id"),
                rollout_id=rollout_id,
            )
        except ValidationError as exc:
            error = exc.errors()[0]
            field = ".".join(str(part) for part in error["loc"]) or "request"
            given = repr(error.get("input"))
            given = given if len(given) <= 80 else given[:77] + "..."
            raise InvalidInputError(field, f"{error['msg']}, got {given}") from None

    def check_finite(self) -> None:
        """InvalidInputError if the input or metadata holds NaN or an infinity (JSON would say null)."""
        refuse_non_finite(self.input, "input")
        refuse_non_finite(self.metadata, "metadata")


class Rollout(BaseModel):
    rollout_id: str
    input: Any
    mode: RolloutMode
    resources_id: str | None = None
    config: RolloutConfig
    status: RolloutStatus
    metadata: dict[str, Any] = Field(default_factory=dict)
    group_id: str | None = None
    enqueue_time: float
    start_time: float | None = None
    end_time: float | None = None
    num_attempts: int = 0
    failure_reason: str | None = None
