"""examples/algorithms/best_of_n.py end to end: a user-written Algorithm picks the best prompt variant
through the real store server, a runner process and an inference server, and publishes it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from algorithm_stack import algorithm_stack

from algorithm import Task
from examples.algorithms.best_of_n import BestOfN
from lightningstore import PromptTemplate

VARIANTS = ["Say a.", "Pick a or b.", "Say b."]


@pytest.mark.slow
async def test_best_variant_is_published(warm_model: Callable[..., Path], tmp_path: Path) -> None:
    # "Say x." is answered x (p >= 0.99 after warm-up); "Pick a or b." a three times in four: only the
    # third variant solves answer-b tasks. (An even split at 120 steps, p(b) 0.94 against 0.55, let a
    # sampled 11/12 tie "Say b." once in CI, and the earlier variant wins a tie.)
    demos = [([{"role": "user", "content": "Say a."}], "a"), ([{"role": "user", "content": "Say b."}], "b")]
    demos += [([{"role": "user", "content": "Pick a or b."}], c) for c in "aaab"]
    model = warm_model(VARIANTS, demos * 4, steps=400)
    agent = "examples.algorithms.best_of_n:answer_agent"
    async with algorithm_stack(tmp_path, model, agent) as stack:
        await stack.publish_llm(model)
        root = await stack.store.add_resource_version("prompt", PromptTemplate(template="Say a."))
        tasks = [Task(task_id=f"t{i}", input={"answer": "b"}) for i in range(3)]
        best, score = await BestOfN(stack.store, tasks, VARIANTS, n=4).run()
        latest = await stack.store.get_latest_version("prompt")
        history = await stack.store.query_pointer_history("prompt", "latest")
        rollouts = await stack.store.query_rollouts()
        approved = await stack.store.get_approved_version("prompt")

    assert best.resource.template == "Say b." and score >= 0.8, (best.resource.template, score)
    assert latest.version_id == best.version_id and best.parent_id == root.version_id
    assert history[-1].reason.startswith("best of 3 variants") and history[-1].actor == "best_of_n"
    assert approved.version_id == root.version_id  # the algorithm proposes; only the gate approves
    by_set = {r.resources_id for r in rollouts}
    assert len(rollouts) == 3 * 3 * 4 and len(by_set) == 3  # every variant scored by its own rollouts
    assert all(r.status == "succeeded" for r in rollouts)
