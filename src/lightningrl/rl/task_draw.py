"""Which train tasks a step rolls out: shuffled passes, optionally the same number from each of a tag's values."""

from __future__ import annotations

import random
from collections.abc import Sequence

from algorithm import Task


class TaskDraw:
    """Shuffled passes over `tasks`, `per_step` at a time. With `balance_by`, every step holds
    `per_slice` tasks of each value of that tag (each value's tasks in their own shuffled passes), so no
    slice starves or dominates a batch; `per_step` is then the requested count rounded UP to a multiple
    of the number of values (4 tasks over 3 values draw 6: 2, 2, 2), decided once here."""

    def __init__(self, tasks: Sequence[Task], per_step: int, *, balance_by: str | None, seed: object) -> None:
        if per_step < 1:
            raise ValueError(f"per_step must be >= 1, got {per_step!r}")
        if not tasks:
            raise ValueError("tasks must not be empty")
        self.tasks = list(tasks)
        self.balance_by = balance_by
        self.requested = per_step
        """`per_step` as asked for (before rounding up to a multiple of the slices)."""
        self._members: dict[str, list[Task]] = {}
        for task in self.tasks:
            self._members.setdefault(self.slice_of(task), []).append(task)
        self.slices = sorted(self._members)
        """The values of `balance_by` the tasks carry ("" for a task without the tag); [""] without it."""
        self.per_slice = -(-per_step // len(self.slices))
        """Tasks of each slice in every step's batch."""
        self.per_step = self.per_slice * len(self.slices)
        """Tasks in every step's batch."""
        self._queues: dict[str, list[Task]] = {}
        self.reseed(seed)

    def reseed(self, seed: object) -> None:
        """Draw in another (still seeded) order from now on, e.g. when a run resumes."""
        self._rng = random.Random(str(seed) if not isinstance(seed, int) else seed)

    def slice_of(self, task: Task) -> str:
        """The slice `task` belongs to: its `balance_by` tag ("" without one or without `balance_by`)."""
        return task.tags.get(self.balance_by, "") if self.balance_by else ""

    def label(self, name: str) -> str:
        """A slice as metrics name it (`op=plus`), like `train/success[op=plus]`."""
        return f"{self.balance_by}={name}"

    @property
    def rounding_note(self) -> str | None:
        """A line saying that `per_step` was rounded up, or None when it was not."""
        if self.per_step == self.requested:
            return None
        return (
            f"balance_by={self.balance_by!r}: tasks_per_step {self.requested} -> {self.per_step} "
            f"({self.per_slice} of each of {len(self.slices)} values)"
        )

    def next(self) -> list[Task]:
        """One step's tasks: `per_slice` of every slice, interleaved slice by slice."""
        columns = [self.draw(name, self.per_slice) for name in self.slices]
        return [task for row in zip(*columns, strict=True) for task in row]

    def draw(self, name: str, count: int) -> list[Task]:
        """`count` tasks of slice `name`, continuing its shuffled passes (a pass ends, a new one begins)."""
        if name not in self._members:
            raise ValueError(f"no train task is in slice {name!r}; slices: {self.slices}")
        queue = self._queues.setdefault(name, [])
        out: list[Task] = []
        for _ in range(count):
            if not queue:
                queue.extend(self._members[name])
                self._rng.shuffle(queue)
            out.append(queue.pop())
        return out
