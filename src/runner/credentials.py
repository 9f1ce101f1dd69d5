"""The runner's credentials: read once at start and removed from the environment, so no agent sees them.

A runner holds the runner token (it claims rollouts and writes any attempt's spans) and the agent-key
secret (it mints every attempt's key). An agent holding either could write into other rollouts; an
agent run in the runner's process, and every process it starts, sees `os.environ`, so both leave it
once read. The kernel's copy of the environment the runner started with (`/proc/PID/environ`, readable
by any process of the same user, a rollout process included) is blanked too.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass

from lightningstore.auth import AGENT_SECRET_ENV, ENV_VARS, Role

log = logging.getLogger("runner.credentials")

RUNNER_SECRETS: frozenset[str] = frozenset({*ENV_VARS.values(), AGENT_SECRET_ENV})
"""Every role token variable and the agent-key secret: never in an agent's environment."""

PROVIDER_KEYS: frozenset[str] = frozenset(
    {
        "OPENAI_API_KEY",
        "AZURE_OPENAI_API_KEY",
        "AZURE_API_KEY",
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "MISTRAL_API_KEY",
        "COHERE_API_KEY",
        "CO_API_KEY",
        "GROQ_API_KEY",
        "TOGETHER_API_KEY",
        "TOGETHERAI_API_KEY",
        "DEEPSEEK_API_KEY",
        "OPENROUTER_API_KEY",
        "FIREWORKS_API_KEY",
        "FIREWORKS_AI_API_KEY",
        "XAI_API_KEY",
        "PERPLEXITYAI_API_KEY",
        "REPLICATE_API_KEY",
        "HUGGINGFACE_API_KEY",
    }
)
"""Model providers' API keys (the store server's gateway calls providers with them): never inherited by
an agent, which calls models through the gateway with its attempt's key."""


def is_runner_secret(name: str) -> bool:
    """True for a role token or the agent-key secret (and any LIGHTNINGRL_*_TOKEN / *_SECRET name)."""
    return name in RUNNER_SECRETS or (
        name.startswith("LIGHTNINGRL_") and name.endswith(("_TOKEN", "_SECRET"))
    )


@dataclass(frozen=True)
class RunnerCredentials:
    """What the runner authenticates with: its store token and the agent-key secret (None when unset)."""

    token: str | None
    agent_secret: str | None


def take_credentials(token: str | None = None) -> RunnerCredentials:
    """The runner token (`token` when given, else $LIGHTNINGRL_RUNNER_TOKEN) and $LIGHTNINGRL_AGENT_SECRET,
    with every role token and the secret then removed from this process's environment."""
    from_env = os.environ.get(ENV_VARS[Role.RUNNER]) or None
    secret = os.environ.get(AGENT_SECRET_ENV) or None
    names = {name for name in os.environ if is_runner_secret(name)} | RUNNER_SECRETS
    for name in names:
        os.environ.pop(name, None)
    _blank_initial_environment()
    return RunnerCredentials(token or from_env, secret)


def _blank_initial_environment() -> None:
    """Zero the block the process's environment was copied into at exec, once libc's list points
    elsewhere.

    Removing a variable unlinks it from libc's list, but its text stays where the kernel put it, and
    `/proc/PID/environ` (readable by a rollout process of the same user) shows that block: with the runner's
    token and secret, and the provider keys it keeps for in-process agents. Every variable still set is
    set again first (libc copies it to the heap), so this process and the programs it starts keep them.
    Written through /proc/self/mem: an address that is not what /proc says fails with OSError, never a crash.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[47]), int(fields[48])  # env_start, env_end: fields 50 and 51 of stat
        with open("/proc/self/environ", "rb") as environ:
            block = environ.read()
        if start <= 0 or not block or len(block) > end - start:
            return
        for name, value in os.environb.items():
            os.putenv(name, value)
        with open("/proc/self/mem", "r+b", buffering=0) as memory:
            memory.seek(start)
            if memory.read(len(block)) == block:
                memory.seek(start)
                memory.write(b"\0" * len(block))
    except (OSError, ValueError, IndexError) as error:
        log.warning("could not blank the runner's initial environment (/proc/PID/environ): %s", error)
