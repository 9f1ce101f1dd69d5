"""A hostile command agent trained by `fit` as a user would run it (store server, inference server and
runner processes, the agent a subprocess of the runner): every way it tries to reach the training
signal is refused, and nothing it tried is stored."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from lightningrl import fit
from lightningrl.demos.tinylm import build_tiny_model
from lightningstore import AttemptStatus, SqlStore

HERE = Path(__file__).parent
PROMPTS = ["Pick a or b.", "Choose a or b.", "Say a or b."]
PROVIDER_KEY = "sk-provider-key-of-the-operator"
REFUSED = {
    "reward_no_token": 401,
    "read_no_token": 401,
    "reward_other_rollout": 403,
    "span_other_rollout": 403,
    "span_training_attributes": 403,
    "other_mode": 409,
    "span_flood": 429,
    "reload": 401,
}
REFUSED_IN_TRAIN = {"logit_bias": 400, "n_64": 400, "max_tokens_1e9": 400}


async def _victim(db: Path) -> str:
    """A finished rollout of the store fit will use: no one may write to it any more."""
    store = SqlStore(db)
    try:
        started = await store.start_rollout({"prompt": "victim"}, mode="train")
        await store.update_attempt(
            started.rollout_id, started.attempt.attempt_id, status=AttemptStatus.SUCCEEDED
        )
        return started.rollout_id
    finally:
        await store.close()


async def _forged(db: Path) -> tuple[list[str], list[str]]:
    """Rewards and spans anywhere in the store that only a forger would have written."""
    store = SqlStore(db)
    try:
        rewards, spans = [], []
        for rollout in await store.query_rollouts():
            rewards += [
                r.rollout_id for r in await store.query_rewards(rollout.rollout_id) if r.value == 666.0
            ]
            spans += [s.rollout_id for s in await store.query_spans(rollout.rollout_id, name="forged")]
        return rewards, spans
    finally:
        await store.close()


async def _flooded(db: Path) -> int:
    """Spans the agent's refused flood left (their span ids are 16 hex digits from 0)."""
    store = SqlStore(db)
    try:
        spans = [s for r in await store.query_rollouts() for s in await store.query_spans(r.rollout_id)]
        return sum(1 for s in spans if s.span_id.startswith("0000000000"))
    finally:
        await store.close()


@pytest.mark.slow
def test_a_hostile_agent_under_fit_reaches_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The operator's shell holds a provider key; fit's store server gets its own tokens.
    monkeypatch.setenv("OPENAI_API_KEY", PROVIDER_KEY)
    model = build_tiny_model(
        tmp_path / "model", seed=0, tokenizer_kind="word", extra_text=PROMPTS, hidden_size=32, num_layers=1,
        num_heads=2,
    )  # fmt: skip
    agent = tmp_path / "agent"
    agent.mkdir()
    script = agent / "hostile_agent.py"
    script.write_text((HERE / "hostile_agent.py").read_text())
    out = tmp_path / "run"
    out.mkdir()
    victim = asyncio.run(_victim(out / "store.db"))

    rows = [{"prompt": p} for p in PROMPTS]
    result = fit(
        [sys.executable, str(script), victim],
        rows,
        rows[:1],
        model=model,
        config={
            "steps": 1,
            "tasks_per_step": 1,
            "rollouts_per_task": 2,
            "val_every": 1,
            "show_progress": False,
        },
        workers=2,
        runner_processes=1,
        output_dir=out,
        store=out / "store.db",
    )

    probes = [json.loads(p.read_text()) for p in agent.glob("probes-*.json")]
    assert len(probes) >= 3, f"the agent ran {len(probes)} times; logs in {out / 'logs'}"
    assert {p["mode"] for p in probes} >= {"train", "val"}
    for seen in probes:
        assert seen["secret_names"] == [], seen["secret_names"]
        assert seen["proc_secrets"] == [], seen["proc_secrets"]  # the store server's and runner's /proc
        assert PROVIDER_KEY not in seen["environment"]
        expected = {**REFUSED, **(REFUSED_IN_TRAIN if seen["mode"] == "train" else {})}
        assert {k: seen[k] for k in expected} == expected
    assert asyncio.run(_forged(out / "store.db")) == ([], [])
    assert asyncio.run(_flooded(out / "store.db")) == 0
    assert result.metrics[-1]["step"] == 1
