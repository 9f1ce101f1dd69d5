"""CallRequest: an agent's OpenAI request, checked, and rewritten for the rollout's LLM and mode."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import orjson

from lightningstore.data.resource import LLM
from lightningstore.llm_record import JSON, Kind
from lightningstore.proxy.config import ProxyConfig
from lightningstore.proxy.errors import ProxyError
from lightningstore.proxy.params import check_limits, forwarded


@dataclass(frozen=True)
class CallRequest:
    """What the agent sent, what goes upstream, and what the agent must get back."""

    kind: Kind
    original: JSON
    body: JSON
    stream: bool
    wants_token_ids: bool
    wants_logprobs: bool

    @property
    def path(self) -> str:
        """The upstream path under the endpoint's /v1."""
        return "/chat/completions" if self.kind == "chat" else "/completions"

    @property
    def prompt(self) -> Any:
        """The messages (chat) or prompt (completions) as sent."""
        return self.original.get("messages") if self.kind == "chat" else self.original.get("prompt")


def parse_body(raw: bytes, kind: Kind) -> JSON:
    """The JSON object of an OpenAI request; 400 for malformed JSON, 422 for a wrong shape."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise ProxyError(400, f"malformed JSON body: {error}") from None
    if not isinstance(data, dict):
        raise ProxyError(422, f"the body must be a JSON object, got {type(data).__name__}")
    if kind == "chat":
        _check_messages(data.get("messages"))
    else:
        prompt = data.get("prompt")
        if not isinstance(prompt, str | list) or not prompt:
            raise ProxyError(422, f"prompt must be a non-empty string or list, got {prompt!r:.80}", "prompt")
    n = data.get("n")
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
        raise ProxyError(422, f"n must be a positive integer, got {n!r}", "n")
    if not isinstance(data.get("stream", False), bool | None):
        raise ProxyError(422, f"stream must be a boolean, got {data['stream']!r}", "stream")
    return data


def _check_messages(messages: Any) -> None:
    if not isinstance(messages, list) or not messages:
        raise ProxyError(422, f"messages must be a non-empty list, got {messages!r:.80}", "messages")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ProxyError(
                422,
                f"messages[{index}] must be an object with a string role, got {message!r:.80}",
                "messages",
            )


def merge_sampling(body: JSON, agent: JSON, llm: LLM, mode: str, config: ProxyConfig) -> None:
    """Write the resource's sampling into `body`: defaults, then the mode's (`LLM.mode_sampling`).

    The agent's own values (non-null keys of `agent`) win over defaults unless `config.defaults_win`,
    and over the mode's unless the mode is in `config.mode_overrides_win` and not in the resource's
    `respect_agent_sampling`. By default every mode's values win: in train mode the trainer's log-probs
    assume temperature 1.0 and top_p 1.0, whatever the agent asked.
    """
    given = {key for key, value in agent.items() if value is not None}
    for key, value in llm.sampling.items():
        if config.defaults_win or key not in given:
            body[key] = value
    overrides_win = mode in config.mode_overrides_win and mode not in llm.respect_agent_sampling
    for key, value in llm.mode_sampling(mode).items():
        if overrides_win or key not in given:
            body[key] = value


def call_seed(rollout_id: str, agent: JSON) -> int:
    """A seed for one call: its rollout id and the agent's request, hashed (31 bits, as vLLM takes)."""
    digest = hashlib.sha256(rollout_id.encode() + b"\0" + orjson.dumps(agent, option=orjson.OPT_SORT_KEYS))
    return int.from_bytes(digest.digest()[:4], "little") & 0x7FFFFFFF


def prepare(
    kind: Kind,
    agent: JSON,
    llm: LLM,
    mode: str,
    config: ProxyConfig,
    *,
    ask_tokens: bool = True,
    rollout_id: str | None = None,
) -> CallRequest:
    """The upstream request: the agent's keys `forwarded` allows and `check_limits` passes (400 naming
    one either refuses), the resource's model and sampling, (`ask_tokens`) asking for token ids and
    logprobs, and a seed from `rollout_id` when the resource `seed_calls` and the agent gave none."""
    body = forwarded(agent, kind, openai_compatible=llm.provider == "openai")
    check_limits(agent, llm, mode)
    body["model"] = llm.model
    merge_sampling(body, agent, llm, mode, config)
    if llm.seed_calls and rollout_id is not None and body.get("seed") is None:
        body["seed"] = call_seed(rollout_id, agent)
    wants_logprobs = bool(agent.get("logprobs")) if kind == "chat" else agent.get("logprobs") is not None
    if ask_tokens:
        if kind == "chat":
            body["logprobs"] = True
        elif not wants_logprobs:
            body["logprobs"] = 1
        body["return_token_ids"] = True
    return CallRequest(
        kind=kind,
        original=agent,
        body=body,
        stream=bool(agent.get("stream")),
        wants_token_ids=bool(agent.get("return_token_ids")),
        wants_logprobs=wants_logprobs,
    )
