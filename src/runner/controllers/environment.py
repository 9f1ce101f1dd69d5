"""The environment a rollout process gets: its model endpoint, agent key, ids, task and reward/OTLP URLs.

Agent Lightning v1.0's names are set beside ours, so an agent written for it runs unchanged:
`AGL_OPENAI_BASE_URL` (the proxy's `/openai/v1` form), `AGL_EVENT_URL` (its events endpoint on the
store server) and `AGL_KEY` (the attempt's agent key).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from lightningstore.semconv import (
    ATTEMPT_ID,
    PROXY_CALL_MARK,
    ROLLOUT_ID,
    agl_base_url,
    agl_event_url,
    is_proxy_url,
)
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
        "AGL_KEY": resources.api_key,
        "OTEL_RESOURCE_ATTRIBUTES": (
            f"{ROLLOUT_ID}={_otel_value(resources.rollout_id)},{ATTEMPT_ID}={_otel_value(resources.attempt_id)}"
        ),
    }
    if resources.llms:
        llm = resources.llms.get("llm") or next(iter(resources.llms.values()))
        env["OPENAI_BASE_URL"] = llm.base_url
        env["LIGHTNINGRL_MODEL"] = llm.model
        env["AGL_OPENAI_BASE_URL"] = agl_base_url(llm.base_url)
    for name, llm in resources.llms.items():
        env[f"LIGHTNINGRL_LLM_{name.upper().replace('-', '_')}_BASE_URL"] = llm.base_url
    root = store_url.rstrip("/") if store_url else _proxy_root(resources)
    if root:
        env["AGL_EVENT_URL"] = agl_event_url(root, resources.rollout_id, resources.attempt_id)
    if store_url:
        env["LIGHTNINGRL_STORE_URL"] = root
        env["LIGHTNINGRL_REWARD_URL"] = f"{root}/v1/rewards"
        env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = f"{root}/v1/traces"
        env["OTEL_EXPORTER_OTLP_TRACES_HEADERS"] = (
            f"authorization={_otel_value('Bearer ' + resources.api_key)}"
        )
    return env


def _proxy_root(resources: AgentResources) -> str | None:
    """The store server an LLM's proxy URL points at (the proxy is mounted on it), if any."""
    for llm in resources.llms.values():
        if is_proxy_url(llm.base_url):
            return llm.base_url.split(PROXY_CALL_MARK, 1)[0]
    return None
