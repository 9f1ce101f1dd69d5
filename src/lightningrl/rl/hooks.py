"""What a training algorithm asks of the world around it, passed in as hooks (the release gate's are in
`lightningrl.release`: `gate_stop_check`, `file_plan_id`; `fit` installs them)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

StopCheck = Callable[[Any], Awaitable[str | None]]
"""Asked after each step (after publish) with the algorithm: a reason to stop before the next step, or None."""

PlanFiler = Callable[[Any, str, str, dict[str, Any]], Awaitable[str]]
"""Called once before the first step with (the algorithm, the trained resource's name, the start version
id, the algorithm's settings): files the run's training plan and returns its id, which every version the
run publishes names. Without one, no plan is filed and the versions name none."""
