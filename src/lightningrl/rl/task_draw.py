"""Which train tasks a step rolls out: shuffled passes, optionally round-robin over a tag's values."""

from __future__ import annotations

import random
from collections.abc import Sequence

from algorithm import Task


class TaskDraw:
    """Shuffled passes over `tasks`, `per_step` at a time; with `balance_by`, round-robin over the values
    of that tag (each value's tasks in their own shuffled passes), so no slice starves."""

    def __init__(self, tasks: Sequence[Task], per_step: int, *, balance_by: str | None, seed: object) -> None:
        self.tasks = list(tasks)
        self.per_step = per_step
        self.balance_by = balance_by
        self._slices = sorted({t.tags.get(balance_by, "") for t in self.tasks}) if balance_by else [""]
        self._queues: dict[str, list[Task]] = {}
        self._turn = 0
        self.reseed(seed)

    def reseed(self, seed: object) -> None:
        """Draw in another (still seeded) order from now on, e.g. when a run resumes."""
        self._rng = random.Random(str(seed) if not isinstance(seed, int) else seed)

    def next(self) -> list[Task]:
        out: list[Task] = []
        key = self.balance_by
        while len(out) < self.per_step:
            name = self._slices[self._turn % len(self._slices)]
            self._turn += 1
            queue = self._queues.setdefault(name, [])
            if not queue:
                queue.extend(t for t in self.tasks if not key or t.tags.get(key, "") == name)
                self._rng.shuffle(queue)
            out.append(queue.pop())
        return out
