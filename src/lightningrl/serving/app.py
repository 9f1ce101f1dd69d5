"""create_app: the OpenAI-compatible FastAPI app (chat, completions, models, health, metrics, reload)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any, Unpack

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse

from lightningrl.serving.job import Job
from lightningrl.serving.protocol import ChatCompletionRequest, CompletionRequest, ReloadRequest
from lightningrl.serving.reload_token import reload_allowed
from lightningrl.serving.responses import Choice, ResponseHeader, chat_response, completion_response
from lightningrl.serving.service import (
    InferenceService,
    RequestError,
    ServingOptions,
    chat_encoder,
    collect,
    completion_encoder,
)
from lightningrl.serving.streams import chat_stream, completion_stream

_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


async def _respond(
    stream: bool,
    job: Job,
    events: Callable[[], AsyncIterator[str]],
    body: Callable[[list[Choice]], dict[str, Any]],
) -> JSONResponse | StreamingResponse:
    """The job's server-sent events as they come when the request streams, else one body once every
    choice has finished."""
    if stream:
        return StreamingResponse(events(), media_type="text/event-stream", headers=_SSE_HEADERS)
    return JSONResponse(body(await collect(job)))


def _error(status: int, message: str, param: str | None = None) -> JSONResponse:
    """An OpenAI-style error body."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    return JSONResponse(
        status_code=status,
        content={"error": {"message": message, "type": kind, "param": param, "code": status}},
    )


def _validation_message(error: RequestValidationError) -> tuple[str, str | None]:
    """A readable reason and the offending field from pydantic's errors."""
    parts, param = [], None
    for item in error.errors():
        location = ".".join(str(p) for p in item.get("loc", ()) if p != "body")
        param = param or location or None
        parts.append(f"{location or 'body'}: {item.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request", param


def create_app(
    checkpoint_dir: str | Path,
    *,
    reload_token: str | None = None,
    api_key: str | None = None,
    **options: Unpack[ServingOptions],
) -> FastAPI:
    """An app serving `checkpoint_dir` (device: "cpu", "cuda", or None to pick CUDA when present).

    `reload_token`: `/reload` answers 401 to a request without `Authorization: Bearer <it>` (None: open).
    `api_key`: so do the `/v1` routes without `Authorization: Bearer <it>`, as vLLM's `--api-key`.

    Concurrent requests wait up to `batch_wait_ms` to share a batch of at most `max_batch_size`
    sequences. `cpu_threads` sets torch's threads on the generation thread (None: torch's default).
    `app.state.inference` is the `InferenceService`: call its `reload(dir)` to swap weights.
    """
    service = InferenceService(checkpoint_dir, **options)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        """Run the batcher while the app runs."""
        await service.start()
        try:
            yield
        finally:
            await service.stop()

    app = FastAPI(title="LightningRL inference server", lifespan=lifespan)

    if api_key:  # installed only when asked for: a middleware costs every request, streams included

        @app.middleware("http")
        async def _api_key(request: Request, call_next: Any) -> Any:
            """`/v1/...` answers 401 to a request without the API key (`/healthz` stays open)."""
            if request.url.path.startswith("/v1/") and not reload_allowed(
                api_key, request.headers.get("authorization")
            ):
                return _error(401, "this server wants its API key (Authorization: Bearer)")
            return await call_next(request)

    app.state.inference = service
    created = int(time.time())

    @app.exception_handler(RequestValidationError)
    async def _on_invalid(_: Request, error: RequestValidationError) -> JSONResponse:
        """Malformed bodies are 400s with the field and reason."""
        message, param = _validation_message(error)
        return _error(400, message, param)

    @app.exception_handler(RequestError)
    async def _on_refused(_: Request, error: RequestError) -> JSONResponse:
        """Refused requests carry their own status and reason."""
        return _error(error.status, error.message)

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        """Liveness, and which weights are being served."""
        model = service.model
        return {
            "status": "ok",
            "model": service.model_name,
            "checkpoint": str(model.checkpoint),
            "version": model.version,
        }

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        """The one served model."""
        card = {
            "id": service.model_name,
            "object": "model",
            "created": created,
            "owned_by": "lightningrl",
            "root": str(service.model.checkpoint),
            "max_model_len": service.model.max_model_len,
        }
        return {"object": "list", "data": [card]}

    @app.get("/metrics")
    async def metrics() -> dict[str, Any]:
        """Batching counters (batch sizes in sequences and requests), reloads and the served version."""
        model = service.model
        return {
            "batching": service.batcher.stats.as_dict(),
            "max_batch_size": service.batcher.max_batch_size,
            "reloads": service.reloads,
            "model_version": model.version,
            "checkpoint": str(model.checkpoint),
            "device": service.device,
        }

    @app.post("/reload")
    async def reload(request: Request, body: ReloadRequest | None = None) -> dict[str, Any]:
        """Swap in `checkpoint` (default: reload the current directory); running requests are not failed."""
        if not reload_allowed(reload_token, request.headers.get("authorization")):
            raise RequestError(
                "reloading weights needs this server's reload token (Authorization: Bearer)", 401
            )
        target = body.checkpoint if body else None
        try:
            model = await asyncio.to_thread(service.reload, target)
        except FileNotFoundError as error:
            raise RequestError(str(error), 404) from error
        except (OSError, ValueError) as error:
            raise RequestError(f"could not load checkpoint {target!r}: {error}") from error
        return {"status": "ok", "checkpoint": str(model.checkpoint), "version": model.version}

    @app.post("/v1/chat/completions", response_model=None)
    async def chat_completions(request: ChatCompletionRequest) -> JSONResponse | StreamingResponse:
        """OpenAI chat completions (plus vLLM's return_token_ids)."""
        try:
            encode = chat_encoder(
                request.messages, request.add_generation_prompt, request.tools, request.forced_text()
            )
        except ValueError as error:
            raise RequestError(str(error)) from error
        job, started = await service.submit(request, encode)
        header = ResponseHeader.new("chatcmpl", service.model_name)
        body = partial(
            chat_response,
            header,
            started.model.tokenizer,
            started.prompt_ids[0],
            logprobs=request.logprobs,
            return_token_ids=request.return_token_ids,
            parse_tool_calls=request.parses_tool_calls(),
            forced=request.forced_text(),
        )
        return await _respond(request.stream, job, partial(chat_stream, request, job, started, header), body)

    @app.post("/v1/completions", response_model=None)
    async def completions(request: CompletionRequest) -> JSONResponse | StreamingResponse:
        """OpenAI text completions; the prompt may be token ids, continued exactly."""
        job, started = await service.submit(request, completion_encoder(request.prompt))
        header = ResponseHeader.new("cmpl", service.model_name)
        body = partial(
            completion_response,
            header,
            started.model.tokenizer,
            started.prompt_ids,
            request.n,
            logprobs=request.logprobs is not None,
            return_token_ids=request.return_token_ids,
        )
        return await _respond(
            request.stream, job, partial(completion_stream, request, job, started, header), body
        )

    return app
