"""CallRecord: what the model answered (text, exact token ids, logprobs), gathered from a body or chunks.

The one parser of OpenAI-shaped responses (chat and text completions, whole bodies or stream chunks, with
vLLM's `return_token_ids` fields when present), shared by the proxy and the runner's instrumentation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["chat", "completion"]
"""Which OpenAI endpoint a call used: chat completions or (text) completions."""
JSON = dict[str, Any]


@dataclass
class ChoiceRecord:
    """One choice; token fields stay None when the upstream did not report them."""

    index: int
    text: str = ""
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    finish_reason: str | None = None
    prompt_token_ids: list[int] | None = None

    def as_json(self) -> JSON:
        body: JSON = {
            "index": self.index,
            "text": self.text,
            "token_ids": self.token_ids,
            "logprobs": self.logprobs,
            "finish_reason": self.finish_reason,
        }
        if self.prompt_token_ids is not None:  # completions: each choice names its prompt
            body["prompt_token_ids"] = self.prompt_token_ids
        return body


@dataclass
class CallRecord:
    """One call's outcome: filled from a whole response body, or chunk by chunk from a stream."""

    kind: Kind
    prompt_token_ids: list[int] | None = None
    choices: dict[int, ChoiceRecord] = field(default_factory=dict)
    response_id: str | None = None
    response_model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    status: int = 200
    error: str | None = None
    upstream: str | None = None
    retries: int = 0

    def absorb(self, data: JSON) -> None:
        """Add a response body or one stream chunk (chat `message`/`delta` or completion `text`)."""
        self.response_id = self.response_id or data.get("id")
        self.response_model = self.response_model or data.get("model")
        if self.prompt_token_ids is None:
            self.prompt_token_ids = _ints(data.get("prompt_token_ids"))
        usage = data.get("usage")
        if isinstance(usage, dict):
            self.input_tokens = usage.get("prompt_tokens", self.input_tokens)
            self.output_tokens = usage.get("completion_tokens", self.output_tokens)
        for item in data.get("choices") or ():
            if isinstance(item, dict):
                self._absorb_choice(item)

    def _absorb_choice(self, item: JSON) -> None:
        index = item.get("index", 0)
        choice = self.choices.get(index)
        if choice is None:
            choice = self.choices[index] = ChoiceRecord(index)
        if self.kind == "chat":
            message = item.get("message") or item.get("delta") or {}
            choice.text += message.get("content") or ""
        else:
            choice.text += item.get("text") or ""
        token_ids = _ints(item.get("token_ids"))
        if token_ids is not None:
            choice.token_ids = (choice.token_ids or []) + token_ids
        if choice.prompt_token_ids is None:
            choice.prompt_token_ids = _ints(item.get("prompt_token_ids"))
        logprobs = _logprobs(self.kind, item.get("logprobs"))
        if logprobs is not None:
            choice.logprobs = (choice.logprobs or []) + logprobs
        if item.get("finish_reason") is not None:
            choice.finish_reason = item["finish_reason"]

    def ordered_choices(self) -> list[ChoiceRecord]:
        return [self.choices[index] for index in sorted(self.choices)]

    def prompt_ids(self) -> list[int] | None:
        """The prompt the model saw (for completions, the first choice's prompt)."""
        if self.prompt_token_ids is not None:
            return self.prompt_token_ids
        first = self.ordered_choices()[:1]
        return first[0].prompt_token_ids if first else None

    def has_tokens(self) -> bool:
        """Non-empty prompt ids, and for every choice non-empty response ids with one logprob per token."""
        choices = self.ordered_choices()
        if not self.prompt_ids() or not choices:
            return False
        return all(
            c.token_ids and c.logprobs is not None and len(c.logprobs) == len(c.token_ids) for c in choices
        )


def _ints(value: Any) -> list[int] | None:
    """A list of token ids, or None when `value` is anything else (not recorded)."""
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return value
    return None


def _logprobs(kind: Kind, value: Any) -> list[float] | None:
    """The sampled tokens' logprobs from a chat (`content[].logprob`) or completions logprobs object.

    None when absent or when any entry is not a number (a partial list would misalign with the tokens).
    """
    if not isinstance(value, dict):
        return None
    if kind == "chat":
        content = value.get("content")
        if not isinstance(content, list):
            return None
        values = [entry.get("logprob") if isinstance(entry, dict) else None for entry in content]
    else:
        values = value.get("token_logprobs")
        if not isinstance(values, list):
            return None
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return None
    return [float(v) for v in values]
