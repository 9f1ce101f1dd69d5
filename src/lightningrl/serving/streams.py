"""Server-sent event streams for chat and text completions, in OpenAI's chunk format."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from lightningrl.serving.job import Failed, Job, Started
from lightningrl.serving.protocol import ChatCompletionRequest, CompletionRequest
from lightningrl.serving.responses import (
    JSON,
    Choice,
    ResponseHeader,
    chat_logprobs,
    chunk,
    completion_logprobs,
    usage,
)
from lightningrl.serving.sequence import Delta
from lightningrl.serving.service import next_event

DONE = "data: [DONE]\n\n"


def sse(body: JSON) -> str:
    """One server-sent event carrying `body`."""
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"


async def deltas(job: Job) -> AsyncIterator[Delta | Failed]:
    """The job's deltas until every choice has finished (or a failure); cancels the job if abandoned."""
    pending = job.rows
    try:
        for _ in range(job.rows * (job.params.max_tokens + 1)):  # at most one delta per token per choice
            if pending == 0:
                return
            event = await next_event(job)
            if isinstance(event, Failed):
                yield event
                return
            if isinstance(event, Delta):
                pending -= event.finish_reason is not None
                yield event
    finally:
        if pending:
            job.cancelled = True


def _error(header: ResponseHeader, failure: Failed) -> str:
    """An error event, as OpenAI sends when a stream breaks."""
    return sse(
        {
            "id": header.id,
            "error": {"message": failure.message, "type": "server_error", "code": failure.status},
        }
    )


async def chat_stream(
    request: ChatCompletionRequest, job: Job, started: Started, header: ResponseHeader
) -> AsyncIterator[str]:
    """`chat.completion.chunk` events: roles first, then content deltas, then optional usage, then [DONE]."""
    tokenizer = started.model.tokenizer
    kind = "chat.completion.chunk"
    first = [
        {"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
        for i in range(job.rows)
    ]
    extra = {"prompt_token_ids": started.prompt_ids[0]} if request.return_token_ids else {}
    yield sse(chunk(header, kind, first, **extra))
    choices = [Choice(index) for index in range(job.rows)]
    async for event in deltas(job):
        if isinstance(event, Failed):
            yield _error(header, event)
            return
        choices[event.index].add(event)
        item: JSON = {
            "index": event.index,
            "delta": {"content": event.text} if event.text or event.token_ids else {},
            "logprobs": chat_logprobs(tokenizer, event) if request.logprobs else None,
            "finish_reason": event.finish_reason,
        }
        if event.finish_reason is not None:
            item["stop_reason"] = event.stop_reason
        if request.return_token_ids:
            item["token_ids"] = event.token_ids
        yield sse(chunk(header, kind, [item]))
    if request.include_usage():
        yield sse(chunk(header, kind, [], usage=usage(started.prompt_ids, choices)))
    yield DONE


async def completion_stream(
    request: CompletionRequest, job: Job, started: Started, header: ResponseHeader
) -> AsyncIterator[str]:
    """`text_completion` events: text deltas per choice, then optional usage, then [DONE]."""
    tokenizer = started.model.tokenizer
    kind = "text_completion"
    choices = [Choice(index) for index in range(job.rows)]
    async for event in deltas(job):
        if isinstance(event, Failed):
            yield _error(header, event)
            return
        choice = choices[event.index]
        offset, first = len(choice.text), not choice.token_ids
        choice.add(event)
        item: JSON = {
            "index": event.index,
            "text": event.text,
            "logprobs": completion_logprobs(tokenizer, event, offset)
            if request.logprobs is not None
            else None,
            "finish_reason": event.finish_reason,
            "stop_reason": event.stop_reason,
        }
        if request.return_token_ids:
            if first:
                item["prompt_token_ids"] = started.prompt_ids[event.index // job.n]
            item["token_ids"] = event.token_ids
        yield sse(chunk(header, kind, [item]))
    if request.include_usage():
        yield sse(chunk(header, kind, [], usage=usage(started.prompt_ids, choices)))
    yield DONE
