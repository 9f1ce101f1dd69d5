"""Which keys of an agent's request body go upstream: OpenAI's parameters, never connection settings."""

from __future__ import annotations

from lightningstore.data.resource import LLM
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

# Keys with which the agent, not the policy, would choose the tokens a call samples: biasing or masking
# the vocabulary (logit_bias, allowed_token_ids, bad_words, min_tokens masking the stop tokens), decoding
# to a grammar or schema (vLLM's guided_*, structured_outputs, a response_format other than text),
# custom logits processors (logits_processors, vllm_xargs), or picking among samples (best_of, beam
# search). A train-mode call's span is trained on as the policy's own sample, with its log-probs: such a
# call would write text of the agent's choosing into the weights. Refused in train mode on a trained
# (OpenAI-compatible) backend; val and test calls are not training data, and `tools`/`tool_choice` are
# not here (our inference server writes a forced call into the prompt, the sampled tokens stay the
# policy's).
TRAIN_REFUSED_KEYS = frozenset(
    {
        "logit_bias",
        "allowed_token_ids",
        "bad_words",
        "min_tokens",
        "structured_outputs",
        "logits_processors",
        "vllm_xargs",
        "best_of",
        "use_beam_search",
    }
)
TRAIN_REFUSED_PREFIXES = ("guided_",)
FREE_RESPONSE_FORMAT = "text"
"""The one `response_format` type that leaves decoding free."""
LENGTH_KEYS = ("max_tokens", "max_completion_tokens")
"""Capped by `LLM.max_tokens_cap` in every mode: the cost of one call."""
COUNT_KEYS = ("n", "best_of")
"""Capped by `LLM.max_n` in every mode."""


def _constrains_output(key: str, value: object) -> bool:
    if not value:  # null, false, 0, {} and [] constrain nothing (clients send some such defaults)
        return False
    if key == "response_format":
        return not (isinstance(value, dict) and value.get("type") == FREE_RESPONSE_FORMAT)
    return key in TRAIN_REFUSED_KEYS or key.startswith(TRAIN_REFUSED_PREFIXES)


def _integer(agent: JSON, key: str) -> int | None:
    value = agent.get(key)
    if value is None:
        return None
    # A string or a fraction would slip past the cap and be read as a number upstream (pydantic takes
    # "1000000000" for an int).
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ProxyError(422, f"{key} must be an integer, got {value!r:.80}", key)
    if isinstance(value, float) and not value.is_integer():
        raise ProxyError(422, f"{key} must be an integer, got {value!r}", key)
    return int(value)


def check_limits(agent: JSON, llm: LLM, mode: str) -> None:
    """400 naming the first key of `agent` the call may not send: an output constraint in train mode
    on a trained backend (`TRAIN_REFUSED_KEYS`), or a length or count above the resource's cap."""
    if mode == "train" and llm.provider == "openai":
        refused = sorted(key for key, value in agent.items() if _constrains_output(key, value))
        if refused:
            raise ProxyError(
                400,
                f"{', '.join(refused)}: a train-mode call samples the policy's own tokens; constraints on "
                "its output (logit biases, token masks, guided or structured decoding, best_of) are "
                "refused, as their answers would be trained on as the policy's",
                refused[0],
            )
    for keys, cap, field in (
        (LENGTH_KEYS, llm.max_tokens_cap, "max_tokens_cap"),
        (COUNT_KEYS, llm.max_n, "max_n"),
    ):
        for key in keys:
            value = _integer(agent, key)
            if cap is not None and value is not None and value > cap:
                raise ProxyError(
                    400, f"{key}={value} is above this LLM resource's limit {cap} ({field})", key
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
