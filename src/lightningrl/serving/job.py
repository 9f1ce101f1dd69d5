"""Job: one request on its way through the batcher, and the events the generation thread sends back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from lightningrl.serving.model import LoadedModel
from lightningrl.serving.sampling import SamplingParams
from lightningrl.serving.sequence import Delta

Encoder = Callable[[LoadedModel], list[list[int]]]


@dataclass(frozen=True)
class Started:
    """The batch holding the job began: the prompts as tokenized and the model that serves them."""

    prompt_ids: list[list[int]]
    model: LoadedModel


@dataclass(frozen=True)
class Failed:
    """The job cannot complete; `status` 4xx means the request is at fault, 5xx the server."""

    message: str
    status: int = 500


Event = Started | Delta | Failed


@dataclass
class Job:
    """A request's prompts, choices per prompt and sampling parameters, plus its event queue."""

    prompt_ids: list[list[int]]
    n: int
    params: SamplingParams
    stream: bool
    encode: Encoder
    model_version: int
    loop: asyncio.AbstractEventLoop
    events: asyncio.Queue[Event] = field(default_factory=asyncio.Queue)
    cancelled: bool = False

    @property
    def rows(self) -> int:
        """How many sequences the job adds to a batch."""
        return len(self.prompt_ids) * self.n

    def prompts_for(self, model: LoadedModel) -> list[list[int]]:
        """The prompt ids under `model` (tokenized again if a reload changed the model)."""
        return self.prompt_ids if model.version == self.model_version else self.encode(model)

    def emit(self, event: Event) -> None:
        """Hand an event to the request's coroutine from any thread."""
        try:
            self.loop.call_soon_threadsafe(self.events.put_nowait, event)
        except RuntimeError:  # the event loop is closed: nobody is listening any more
            self.cancelled = True
