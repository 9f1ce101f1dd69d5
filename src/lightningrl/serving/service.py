"""InferenceService: the model, the engine and the batcher behind the HTTP routes, and reload."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypedDict

from lightningrl.serving.batcher import Batcher
from lightningrl.serving.engine import Engine
from lightningrl.serving.job import Encoder, Event, Failed, Job, Started
from lightningrl.serving.model import LoadedModel, load_model, resolve_device
from lightningrl.serving.protocol import ChatCompletionRequest, ChatMessage, CompletionRequest
from lightningrl.serving.responses import Choice
from lightningrl.serving.sampling import SamplingParams
from lightningrl.serving.sequence import Delta
from lightningrl.serving.tool_calls import template_tool_calls
from lightningrl.serving.tool_prompt import render_chat


class RequestError(Exception):
    """A request the server refuses; `status` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400) -> None:
        """Refuse with `message`."""
        super().__init__(message)
        self.message = message
        self.status = status


def _template_message(message: ChatMessage, index: int) -> dict[str, Any]:
    """One message as the chat template reads it (tool calls' arguments as objects)."""
    item: dict[str, Any] = {"role": message.role, "content": message.text()}
    if message.tool_calls:
        item["tool_calls"] = template_tool_calls(message.tool_calls, f"messages[{index}].tool_calls")
    for key in ("tool_call_id", "name"):
        if getattr(message, key) is not None:
            item[key] = getattr(message, key)
    return item


def chat_encoder(
    messages: Sequence[ChatMessage],
    add_generation_prompt: bool,
    tools: Sequence[dict[str, Any]] | None = None,
    forced: str = "",
) -> Encoder:
    """Tokenize chat messages (and the tools offered) with a model's chat template, then `forced`:
    text the server writes for the model (the start of a call `tool_choice` forces).

    A template without a tool section gets the conversation rewritten as Qwen2.5 renders tools
    (`tool_prompt.hermes_conversation`) first; one that renders tools gets it as given.
    """
    conversation = [_template_message(message, index) for index, message in enumerate(messages)]
    tool_list = list(tools) if tools else None

    def encode(model: LoadedModel) -> list[list[int]]:
        """The rendered conversation's token ids."""
        text = render_chat(
            model.tokenizer,
            conversation,
            tool_list,
            add_generation_prompt=add_generation_prompt,
            template_renders_tools=model.template_renders_tools,
        )
        return [model.tokenizer.encode(text + forced, add_special_tokens=False)]

    return encode


def completion_encoder(prompt: str | list[int] | list[str] | list[list[int]]) -> Encoder:
    """Tokenize text prompts; token-id prompts pass through exactly as given."""
    prompts: list[str | list[int]]
    if isinstance(prompt, str):
        prompts = [prompt]
    elif all(isinstance(item, int) for item in prompt):
        prompts = [[int(token) for token in prompt]]  # type: ignore[arg-type]
    else:
        prompts = list(prompt)  # type: ignore[arg-type]

    def encode(model: LoadedModel) -> list[list[int]]:
        """Each prompt's token ids."""
        return [model.tokenizer.encode(item) if isinstance(item, str) else list(item) for item in prompts]

    return encode


class ServingOptions(TypedDict, total=False):
    """How an `InferenceService` runs, as `create_app` and `run_server` pass it on (defaults: its own)."""

    device: str | None
    max_batch_size: int
    batch_wait_ms: float
    served_model_name: str | None
    cpu_threads: int | None
    prefix_cache: bool
    packed_weights: bool


