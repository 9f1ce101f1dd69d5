"""The runner's credentials: read once at start and removed from the environment, so no agent sees them.

A runner holds the runner token (it claims rollouts and writes any attempt's spans) and the agent-key
secret (it mints every attempt's key). An agent holding either could write into other rollouts; an
agent run in the runner's process, and every process it starts, sees `os.environ`, so both leave it
once read. The kernel's copy of the environment the runner started with (`/proc/PID/environ`, readable
by any process of the same user, a rollout process included) is blanked too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from lightningstore.auth import AGENT_SECRET_ENV, ENV_VARS, Role
from lightningstore.auth.environment_secrets import remove_credentials

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
    remove_credentials()
    return RunnerCredentials(token or from_env, secret)
