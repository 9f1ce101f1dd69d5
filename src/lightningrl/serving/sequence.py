"""Sequence: one generated choice, its stop conditions, and the part of it safe to hand out so far."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from lightningrl.serving.sampling import SamplingParams

Decode = Callable[[list[int]], str]


@dataclass(frozen=True)
class Delta:
    """Newly released tokens of one choice (the last one carries `finish_reason`)."""

    index: int
    token_ids: list[int]
    logprobs: list[float]
    top_logprobs: list[list[tuple[int, float]]]
    text: str
    finish_reason: str | None = None
    stop_reason: str | int | None = None


@dataclass
class Sequence:
    """One choice being generated: tokens so far, why it stopped, and what was already released.

    Stopping mirrors vLLM: an EOS or stop token id ends the choice and stays in `token_ids`. A stop
    string ends it too; then the returned tokens are the longest prefix whose text holds no part of
    the stop string, so the returned text is always `decode(token_ids)` and never shows the stop.
    """

    index: int
    prompt_ids: list[int]
    params: SamplingParams
    generator: torch.Generator
    eos_ids: frozenset[int]
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top_logprobs: list[list[tuple[int, float]]] = field(default_factory=list)
    finish_reason: str | None = None
    stop_reason: str | int | None = None
    kept: int | None = None
    released: int = 0
    released_text: str = ""

    @property
    def finished(self) -> bool:
        """Whether this choice has stopped."""
        return self.finish_reason is not None

    def append(self, token: int, logprob: float, top: list[tuple[int, float]], decode: Decode) -> None:
        """Record one sampled token and check every stop condition."""
        self.token_ids.append(token)
        self.logprobs.append(logprob)
        self.top_logprobs.append(top)
        if token in self.params.stop_token_ids:
            self.finish_reason, self.stop_reason = "stop", token
        elif token in self.eos_ids and not self.params.ignore_eos:
            self.finish_reason = "stop"
        elif self.params.stop and self._check_stop_strings(decode):
            self.finish_reason = "stop"
        elif len(self.token_ids) >= self.params.max_tokens:
            self.finish_reason = "length"

    def abort(self) -> None:
        """Stop without releasing anything more (the client went away)."""
        self.finish_reason = "abort"
        self.kept = self.released

    def _check_stop_strings(self, decode: Decode) -> bool:
        """End at the earliest stop string in the text; keep only tokens entirely before it."""
        text = decode(self.token_ids)
        found = [(text.find(stop), stop) for stop in self.params.stop if stop in text]
        if not found:
            return False
        position, stop = min(found)
        self.stop_reason = stop
        before = text[:position]
        for count in range(len(self.token_ids) - 1, -1, -1):
            if before.startswith(decode(self.token_ids[:count])):
                self.kept = count
                break
        else:
            self.kept = 0
        return True

    def take_delta(self, decode: Decode, *, final_only: bool) -> Delta | None:
        """Release what is safe to show now (everything once finished), or None if nothing new."""
        if self.finished:
            end = self.kept if self.kept is not None else len(self.token_ids)
        elif final_only:
            return None
        else:
            end = self._safe_end(decode)
        if end <= self.released and not self.finished:
            return None
        start = self.released
        text = decode(self.token_ids[:end])
        delta = Delta(
            index=self.index,
            token_ids=self.token_ids[start:end],
            logprobs=self.logprobs[start:end],
            top_logprobs=self.top_logprobs[start:end],
            text=text[len(self.released_text) :],
            finish_reason=self.finish_reason,
            stop_reason=self.stop_reason,
        )
        self.released, self.released_text = max(end, start), text
        return delta

    def _safe_end(self, decode: Decode) -> int:
        """Most tokens whose text is complete UTF-8 and does not end in the start of a stop string."""
        for end in range(len(self.token_ids), self.released, -1):
            text = decode(self.token_ids[:end])
            if text.endswith("\ufffd"):
                continue
            if any(text.endswith(stop[:cut]) for stop in self.params.stop for cut in range(1, len(stop))):
                continue
            return end
        return self.released
