"""APO end to end: 2 rounds, beam 2, through the store server, a runner process and an inference server,
with SmolLM2 (served by our inference server) as the optimizer LLM; a failing or useless optimizer
leaves the prompt in place with the reason recorded."""

from __future__ import annotations

from pathlib import Path

import pytest
from algorithm_stack import algorithm_stack
from toy_ab import warm_ab_model

from algorithm import Task
from lightningrl.algorithms.apo import APO, CRITIQUE_SPAN, EDIT_SPAN, APOConfig
from lightningrl.fitting.local_stack import serve_app
from lightningrl.models import cached_model
from lightningrl.release import build_receipt, check_receipt
from lightningrl.serving import create_app
from lightningstore import PromptTemplate
from lightningstore.gate import gate_records
from lightningstore.server.run import free_port

AGENT = "examples.algorithms.best_of_n:answer_agent"  # the docs example's agent: reads its prompt resource
TRAIN = [Task(task_id=f"t{i}", input={"prompt": p, "answer": "b"}) for i, p in enumerate(["Say a or b."])]
VAL = [Task(task_id=f"v{i}", input={"prompt": p, "answer": "b"}) for i, p in enumerate(["Pick a or b."])]


@pytest.mark.slow
async def test_two_rounds_beam_two_with_smollm2_as_the_optimizer(tmp_path: Path) -> None:
    model = warm_ab_model(tmp_path / "toy")
    optimizer = create_app(cached_model("smollm2"), served_model_name="smollm2", cpu_threads=1)
    async with (
        serve_app(optimizer) as optimizer_url,
        algorithm_stack(tmp_path, model, AGENT, model="toy") as stack,
    ):
        await stack.publish_llm(model, model="toy")
        start = await stack.store.add_resource_version("prompt", PromptTemplate(template="{prompt}"))
        config = APOConfig(
            optimizer_model="openai/smollm2", optimizer_base_url=f"{optimizer_url}/v1", rounds=2, beam=2,
            rollouts_per_task=4, optimizer_max_tokens=96, step_timeout=240,
        )  # fmt: skip
        result = await APO(stack.store, TRAIN, VAL, config).run()
        latest = await stack.store.get_latest_version("prompt")
        rollouts = await stack.store.query_rollouts()
        spans = [s for r in rollouts for s in await stack.store.query_spans(r.rollout_id)]
        report = None
        if result.best.version.version_id != start.version_id:
            gate = gate_records(stack.store)
            receipt = await build_receipt(stack.store, gate, result.best.version.version_id)
            report = await check_receipt(stack.store, gate, receipt.receipt_id)

    # round 1 proposes from the start prompt, round 2 from each prompt of the beam (start + at most one)
    proposals = 1 + min(2, 1 + sum(c.round == 1 for c in result.candidates))
    assert len(result.candidates) + len(result.notes) == proposals, (result.candidates, result.notes)
    critiques = [s for s in spans if s.name == CRITIQUE_SPAN]
    edits = [s for s in spans if s.name == EDIT_SPAN]
    assert critiques and all(s.attributes["lightningrl.apo.text"] for s in critiques + edits)
    assert len(edits) == len(result.candidates) + sum("no usable edit" in n for n in result.notes)
    val_sets = {}
    for r in rollouts:
        if r.mode == "val":
            val_sets[r.resources_id] = val_sets.get(r.resources_id, 0) + 1
    assert len(val_sets) == 1 + len(result.candidates)  # every prompt scored by rollouts of its own
    assert all(count == len(VAL) * 4 for count in val_sets.values())
    for candidate in result.candidates:
        assert candidate.version.created_by == "apo" and candidate.version.parent_id is not None
    assert latest.version_id == result.best.version.version_id
    if report is not None:
        assert report.verdict  # the gate judged the candidate (PROMOTE TO BOUNDED CANARY or HOLD)
    print(
        "APO",
        result.start.score,
        [(c.version.resource.template, c.score) for c in result.candidates],
        result.notes,
    )


@pytest.mark.slow
async def test_a_failing_or_useless_optimizer_leaves_the_prompt_in_place(tmp_path: Path) -> None:
    model = warm_ab_model(tmp_path / "toy")
    async with algorithm_stack(tmp_path, model, AGENT, model="toy") as stack:
        await stack.publish_llm(model, model="toy")
        start = await stack.store.add_resource_version("prompt", PromptTemplate(template="{prompt}"))
        down = APOConfig(optimizer_model="openai/none", optimizer_base_url=f"http://127.0.0.1:{free_port()}/v1",
                         rounds=1, beam=1, rollouts_per_task=16, optimizer_timeout=10, step_timeout=240)  # fmt: skip
        failed = await APO(stack.store, TRAIN, VAL, down).run()
        # The toy model answers "a" or "b": never a template that keeps {prompt}.
        useless = APOConfig(optimizer_model="openai/toy", optimizer_base_url=stack.urls.model_v1,
                            rounds=1, beam=1, rollouts_per_task=16, step_timeout=240)  # fmt: skip
        rejected = await APO(stack.store, TRAIN, VAL, useless).run()
        versions = await stack.store.list_resource_versions("prompt")
        history = await stack.store.query_pointer_history("prompt", "latest")

    assert [v.version_id for v in versions] == [start.version_id]  # never a half-written candidate
    assert failed.candidates == [] and "optimizer failed" in failed.notes[0], failed.notes
    assert rejected.candidates == [] and "no usable edit" in rejected.notes[0], rejected.notes
    assert "placeholder" in rejected.notes[0], rejected.notes
    assert history[-1].version_id == start.version_id and "no candidate beat" in history[-1].reason
