"""UNSET: "not given" in partial updates, distinct from None ("set to nothing")."""

from __future__ import annotations

from enum import Enum
from typing import Final, Literal


class _Unset(Enum):
    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Final = _Unset.UNSET
Unset = Literal[_Unset.UNSET]