class InferenceService:
    """Serves one checkpoint with batched generation; `reload` swaps in new weights between batches."""

    def __init__(
        self,
        checkpoint_dir: str | Path,
        *,
        device: str | None = None,
        max_batch_size: int = 16,
        batch_wait_ms: float = 5.0,
        served_model_name: str | None = None,
        cpu_threads: int | None = None,
        prefix_cache: bool = True,
        packed_weights: bool = True,
    ) -> None:
        """Load the checkpoint (the batcher starts with `start`); `prefix_cache`: `Engine`'s;
        `packed_weights`: `load_model`'s `packed`."""
        self.device = resolve_device(device)
        self.packed_weights = packed_weights
        self.model_name = served_model_name or str(checkpoint_dir)
        self.engine = Engine(
            load_model(checkpoint_dir, device=self.device, version=0, packed=packed_weights),
            prefix_cache=prefix_cache,
        )
        self.batcher = Batcher(
            self.engine,
            max_batch_size=max_batch_size,
            batch_wait_s=batch_wait_ms / 1000,
            cpu_threads=cpu_threads,
        )
        self.reloads = 0
        self._reload_lock = threading.Lock()
        self._task: asyncio.Task[None] | None = None

    @property
    def model(self) -> LoadedModel:
        """The model new batches use."""
        return self.engine.model

    def reload(self, checkpoint_dir: str | Path | None = None) -> LoadedModel:
        """Load `checkpoint_dir` (default: the current one) and serve it from the next batch on.

        Blocking and thread-safe; batches already running finish on the weights they started with.
        """
        with self._reload_lock:
            current = self.engine.model
            loaded = load_model(
                checkpoint_dir or current.checkpoint,
                device=self.device,
                version=current.version + 1,
                packed=self.packed_weights,
            )
            self.engine.model = loaded
            self.reloads += 1
            return loaded

    async def start(self) -> None:
        """Start batching on the running event loop."""
        if self._task is None:
            self._task = asyncio.create_task(self.batcher.run(), name="lightningrl-batcher")

    async def stop(self) -> None:
        """Stop batching and the generation thread."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self.batcher.close()

    @staticmethod
    def sampling_params(
        request: ChatCompletionRequest | CompletionRequest, prompt_ids: list[list[int]], model: LoadedModel
    ) -> SamplingParams:
        """The request's sampling parameters, with max_tokens defaulting to the rest of the context."""
        longest = max(len(prompt) for prompt in prompt_ids)
        room = model.max_model_len - longest
        max_tokens = request.token_budget() or room
        if max_tokens > room or max_tokens < 1:
            raise RequestError(
                f"this model's context is {model.max_model_len} tokens; the longest prompt has "
                f"{longest} tokens and max_tokens is {max_tokens}"
            )
        return SamplingParams(
            max_tokens=max_tokens,
            temperature=1.0 if request.temperature is None else request.temperature,
            top_p=1.0 if request.top_p is None else request.top_p,
            stop=request.stop_strings(),
            stop_token_ids=tuple(request.stop_token_ids or ()),
            ignore_eos=request.ignore_eos,
            seed=request.seed,
            logprobs=request.logprob_count(),
        )

    async def submit(
        self, request: ChatCompletionRequest | CompletionRequest, encode: Encoder
    ) -> tuple[Job, Started]:
        """Tokenize, validate and queue a request; returns once its batch has started."""
        model = self.model
        try:
            prompt_ids = encode(model)
        except Exception as error:  # a template or tokenizer refusing this input is the request's fault
            raise RequestError(f"could not tokenize the prompt: {type(error).__name__}: {error}") from error
        if not all(prompt_ids):
            raise RequestError("the prompt is empty")
        params = self.sampling_params(request, prompt_ids, model)
        job = Job(
            prompt_ids=prompt_ids,
            n=request.n,
            params=params,
            stream=request.stream,
            encode=encode,
            model_version=model.version,
            loop=asyncio.get_running_loop(),
        )
        self.batcher.submit(job)  # the engine checks token ids and lengths against the model it uses
        event = await next_event(job)
        if isinstance(event, Failed):
            raise RequestError(event.message, event.status)
        assert isinstance(event, Started)
        return job, event


async def next_event(job: Job) -> Event:
    """The job's next event; a cancelled wait cancels the job."""
    try:
        return await job.events.get()
    except asyncio.CancelledError:
        job.cancelled = True
        raise


async def collect(job: Job) -> list[Choice]:
    """Wait for every choice of a non-streamed job to finish."""
    choices = [Choice(index) for index in range(job.rows)]
    pending = job.rows
    for _ in range(job.rows * (job.params.max_tokens + 1)):  # at most one delta per token per choice
        if pending == 0:
            break
        event = await next_event(job)
        if isinstance(event, Failed):
            raise RequestError(event.message, event.status)
        if isinstance(event, Delta):
            choices[event.index].add(event)
            pending -= event.finish_reason is not None
    return choices
