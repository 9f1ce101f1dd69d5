"""Span names, attribute keys and wire names shared by the proxy, the tracer and credit assignment.

GenAI keys follow the OpenTelemetry GenAI semantic conventions; `lightningrl.*` keys carry what
training needs and the conventions do not define (exact token ids, logprobs). The HTTP headers and
the proxy's URL layout are here too: agents, runners and the proxy must agree on them byte for byte.
"""

from __future__ import annotations

from urllib.parse import quote

# Binding a span to its attempt (on the OTel resource or on the span).
ROLLOUT_ID = "lightningrl.rollout_id"
ATTEMPT_ID = "lightningrl.attempt_id"
AGENT_NAME = "lightningrl.agent_name"
DECISION = "lightningrl.decision"  # the kind of decision a call makes, named by the agent (a baseline key)

# LLM call spans.
LLM_SPAN_NAME = "chat"
TEXT_COMPLETION_SPAN_NAME = "text_completion"
GEN_AI_OPERATION = "gen_ai.operation.name"  # "chat" | "text_completion"
GEN_AI_SYSTEM = "gen_ai.system"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_TEMPERATURE = "gen_ai.request.temperature"
GEN_AI_TOP_P = "gen_ai.request.top_p"
GEN_AI_MAX_TOKENS = "gen_ai.request.max_tokens"
# What the agent asked for when the proxy sent something else (the GEN_AI_* keys hold what was sent).
LLM_AGENT_TEMPERATURE = "lightningrl.llm.agent_request.temperature"
LLM_AGENT_TOP_P = "lightningrl.llm.agent_request.top_p"

LLM_REQUEST_MESSAGES = "lightningrl.llm.request_messages"  # JSON string of the request messages/prompt
LLM_REQUEST_TOOLS = "lightningrl.llm.request_tools"  # JSON string of the request's `tools`, when it had any
LLM_REQUEST_TOOL_CHOICE = "lightningrl.llm.request_tool_choice"  # JSON string of a `tool_choice` but "auto"
LLM_RESPONSE_TEXT = "lightningrl.llm.response_text"  # choice 0's text
LLM_PROMPT_TOKEN_IDS = "lightningrl.llm.prompt_token_ids"  # list[int], exactly what the model saw
LLM_RESPONSE_TOKEN_IDS = "lightningrl.llm.response_token_ids"  # list[int], choice 0, exactly generated
LLM_RESPONSE_LOGPROBS = "lightningrl.llm.response_logprobs"  # list[float], one per response token
LLM_CHOICES = "lightningrl.llm.choices"  # JSON string: every choice's text/token_ids/logprobs
LLM_UPSTREAM = "lightningrl.llm.upstream"  # endpoint that served the call
LLM_RETRIES = "lightningrl.llm.retries"
LLM_LATENCY_MS = "lightningrl.llm.latency_ms"
LLM_TRAINABLE = "lightningrl.llm.trainable"  # bool; the rule is `lightningstore.llm_call.is_trainable`
LLM_RESOURCE_VERSION = "lightningrl.llm.resource_version"
# What credit assignment trains on: only the proxy and the runner's own instrumentation record these;
# the store server refuses a span carrying any of them from an agent key (lightningstore.auth.agent_writes).
LLM_TRAINING_ATTRIBUTES = frozenset(
    {LLM_PROMPT_TOKEN_IDS, LLM_RESPONSE_TOKEN_IDS, LLM_RESPONSE_LOGPROBS, LLM_CHOICES, LLM_TRAINABLE}
)

# Reward spans (emit_reward also writes a Reward row).
REWARD_SPAN_NAME = "lightningrl.reward"
REWARD_NAME = "lightningrl.reward.name"
REWARD_VALUE = "lightningrl.reward.value"
REWARD_TARGET_SPAN = "lightningrl.reward.span_id"
REWARD_STEP = "lightningrl.reward.step"

# Agent Lightning v1.0 events other than rewards (`POST .../events`), kept as spans.
EVENT_SPAN_NAME = "lightningrl.event"
EVENT_TYPE = "lightningrl.event.type"
EVENT_DATA = "lightningrl.event.data"  # JSON string of the event's `data`

# Tool / step spans made by @trace.
TOOL_SPAN_PREFIX = "tool."
STEP_SPAN_PREFIX = "step."

# HTTP headers an agent's model call carries to the proxy.
AGENT_NAME_HEADER = "x-lightningrl-agent-name"
DECISION_HEADER = "x-lightningrl-decision"  # optional: which kind of decision this call makes
DECISION_MAX_CHARS = 64
TRACEPARENT_HEADER = "traceparent"  # W3C trace context: the proxy's span joins the agent's trace

# The proxy's URL layout: `{PROXY_PREFIX}{PROXY_CALL_PATH}` is one attempt's OpenAI base URL;
# `{PROXY_PREFIX}{AGL_CALL_PATH}` is the same base URL in Agent Lightning v1.0's form (`/openai/v1`).
PROXY_PREFIX = "/proxy"
PROXY_ATTEMPT_PATH = "/rollout/{rollout_id}/attempt/{attempt_id}/mode/{mode}"
OPENAI_SUFFIX = "/v1"
AGL_OPENAI_SUFFIX = "/openai/v1"
PROXY_CALL_PATH = PROXY_ATTEMPT_PATH + OPENAI_SUFFIX
AGL_CALL_PATH = PROXY_ATTEMPT_PATH + AGL_OPENAI_SUFFIX
PROXY_CALL_MARK = PROXY_PREFIX + PROXY_CALL_PATH.split("{", 1)[0]  # "/proxy/rollout/"

# Agent Lightning v1.0's events endpoint on the store server (a reward, or any other event).
AGL_EVENTS_PATH = "/api/rollouts/{rollout_id}/attempt/{attempt_id}/events"
AGL_REWARD_EVENT = "reward"
AGL_MODEL_REQUEST_EVENT = "model_request"  # recorded by the proxy, never posted


def proxy_base_url(proxy_url: str, rollout_id: str, attempt_id: str, mode: str) -> str:
    """The OpenAI base URL of the LLM proxy (`proxy_url` ends in `/proxy`) for one attempt and mode."""
    path = PROXY_CALL_PATH.format(
        rollout_id=quote(rollout_id, safe=""), attempt_id=quote(attempt_id, safe=""), mode=mode
    )
    return proxy_url.rstrip("/") + path


def agl_base_url(base_url: str) -> str:
    """A proxy base URL in Agent Lightning v1.0's `/openai/v1` form; any other URL unchanged."""
    if is_proxy_url(base_url) and base_url.endswith(OPENAI_SUFFIX):
        return base_url[: -len(OPENAI_SUFFIX)] + AGL_OPENAI_SUFFIX
    return base_url


def agl_event_url(store_url: str, rollout_id: str, attempt_id: str) -> str:
    """Agent Lightning v1.0's `AGL_EVENT_URL` of one attempt on the store server at `store_url`."""
    path = AGL_EVENTS_PATH.format(
        rollout_id=quote(rollout_id, safe=""), attempt_id=quote(attempt_id, safe="")
    )
    return store_url.rstrip("/") + path


def is_proxy_url(base_url: str) -> bool:
    """Whether a base URL points at the LightningRL proxy (whose calls are recorded there)."""
    return PROXY_CALL_MARK in base_url
