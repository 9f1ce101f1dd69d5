"""The environment a rollout process gets: its model endpoint, agent key, ids, task and reward/OTLP URLs.

Agent Lightning v1.0's names are set beside ours, so an agent written for it runs unchanged:
`AGL_OPENAI_BASE_URL` (the proxy's `/openai/v1` form), `AGL_EVENT_URL` (its events endpoint on the
store server) and `AGL_KEY` (the attempt's agent key).

A local process gets these on an allow-listed base, never the runner's whole environment (which may
hold provider keys and, before the runner removes them, its token and the agent-key secret): the
`SAFE_BASE` names (and `LC_*`) that run a program at all, plus what the user names (`pass_env`,
`env`).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any
from urllib.parse import quote

from lightningstore.auth.environment_secrets import is_credential_var
from lightningstore.semconv import (
    ATTEMPT_ID,
    PROXY_CALL_MARK,
    ROLLOUT_ID,
    agl_base_url,
    agl_event_url,
    is_proxy_url,
)
from runner.resources import AgentResources

SAFE_BASE: frozenset[str] = frozenset(
    {
        # To run a program at all: where programs, the user and temporary files are; locale and time.
        *("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LANGUAGE", "TZ"),
        *("TMPDIR", "TEMP", "TMP", "LD_LIBRARY_PATH"),
        # So `python` and imports resolve as they do for the runner.
        *("VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH", "PYTHONHOME", "PYTHONUNBUFFERED", "PYTHONIOENCODING"),
        # Trust roots for an https store server.
        *("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"),
        # Runtime knobs, no secrets: threads, offline model caches, devices, litellm's bundled cost map.
        *("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TOKENIZERS_PARALLELISM"),
        *("HF_HOME", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"),
        *("XDG_CACHE_HOME", "CUDA_VISIBLE_DEVICES", "LITELLM_LOCAL_MODEL_COST_MAP"),
    }
)
"""What a local rollout process inherits from the runner's environment without being asked."""
SAFE_PREFIXES = ("LC_",)
TAKEN_BY_ATTEMPT = frozenset({"OPENAI_API_KEY"})
"""Names whose place the attempt's own value takes: a provider key passed under one would never arrive."""


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


def check_user_environment(env: Mapping[str, str], pass_env: Collection[str]) -> None:
    """ValueError naming a variable the user may not give an agent: the runner's credentials, or a name
    the attempt's own value takes. Provider keys named here are the user's choice (never inherited)."""
    for where, names in (("env", list(env)), ("pass_env", list(pass_env))):
        for name in names:
            if not name or "=" in name or "\0" in name:
                raise ValueError(f"{where}: {name!r} is not an environment variable name")
            if is_credential_var(name):
                raise ValueError(
                    f"{where} names {name}: the runner's token, role tokens and the agent-key secret never "
                    "reach an agent (it writes with its attempt's key, $LIGHTNINGRL_AGENT_KEY)"
                )
            if name in TAKEN_BY_ATTEMPT:
                raise ValueError(
                    f"{where} names {name}: it holds the attempt's agent key for the gateway; give a "
                    "provider key for a direct call under another name"
                )


def local_environment(
    resources: AgentResources,
    task: Any,
    *,
    store_url: str | None,
    env: Mapping[str, str],
    pass_env: Collection[str],
    source: Mapping[str, str],
) -> dict[str, str]:
    """A local rollout process's whole environment: the safe base and the `pass_env` names found in
    `source` (the runner's environment), then `env`, then the attempt's variables (they win)."""
    check_user_environment(env, pass_env)
    inherited = {
        name: value
        for name, value in source.items()
        if (name in SAFE_BASE or name.startswith(SAFE_PREFIXES) or name in pass_env)
        and not is_credential_var(name)
    }
    return {**inherited, **env, **attempt_environment(resources, task, store_url=store_url)}
