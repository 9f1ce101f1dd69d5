"""Counts: a dataclass of numbers that adds field by field, so per-rollout reports sum into a total."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Self


@dataclass
class Counts:
    """Base of a dataclass whose every field is a number: `a + b` adds them field by field."""

    def __add__(self, other: Self) -> Self:
        if type(other) is not type(self):
            return NotImplemented
        return type(self)(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})
