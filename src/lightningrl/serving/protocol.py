"""Request bodies of the OpenAI-compatible endpoints, validated (a bad field is a 400 with its reason)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from lightningrl.serving.tool_prompt import forced_call_prefix

_INT64 = 2**63 - 1
MAX_STOP_STRINGS = 16


class _Body(BaseModel):
    """OpenAI clients send fields this server does not use; they are ignored, not rejected."""

    model_config = ConfigDict(extra="ignore")


class StreamOptions(_Body):
    """`stream_options`: whether a final chunk reports usage."""

    include_usage: bool = False


class ContentPart(_Body):
    """One part of a message's content; only text is understood."""

    type: str
    text: str | None = None


class ChatMessage(_Body):
    """One chat message (role and text content)."""

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None

    def text(self) -> str:
        """The content as one string."""
        if self.content is None or isinstance(self.content, str):
            return self.content or ""
        for part in self.content:
            if part.type != "text" or part.text is None:
                raise ValueError(f"only text content parts are supported, got a part of type {part.type!r}")
        return "".join(part.text or "" for part in self.content)


class _Sampling(_Body):
    """Fields shared by chat and text completions (OpenAI's, plus vLLM's extensions)."""

    model: str | None = None
    n: int = Field(default=1, ge=1, le=64)
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0.0, le=100.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    stop: str | list[str] | None = None
    seed: int | None = Field(default=None, ge=-_INT64 - 1, le=_INT64)
    stream: bool = False
    stream_options: StreamOptions | None = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: dict[str, float] | None = None
    # vLLM extensions
    return_token_ids: bool = False
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False

    @field_validator("stop")
    @classmethod
    def _check_stop(cls, stop: str | list[str] | None) -> str | list[str] | None:
        """Stop strings must be non-empty, and at most MAX_STOP_STRINGS of them."""
        values = [stop] if isinstance(stop, str) else stop or []
        if len(values) > MAX_STOP_STRINGS:
            raise ValueError(f"at most {MAX_STOP_STRINGS} stop strings are allowed, got {len(values)}")
        if any(not value for value in values):
            raise ValueError("stop strings must not be empty")
        return stop

    @model_validator(mode="after")
    def _check_unsupported(self) -> _Sampling:
        """Refuse options this server would otherwise silently ignore."""
        if self.presence_penalty or self.frequency_penalty:
            raise ValueError("presence_penalty and frequency_penalty are not supported (must be 0)")
        if self.logit_bias:
            raise ValueError("logit_bias is not supported")
        if self.stream_options is not None and not self.stream:
            raise ValueError("stream_options is only allowed when stream is true")
        return self

    def stop_strings(self) -> tuple[str, ...]:
        """`stop` as a tuple."""
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())

    def include_usage(self) -> bool:
        """Whether a streamed response ends with a usage chunk."""
        return bool(self.stream_options and self.stream_options.include_usage)


class ChatCompletionRequest(_Sampling):
    """`POST /v1/chat/completions`."""

    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    add_generation_prompt: bool = True

    @model_validator(mode="after")
    def _check_chat(self) -> ChatCompletionRequest:
        """`top_logprobs` needs `logprobs`; a forcing `tool_choice` needs the tools it forces; tools
        are not streamed."""
        if self.top_logprobs and not self.logprobs:
            raise ValueError("top_logprobs requires logprobs to be true")
        self._check_tool_choice()
        if self.tools and self.stream:
            raise ValueError("streaming with tools is not supported by this server (send stream: false)")
        return self

    def _check_tool_choice(self) -> None:
        """ "auto", "none", "required" or `{"type": "function", "function": {"name": N}}` with N offered."""
        choice = self.tool_choice
        if choice in (None, "auto", "none"):
            return
        offered = [str((tool.get("function") or {}).get("name")) for tool in self.tools or ()]
        if choice == "required":
            if not offered:
                raise ValueError("tool_choice 'required' needs `tools`: none were offered")
            return
        if isinstance(choice, str):
            raise ValueError(f"tool_choice {choice!r} is not one of 'auto', 'none', 'required' or a function")
        function = choice.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if choice.get("type") != "function" or not isinstance(name, str):
            raise ValueError(
                f'tool_choice {choice!r} is not {{"type": "function", "function": {{"name": ...}}}}'
            )
        if name not in offered:
            raise ValueError(f"tool_choice names the function {name!r}, which is not in `tools` ({offered})")

    def forced_text(self) -> str:
        """What the server writes for the model before it generates (`tool_prompt.forced_call_prefix`)."""
        return forced_call_prefix(self.tool_choice)

    def parses_tool_calls(self) -> bool:
        """Whether the answer's `<tool_call>` blocks become `tool_calls` (tools given, choice not none)."""
        return bool(self.tools) and self.tool_choice != "none"

    def token_budget(self) -> int | None:
        """The requested completion length (`max_completion_tokens` wins over `max_tokens`)."""
        return self.max_completion_tokens or self.max_tokens

    def logprob_count(self) -> int | None:
        """None without logprobs, else how many alternatives to report per token."""
        return (self.top_logprobs or 0) if self.logprobs else None


class CompletionRequest(_Sampling):
    """`POST /v1/completions`: the prompt is text or token ids (one prompt or a list of them)."""

    prompt: str | list[int] | list[str] | list[list[int]]
    logprobs: int | None = Field(default=None, ge=0, le=20)
    echo: bool = False
    suffix: str | None = None
    best_of: int | None = None

    @model_validator(mode="after")
    def _check_completion(self) -> CompletionRequest:
        """Refuse empty prompts and the options this server does not implement."""
        if isinstance(self.prompt, list) and (not self.prompt or any(p in ("", []) for p in self.prompt)):
            raise ValueError("prompt must not be empty")
        if self.prompt == "":
            raise ValueError("prompt must not be empty")
        if self.echo:
            raise ValueError("echo is not supported")
        if self.suffix:
            raise ValueError("suffix is not supported")
        if self.best_of is not None and self.best_of != self.n:
            raise ValueError("best_of is not supported (it must equal n)")
        return self

    def token_budget(self) -> int | None:
        """The requested completion length."""
        return self.max_tokens

    def logprob_count(self) -> int | None:
        """None without logprobs, else how many alternatives to report per token."""
        return self.logprobs


class ReloadRequest(_Body):
    """`POST /reload`: the checkpoint directory to serve (default: the current one)."""

    checkpoint: str | None = None
