"""The environment a rollout process gets: its model endpoint, agent key, ids, task and reward/OTLP URLs."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from lightningstore.semconv import ATTEMPT_ID, ROLLOUT_ID
from runner.resources import AgentResources


def _otel_value(value: str) -> str:
    return quote(value, safe="")


def attempt_environment(resources: AgentResources, task: Any, *, store_url: str | None) -> dict[str, str]:
    """Environment variables for a process running one attempt (standard OpenAI and OTLP names included)."""
    env = {
        "LIGHTNINGRL_ROLLOUT_ID": resources.rollout_id,
        "LIGHTNINGRL_ATTEMPT_ID": resources.attempt_id,
        "LIGHTNINGRL_MODE": resources.mode,
        "LIGHTNINGRL_TASK": json.dumps(task),
        "OPENAI_API_KEY": resources.api_key,
        "LIGHTNINGRL_AGENT_KEY": resources.api_key,
        "OTEL_RESOURCE_ATTRIBUTES": (
            f"{ROLLOUT_ID}={_otel_value(resources.rollout_id)},{ATTEMPT_ID}={_otel_value(resources.attempt_id)}"
        ),
    }
    if resources.llms:
        llm = resources.llms.get("llm") or next(iter(resources.llms.values()))
        env["OPENAI_BASE_URL"] = llm.base_url
        env["LIGHTNINGRL_MODEL"] = llm.model
    for name, llm in resources.llms.items():
        env[f"LIGHTNINGRL_LLM_{name.upper().replace('-', '_')}_BASE_URL"] = llm.base_url
    if store_url:
        root = store_url.rstrip("/")
        env["LIGHTNINGRL_STORE_URL"] = root
        env["LIGHTNINGRL_REWARD_URL"] = f"{root}/v1/rewards"
        env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = f"{root}/v1/traces"
        env["OTEL_EXPORTER_OTLP_TRACES_HEADERS"] = (
            f"authorization={_otel_value('Bearer ' + resources.api_key)}"
        )
    return env
