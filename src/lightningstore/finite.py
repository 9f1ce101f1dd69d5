"""Non-finite numbers (NaN, Infinity, -Infinity) in JSON values.

JSON has no such numbers, and the JSON writers in the stack (orjson, pydantic) silently write them
as `null`. So the store refuses them in what it keeps as JSON (a rollout's input, metadata,
resources), naming the field and where inside it they sit; a span's attributes instead keep them
as the strings OTLP's JSON encoding uses ("NaN", "Infinity", "-Infinity"), since dropping a span
for one such value (a token's -inf logprob, say) would lose the rest of its telemetry.
"""

from __future__ import annotations

import math
from typing import Any

from lightningstore.errors import InvalidInputError

_PLAIN = (str, int, bool, type(None))
"""Types that are never a non-finite number and hold nothing inside (checked by exact type)."""
OTLP_STRINGS = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
"""A non-finite float as OTLP's JSON encoding writes it (by `repr` of the float)."""


Path = list[str | int]
"""Where a value sits inside another: object keys and list indexes, outermost first."""


def non_finite_path(value: Any) -> tuple[Path, float] | None:
    """Where the first NaN or infinity inside `value` sits, and the number; None if nowhere."""
    if isinstance(value, float):
        return None if math.isfinite(value) else ([], value)
    indexed = False
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list | tuple):
        try:  # a list of numbers, in one C call: the sum is finite only if every number is
            if math.isfinite(math.fsum(value)):
                return None
        except (TypeError, OverflowError):  # not all numbers, or a sum beyond a float's range
            pass
        items, indexed = enumerate(value), True
    else:
        return None
    for key, item in items:
        if type(item) in _PLAIN:
            continue
        found = non_finite_path(item)
        if found is not None:  # the path is built on the way out, only when something is found
            found[0].insert(0, key if indexed else str(key))
            return found
    return None


def refuse_non_finite(value: Any, field: str | None = None) -> None:
    """Raise InvalidInputError if `value` holds NaN or an infinity anywhere; the error names `field`,
    or, without one, the key of the object `value` that holds it."""
    found = non_finite_path(value)
    if found is None:
        return
    path, number = found
    if field is None and path and isinstance(path[0], str):
        field = path.pop(0)
    where = "".join(f"[{key}]" if isinstance(key, int) else f".{key}" for key in path).removeprefix(".")
    at = f" at {where}" if where else ""
    raise InvalidInputError(
        field or "json",
        f"holds {number!r}{at}: JSON has no NaN or Infinity (send null, or the number as a string)",
    )


def non_finite_as_strings(value: Any) -> Any:
    """`value` with every NaN or infinity inside it written as OTLP's JSON string; itself if none."""
    if non_finite_path(value) is None:
        return value
    return _as_strings(value)


def _as_strings(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else OTLP_STRINGS[repr(float(value))]
    if isinstance(value, dict):
        return {key: _as_strings(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_as_strings(item) for item in value]
    return value
