"""Prove with real rollouts that production runners follow `approved`: the LLM spans name the version served."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from lightningrl.release.bounded_run import bounded_run, succeeded
from lightningrl.release.verifier import CanaryTask
from lightningstore import LightningStore, spans_of_rollouts
from lightningstore.gate import CanaryLimits
from lightningstore.semconv import LLM_RESOURCE_VERSION
from runner import LitAgent


@dataclass(frozen=True)
class RoutingProof:
    """Which versions served the LLM calls of a bounded production run."""

    expected: str
    served: dict[str, int]
    """version id -> LLM calls it served."""
    finished: int
    planned: int

    @property
    def ok(self) -> bool:
        return self.finished == self.planned and set(self.served) == {self.expected}


async def production_run(
    store: LightningStore,
    agent: LitAgent | Callable[..., Any],
    tasks: Sequence[CanaryTask],
    *,
    expected_version_id: str,
    proxy_url: str,
    limits: CanaryLimits | None = None,
    workers: int = 2,
    agent_key_secret: str | None = None,
) -> RoutingProof:
    """Run the tasks as production rollouts (no resources_id, production runners) through the proxy and
    report which version served each LLM call; `ok` when only `expected_version_id` did."""
    limits = limits or CanaryLimits(max_tasks=len(tasks))
    run = await bounded_run(
        store,
        agent,
        tasks,
        limits,
        tag="routing",
        resources_id=None,
        production=True,
        workers=workers,
        proxy_url=proxy_url,
        agent_key_secret=agent_key_secret,
    )
    served: Counter[str] = Counter()
    ids = [r.rollout_id for r in run.rollouts.values()]
    spans = await spans_of_rollouts(store, ids, None, attributes=[LLM_RESOURCE_VERSION])
    for rollout_spans in spans.values():
        for span in rollout_spans:
            if LLM_RESOURCE_VERSION in span.attributes:
                served[str(span.attributes[LLM_RESOURCE_VERSION])] += 1
    finished = sum(1 for r in run.rollouts.values() if succeeded(r))
    return RoutingProof(expected_version_id, dict(served), finished, min(len(tasks), limits.max_tasks))
