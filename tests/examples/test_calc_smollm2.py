"""examples/calc/demo_smollm2.py, bounded: the plain-openai calculator agent with tools (OpenAI
functions in the request) on the real SmolLM2-135M-Instruct, one RL step through `fit`."""

from __future__ import annotations

import csv
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import RENDEZVOUS, REPO_ROOT
from safetensors import safe_open

from lightningrl.models import cached_model
from lightningstore import semconv

# A warm-up just long enough for the call format; one task of each operation x 6 rollouts: a group
# whose rewards all agree trains nothing, and 6 samples of a near-random tool choice rarely all agree.
# No extra rounds and no larger groups: the test counts the step's rollouts and calls.
SHORT = ["--steps", "1", "--tasks-per-step", "3", "--n", "6", "--workers", "8", "--train-tasks", "16"]
SHORT += ["--heldout-per-op", "2", "--warmup-steps", "4", "--warmup-batch", "2", "--warmup-lr", "1e-4"]
SHORT += ["--fill-rounds", "0", "--hard-slice-factor", "1"]
ROLLOUTS = 3 * 6


def run_demo(tmp_path: Path, *flags: str) -> tuple[Path, list[dict[str, str]]]:
    """examples/calc/demo_smollm2.py, bounded (`SHORT`), with `flags`: its run directory and metrics."""
    env = {k: v for k, v in os.environ.items() if k not in RENDEZVOUS}
    env |= {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(
        [sys.executable, "examples/calc/demo_smollm2.py", *flags, "--output", str(tmp_path), *SHORT],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "held-out success: before" in done.stdout.splitlines()[-1]
    run = tmp_path / "seed0"
    with (run / "metrics.csv").open(newline="") as fh:
        return run, list(csv.DictReader(fh))


@pytest.mark.slow
def test_one_rl_step_of_the_tool_calling_agent_on_the_real_model(tmp_path: Path) -> None:
    run, rows = run_demo(tmp_path)
    validations = [r for r in rows if r.get("val/success")]
    # Held-out evaluated before and after, per operation.
    assert len(validations) == 2 and all(r.get("val/success[op=times]") for r in validations)
    step = next(r for r in rows if r["step"] == "1" and r.get("credit/rollouts"))
    assert "update/skipped" not in step or not step["update/skipped"], step
    # Rollouts that called a tool made two calls, each with its reward (the answer call's own judgement
    # and the episode's); a rollout without a tool call made one. How many call a tool after the 4-step
    # warm-up varies run to run (the server batches, so sampling is not reproducible): as few as 9 of 16
    # in 7 runs here, so the bound asks only that the two-call path ran for a good share of them.
    tools_called = int(step["credit/multi_call_rollouts"])
    assert step["credit/rollouts"] == str(ROLLOUTS), step
    assert tools_called >= ROLLOUTS // 3, step
    assert int(step["credit/calls_used"]) == ROLLOUTS + tools_called, step
    # A call merges into one sequence with the next when the next prompt continues its exact ids;
    # a tool call the model spaced otherwise than the template re-renders it breaks that (counted).
    merged = int(step["credit/multi_call_rollouts_merged"])
    assert tools_called // 2 <= merged <= tools_called, step
    assert float(step["tokens/prefix_continuity"]) == pytest.approx(merged / tools_called)
    assert (
        step["credit/rewards_used"] == step["credit/calls_used"] and step["credit/rewards_unmatched"] == "0"
    )
    # Ids as the server rendered them (tools written into the ChatML prompt): no prompt drift.
    assert float(step["tokens/prompt_drift"]) == 0.0 and float(step["tokens/mismatch_abs_mean"]) <= 1e-3
    # The tools went out in the request and the calls came back as OpenAI tool_calls.
    with sqlite3.connect(run / "store.db") as db:
        attributes = [json.loads(a) for (a,) in db.execute("SELECT attributes FROM spans")]
    offered = [a for a in attributes if semconv.LLM_REQUEST_TOOLS in a]
    assert len(offered) >= 2 * ROLLOUTS and all(
        '"name": "mul"' in a[semconv.LLM_REQUEST_TOOLS] for a in offered
    )
    calls = [a for a in offered if "tool_calls" in str(a.get(semconv.GEN_AI_FINISH_REASONS))]
    assert len(calls) >= ROLLOUTS, len(calls)  # each rollout's first call (val rollouts' too)
    # The update changed the weights.
    checkpoints = sorted((run / "checkpoints").glob("*/model.safetensors"))
    assert checkpoints, sorted(p.name for p in run.iterdir())
    name = "model.layers.0.self_attn.q_proj.weight"
    with (
        safe_open(str(checkpoints[-1]), framework="pt") as new,
        safe_open(str(run / "model-warmup" / "model.safetensors"), framework="pt") as old,
    ):
        assert (new.get_tensor(name) - old.get_tensor(name)).abs().max().item() > 0.0
    assert (run / "model-warmup").resolve() != cached_model("smollm2").resolve()


@pytest.mark.slow
def test_one_rl_step_of_the_autogen_agent_on_the_real_model(tmp_path: Path) -> None:
    """`--framework autogen`: AutoGen's AssistantAgent with its defaults (one model call, the tool's
    result as the answer) trains the same way, and its warm-up showed the prompts AutoGen sends."""
    from transformers import AutoTokenizer

    from examples.calc_autogen.agent import DEFAULT_SYSTEM, openai_tools
    from lightningrl.demos.demonstrations import encode_demonstration

    run, rows = run_demo(tmp_path, "--framework", "autogen")
    assert sum(1 for r in rows if r.get("val/success[op=times]")) == 2
    step = next(r for r in rows if r["step"] == "1" and r.get("credit/rollouts"))
    # One model call a rollout (no reflection), each with the episode's reward.
    assert step["credit/rollouts"] == str(ROLLOUTS) and step["credit/calls_used"] == str(ROLLOUTS), step
    assert (
        step.get("credit/multi_call_rollouts", "0") in ("", "0") and step["credit/rewards_unmatched"] == "0"
    ), step
    tokenizer = AutoTokenizer.from_pretrained(run / "model-warmup")
    tools = openai_tools("python")
    with sqlite3.connect(run / "store.db") as db:
        attributes = [json.loads(a) for (a,) in db.execute("SELECT attributes FROM spans")]
    calls = [a for a in attributes if semconv.LLM_PROMPT_TOKEN_IDS in a]
    assert len(calls) >= ROLLOUTS + 12  # train and held-out rollouts
    for call in calls:
        # AutoGen's request (its own tool schemas, its system and user messages) renders exactly as
        # the warm-up demonstrations did.
        assert json.loads(call[semconv.LLM_REQUEST_TOOLS]) == tools
        question = json.loads(call[semconv.LLM_REQUEST_MESSAGES])[-1]["content"]
        demo = [{"role": "system", "content": DEFAULT_SYSTEM}, {"role": "user", "content": question}]
        assert call[semconv.LLM_PROMPT_TOKEN_IDS] == encode_demonstration(tokenizer, demo, "", tools)[0]
    checkpoints = sorted((run / "checkpoints").glob("*/model.safetensors"))
    name = "model.layers.0.self_attn.q_proj.weight"
    with (
        safe_open(str(checkpoints[-1]), framework="pt") as new,
        safe_open(str(run / "model-warmup" / "model.safetensors"), framework="pt") as old,
    ):
        assert (new.get_tensor(name) - old.get_tensor(name)).abs().max().item() > 0.0


def test_random_warmup_demonstrations_give_every_tool_equally_often() -> None:
    """The warm-up's random tool carries no decision and no bias: a skewed draw left AutoGen's seed 2
    calling one tool for every question before RL, so every group agreed and nothing trained."""
    from examples.calc.tasks import TOOLS, tool_demonstrations, two_digit_split

    train, _ = two_digit_split(2, 4)
    demos = tool_demonstrations(train, 2, 48, random_tool=True, answers=False)
    names = [
        json.loads(block.split("<tool_call>")[1].split("</tool_call>")[0])["name"] for _, block, _ in demos
    ]
    assert sorted(set(names)) == sorted(TOOLS)
    assert all(names.count(name) == 48 // len(TOOLS) for name in TOOLS), names
    # ... and no fixed order: the rounds are shuffled, not a cycle the model could learn.
    rounds = {tuple(names[i : i + len(TOOLS)]) for i in range(0, 48, len(TOOLS))}
    assert len(rounds) > 1, rounds
