"""`fit(algorithm=...)`: APO, then SFT, then RL on one store through fit's own processes (store server,
inference server, a runner), every weight stage's rollouts bound to the prompt APO left; and the
settings fit refuses before a process starts."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from toy_ab import PROMPTS, warm_ab_model

from lightningrl import fit
from lightningrl.algorithms.apo import CRITIQUE_SPAN, EDIT_SPAN
from lightningstore import SqlStore

AGENT = "examples.algorithms.best_of_n:answer_agent"  # the docs example's agent: reads resources.prompts
TRAIN = [{"prompt": p, "answer": "b"} for p in PROMPTS]
VAL = [{"prompt": "Pick a or b.", "answer": "b"}]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return warm_ab_model(tmp_path_factory.mktemp("ab"))


def test_fit_refuses_bad_algorithm_settings(model: Path, tmp_path: Path) -> None:
    for kwargs, match in [
        ({"algorithm": "ppo"}, "algorithm must be one of 'rl', 'sft', 'apo' or a list of them, got 'ppo'"),
        ({"algorithm": []}, "at least one"),
        ({"algorithm": ["apo", "rl"]}, "needs prompt="),
        ({"algorithm": "apo", "prompt": "{prompt}"}, "and val="),  # no held-out tasks to score prompts
        ({"apo": {"rounds": 1}}, "no 'apo' stage"),
        (
            {"algorithm": "apo", "prompt": "{prompt}", "val": VAL, "apo": {"roundz": 1}},
            "unknown key apo.roundz",
        ),
        ({"algorithm": "apo", "prompt": "{prompt}", "val": VAL, "apo": {"beam": 0}}, "beam must be >= 1"),
        ({"algorithm": "apo", "prompt": "{prompt}", "val": VAL, "apo": {"score_on": "test"}}, "apo.score_on"),
        ({"algorithm": "sft", "sft": {"stepz": 1}}, "unknown key sft.stepz"),
        ({"algorithm": "sft", "sft": {"trainer": {"ppo_epochs": 2}}}, "ppo_epochs must be 1"),
        ({"sft": {"steps": 1}}, "no 'sft' stage"),
    ]:
        with pytest.raises(ValueError, match=match):
            fit(AGENT, TRAIN, model=model, output_dir=tmp_path / "refused", **kwargs)
    assert not (tmp_path / "refused" / "logs").exists()  # refused before any process started


async def _bound_and_spans(db: Path) -> tuple[list[tuple[str, str, dict[str, str]]], list[str], list[str]]:
    """Each rollout's (algorithm, mode, resources bound), the span names, the llm versions' creators."""
    store = SqlStore(db)
    try:
        bound = []
        names = []
        for rollout in await store.query_rollouts():
            resources = (
                await store.get_resources_by_id(rollout.resources_id) if rollout.resources_id else None
            )
            versions = {k: v.version_id for k, v in resources.versions.items()} if resources else {}
            bound.append((rollout.metadata.get("algorithm", ""), rollout.mode, versions))
            names += [s.name for s in await store.query_spans(rollout.rollout_id)]
        creators = [v.created_by for v in await store.list_resource_versions("llm")]
        return bound, names, creators
    finally:
        await store.close()


@pytest.mark.slow
def test_apo_then_sft_then_rl_on_one_store(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = fit(
        AGENT,
        TRAIN,
        VAL,
        model=model,
        algorithm=["apo", "sft", "rl"],
        prompt="{prompt}",
        # The optimizer is the policy as fit serves it: a toy model's edit is no usable template.
        apo={
            "rounds": 1,
            "beam": 1,
            # The toy policy says b half the time: 2 x 6 train rollouts all succeed (no failure for the
            # optimizer to read, so no critique) once in 4,096 runs; with 2 x 2 it was once in 16.
            "rollouts_per_task": 6,
            "optimizer_max_tokens": 12,
            "step_timeout": 240,
            "score_on": "train",
            "score_tasks": 2,
        },  # candidates scored on 2 train tasks; VAL stays unseen
        sft={"steps": 1, "trainer": {"lr": 1e-3}},
        config={
            "steps": 1,
            "tasks_per_step": 3,
            "rollouts_per_task": 4,
            "val_every": 0,
            "trainer": {"lr": 1e-3},
            "show_progress": False,
        },
        workers=4,
        runner_processes=1,
        engine="ours",
        output_dir=out,
    )
    apo = result.apo
    assert apo is not None and len(apo.candidates) + len(apo.notes) == 1, apo  # round 1, beam 1: one proposal
    assert result.prompt_version_id == apo.best.version.version_id
    # APO's rows: the start and the best prompt on the held-out tasks; the weight stages continue.
    assert [(r["step"], r["algorithm"]) for r in result.metrics] == [
        (0, "apo"),
        (1, "apo"),
        (2, "sft"),
        (3, "rl"),
    ]
    start_row, best_row, sft_row, rl_row = result.metrics
    assert start_row["apo/score_start"] == apo.start.score and best_row["apo/score_best"] == apo.best.score
    assert result.held_out_before == start_row["val/success"] and 0.0 <= best_row["val/success"] <= 1.0
    if apo.best is apo.start:  # the same prompt: its held-out result is not sampled a second time
        assert best_row["val/success"] == start_row["val/success"]
    assert sft_row["sft/successes"] >= 1 and "update/version_id" in sft_row
    bound, span_names, creators = asyncio.run(_bound_and_spans(out / "store.db"))
    assert CRITIQUE_SPAN in span_names and (EDIT_SPAN in span_names or "optimizer failed" in apo.notes[0])
    weights = [versions for algorithm, _, versions in bound if algorithm in ("sft", "lightningrl")]
    # SFT's step: 3 tasks x 4 rollouts; RL's: the same first round plus any refill round dynamic sampling
    # drew for groups that agreed (its own count, checked against the store).
    assert rl_row["sample/rollouts"] >= 3 * 4 and rl_row["sample/rollouts"] % 4 == 0, rl_row
    assert len(weights) == 3 * 4 + rl_row["sample/rollouts"]
    assert all(v.get("prompt") == result.prompt_version_id and "llm" in v for v in weights), weights[:3]
    scored = [v["prompt"] for algorithm, mode, v in bound if algorithm == "apo" and mode == "val"]
    assert scored and set(scored) <= {
        apo.start.version.version_id,
        *(c.version.version_id for c in apo.candidates),
    }
    assert creators[0] == "fit" and "sft" in creators  # the SFT stage published its update
    assert rl_row.get("update/version_id") == result.final_version_id or "update/skipped" in rl_row
