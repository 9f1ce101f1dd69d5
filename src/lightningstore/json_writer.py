"""The store's one JSON writer: what JSON cannot hold exactly is refused, not silently changed."""

from __future__ import annotations

from typing import Any

import orjson
from pydantic_core import to_jsonable_python

from lightningstore.errors import InvalidInputError
from lightningstore.finite import refuse_non_finite

JSON_INT_RANGE = "-2**63 to 2**64-1"
"""The integers a stored JSON value may hold (orjson's range; it would read larger ones back as floats)."""
_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def write_json(value: Any, field: str | None = None) -> bytes:
    """`value` as JSON; InvalidInputError naming `field` (or the object's key that holds it) for NaN,
    an infinity or an integer beyond 64 bits, which orjson would write as null or cannot write.
    Values may be given as validated models hold them (python mode): what orjson cannot encode goes
    through pydantic's JSON conversion, as `model_dump(mode="json")` would have done."""
    refuse_non_finite(value, field)
    try:
        return orjson.dumps(value, default=to_jsonable_python, option=_OPTIONS)
    except TypeError as exc:
        if "64-bit" in str(exc):
            raise InvalidInputError(
                field or "json", f"integers must fit in 64 bits ({JSON_INT_RANGE}) to be stored"
            ) from exc
        raise
