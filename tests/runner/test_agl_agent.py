"""An agent written for Agent Lightning v1.0 runs unchanged: a subprocess that reads only AGL_OPENAI_BASE_URL,
AGL_EVENT_URL and AGL_KEY, run by a real Runner and LocalController against the store server, its proxy
and the tiny model's inference server."""

from __future__ import annotations

import sys
from pathlib import Path

from conftest import _serve_in_thread

from lightningrl.credit.calls import is_llm_span
from lightningstore import LLM, AttemptStatus, SqlStore, semconv
from lightningstore.auth import TokenConfig
from lightningstore.server import build_app
from runner import Runner
from runner.controllers import LocalController

SECRET = "agl-agent-secret"
AGL_AGENT = """
import os
import httpx
from openai import OpenAI

client = OpenAI(base_url=os.environ["AGL_OPENAI_BASE_URL"], api_key=os.environ["AGL_KEY"], max_retries=0)
reply = client.chat.completions.create(
    model="Qwen/Qwen2.5-7B-Instruct", messages=[{"role": "user", "content": "Say hi"}], max_tokens=6,
    temperature=0.2,
)
headers = {"Authorization": "Bearer " + os.environ["AGL_KEY"]}
event = {"event_type": "reward", "data": {"value": 0.5 if reply.choices[0].message.content is not None else 0.0}}
httpx.post(os.environ["AGL_EVENT_URL"], json=event, headers=headers, timeout=60).raise_for_status()
"""


async def test_an_agent_lightning_v1_agent_trains_unchanged(tmp_path: Path, inference_url: str) -> None:
    script = tmp_path / "agl_agent.py"
    script.write_text(AGL_AGENT)
    db = tmp_path / "store.db"
    app = build_app(
        SqlStore(db), tokens=TokenConfig(agent_secret=SECRET), sweep_interval=None, close_store=True
    )
    url, server, thread = _serve_in_thread(app, "agl-store")
    store = SqlStore(db)
    try:
        bound = await store.add_resources({"llm": LLM(endpoints=[inference_url], model="tiny")})
        for mode in ("train", "val"):
            await store.enqueue_rollout(
                {"q": mode}, mode=mode, resources_id=bound.resources_id, rollout_id=mode
            )
        # No store_url: AGL_EVENT_URL is found from the proxy the LLM points at (the same server).
        controller = LocalController([sys.executable, str(script)], env={"OPENAI_BASE_URL": "http://unused"})
        runner = Runner(store, controller, workers=2, proxy_url=f"{url}/proxy", agent_key_secret=SECRET,
                        heartbeat_interval=0.5, show_progress=False)  # fmt: skip
        summary = await runner.run(max_rollouts=2)
        assert summary.succeeded == 2, [
            a.failure_reason for m in ("train", "val") for a in await store.query_attempts(m)
        ]

        for mode, temperature in (("train", 1.0), ("val", 0.7)):
            (attempt,) = await store.query_attempts(mode)
            assert attempt.status == AttemptStatus.SUCCEEDED
            (span,) = [s for s in await store.query_spans(mode) if is_llm_span(s)]
            attributes = span.attributes
            assert span.attempt_id == attempt.attempt_id and attributes[semconv.LLM_TRAINABLE] is True
            assert attributes[semconv.LLM_PROMPT_TOKEN_IDS] and attributes[semconv.LLM_RESPONSE_TOKEN_IDS]
            assert attributes[semconv.GEN_AI_TEMPERATURE] == temperature
            assert attributes[semconv.LLM_AGENT_TEMPERATURE] == 0.2
            (reward,) = await store.query_rewards(mode)
            assert (reward.value, reward.primary, reward.attempt_id) == (0.5, True, attempt.attempt_id)
    finally:
        await store.close()
        server.should_exit = True  # type: ignore[attr-defined]
        thread.join(timeout=10)  # type: ignore[attr-defined]
