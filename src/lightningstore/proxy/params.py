"""Which keys of an agent's request body go upstream: OpenAI's parameters, never connection settings."""

from __future__ import annotations

from lightningstore.llm_record import JSON, Kind
from lightningstore.proxy.errors import ProxyError

# Keys that choose where a call goes or with which credentials (litellm reads them as such). They
# belong to the LLM resource and the server's environment, never to the agent: refused for every
# provider, so an agent learns it cannot redirect the gateway rather than have them vanish.
CONNECTION_KEYS = frozenset(
    {
        "api_base",
        "base_url",
        "api_key",
        "api_version",
        "api_type",
        "organization",
        "project",
        "headers",
        "extra_headers",
        "extra_query",
        "custom_llm_provider",
        "deployment_id",
        "model_list",
        "client",
        "ssl_verify",
    }
)
CONNECTION_PREFIXES = ("aws_", "azure_", "vertex_", "watsonx_", "litellm_")

# OpenAI's chat-completions parameters (https://platform.openai.com/docs/api-reference/chat/create)
# that an observe-only provider is sent through litellm, which maps them to the provider's own.
CHAT_PARAMS = frozenset(
    {
        "messages",
        "audio",
        "frequency_penalty",
        "function_call",
        "functions",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "max_tokens",
        "modalities",
        "n",
        "parallel_tool_calls",
        "prediction",
        "presence_penalty",
        "reasoning_effort",
        "response_format",
        "seed",
        "stop",
        "temperature",
        "tool_choice",
        "tools",
        "top_logprobs",
        "top_p",
        "user",
        "verbosity",
        "web_search_options",
    }
)
# The legacy completions endpoint's parameters (https://platform.openai.com/docs/api-reference/completions).
COMPLETION_PARAMS = frozenset(
    {
        "prompt",
        "best_of",
        "echo",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "max_tokens",
        "n",
        "presence_penalty",
        "seed",
        "stop",
        "suffix",
        "temperature",
        "top_p",
        "user",
    }
)
# OpenAI parameters the gateway answers itself (model, streaming, token ids) or that only mean
# something to OpenAI's own service: clients send them (LangChain and AutoGen `stream_options`, the
# Agents SDK `store` and `metadata`, our instrumentation `return_token_ids`), so they are accepted
# and not sent to an observe-only provider.
NOT_FORWARDED = frozenset(
    {
        "model",
        "stream",
        "stream_options",
        "return_token_ids",
        "store",
        "metadata",
        "service_tier",
        "prompt_cache_key",
        "prompt_cache_retention",
        "safety_identifier",
    }
)


def _is_connection_key(key: str) -> bool:
    return key in CONNECTION_KEYS or key.startswith(CONNECTION_PREFIXES)


def forwarded(agent: JSON, kind: Kind, *, openai_compatible: bool) -> JSON:
    """The agent's keys that go upstream; 400 naming a connection or credential key, for any provider.

    An OpenAI-compatible resource (our inference server, vLLM) gets every other key, posted to the
    resource's own endpoints: a body cannot change where that request goes, and such servers take
    extra sampling keys (`top_k`, `min_p`, `chat_template_kwargs`). An observe-only provider gets
    OpenAI's parameters only (litellm reads unknown keyword arguments as its own settings); any other
    key is refused (400 naming it).
    """
    refused = sorted(key for key in agent if _is_connection_key(key))
    if refused:
        raise ProxyError(
            400,
            f"{', '.join(refused)}: connection and credential settings belong to the LLM resource; "
            "an agent's request may not set them",
            refused[0],
        )
    if openai_compatible:
        return dict(agent)
    allowed = CHAT_PARAMS if kind == "chat" else COMPLETION_PARAMS
    unknown = sorted(key for key in agent if key not in allowed and key not in NOT_FORWARDED)
    if unknown:
        raise ProxyError(
            400,
            f"{', '.join(unknown)}: not an OpenAI {'chat ' if kind == 'chat' else ''}completions parameter "
            "this gateway forwards to an observe-only provider",
            unknown[0],
        )
    return {key: value for key, value in agent.items() if key in allowed}
