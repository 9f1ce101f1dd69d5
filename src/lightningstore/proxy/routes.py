"""The gateway's routes: OpenAI endpoints per attempt and mode, and the admin pause/resume/drain."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

import lightningstore.auth.raw_path  # noqa: F401  (registers the `{name:id}` path convertor)
from lightningstore import semconv
from lightningstore.auth.bearer import CallerDep, current_caller
from lightningstore.auth.tokens import Caller, Role
from lightningstore.data.status import RolloutMode
from lightningstore.proxy.errors import ProxyError
from lightningstore.proxy.gateway import Gateway, authorize
from lightningstore.proxy.request import Kind

_IDS = {"rollout_id": "{rollout_id:id}", "attempt_id": "{attempt_id:id}", "mode": "{mode}"}
CALL = semconv.PROXY_CALL_PATH.format(**_IDS)
AGL_CALL = semconv.AGL_CALL_PATH.format(**_IDS)
"""The same calls at Agent Lightning v1.0's `/openai/v1` base URL: an agent written for it runs unchanged."""
ADMIN_ROLES = frozenset({Role.ADMIN, Role.ALGORITHM})

router = APIRouter(prefix=semconv.PROXY_PREFIX, tags=["proxy"])


async def current_gateway(request: Request) -> Gateway:
    # async: FastAPI runs a sync dependency on a worker thread, a thread hop per call.
    return request.app.state.proxy


GatewayDep = Annotated[Gateway, Depends(current_gateway)]


async def _call(
    request: Request, kind: Kind, rollout_id: str, attempt_id: str, mode: RolloutMode, *, agl: bool = False
) -> Response:
    # The hot routes resolve gateway and caller inline: FastAPI's dependency solving costs more.
    gateway: Gateway = request.app.state.proxy
    return await gateway.call(
        request, kind, current_caller(request), rollout_id, attempt_id, mode.value, token_ids=agl
    )


@router.post(CALL + "/chat/completions", response_model=None)
async def chat_completions(request: Request, rollout_id: str, attempt_id: str, mode: RolloutMode) -> Response:
    """OpenAI chat completions for one attempt, recorded as one LLM span with exact token ids."""
    return await _call(request, "chat", rollout_id, attempt_id, mode)


@router.post(CALL + "/completions", response_model=None)
async def completions(request: Request, rollout_id: str, attempt_id: str, mode: RolloutMode) -> Response:
    """OpenAI text completions for one attempt, recorded as one LLM span with exact token ids."""
    return await _call(request, "completion", rollout_id, attempt_id, mode)


@router.post(AGL_CALL + "/chat/completions", response_model=None)
async def agl_chat_completions(
    request: Request, rollout_id: str, attempt_id: str, mode: RolloutMode
) -> Response:
    """Chat completions at Agent Lightning v1.0's base URL: as v1.0's gateway, the reply always carries
    the token ids (`prompt_token_ids`, `choices[].token_ids`), asked for or not."""
    return await _call(request, "chat", rollout_id, attempt_id, mode, agl=True)


@router.post(AGL_CALL + "/completions", response_model=None)
async def agl_completions(request: Request, rollout_id: str, attempt_id: str, mode: RolloutMode) -> Response:
    """Text completions at Agent Lightning v1.0's base URL, token ids always in the reply (a
    token-in/token-out agent reads `choices[0].token_ids`)."""
    return await _call(request, "completion", rollout_id, attempt_id, mode, agl=True)


@router.get(CALL + "/models", response_model=None)
@router.get(AGL_CALL + "/models", response_model=None)
async def models(
    gateway: GatewayDep, caller: CallerDep, rollout_id: str, attempt_id: str, mode: RolloutMode
) -> dict[str, Any] | Response:
    """The models this rollout's calls are served by."""
    try:
        authorize(caller, rollout_id, attempt_id)
        binding = await gateway.bindings.get(rollout_id)
        binding.check_mode(mode.value)
    except ProxyError as error:
        return error.response()
    cards = [
        {"id": bound.llm.model, "object": "model", "created": 0, "owned_by": bound.llm.provider}
        for bound in binding.llms
    ]
    return {"object": "list", "data": cards}


def _require_admin(caller: Caller, request: Request) -> Response | None:
    if caller.role not in ADMIN_ROLES:
        return ProxyError(
            403, f"the {caller.role.value} credential may not pause or drain the gateway"
        ).response()
    processes = getattr(request.app.state, "server_processes", 1)
    if processes > 1:
        return ProxyError(
            409,
            f"this store server runs {processes} processes, each with its own gateway: pausing or "
            "draining one would leave the others serving. Serve the model gateway from a "
            "single-process store server (--workers 1) on the same database",
        ).response()
    return None


@router.post("/admin/pause", response_model=None)
async def pause(request: Request, gateway: GatewayDep, caller: CallerDep) -> dict[str, Any] | Response:
    """New calls wait (up to `pause_wait_s`) until resumed; calls in flight continue."""
    if (refused := _require_admin(caller, request)) is not None:
        return refused
    gateway.pause_switch.pause()
    return gateway.pause_switch.counts()


@router.post("/admin/resume", response_model=None)
async def resume(request: Request, gateway: GatewayDep, caller: CallerDep) -> dict[str, Any] | Response:
    """Let waiting and new calls through."""
    if (refused := _require_admin(caller, request)) is not None:
        return refused
    gateway.pause_switch.resume()
    return gateway.pause_switch.counts()


@router.post("/admin/drain", response_model=None)
async def drain(
    request: Request,
    gateway: GatewayDep,
    caller: CallerDep,
    timeout_s: Annotated[float | None, Query(ge=0, le=3600)] = None,
) -> dict[str, Any] | Response:
    """Wait until no call is in flight (bounded); `drained` says whether that happened."""
    if (refused := _require_admin(caller, request)) is not None:
        return refused
    return await gateway.pause_switch.drain(
        gateway.config.drain_timeout_s if timeout_s is None else timeout_s
    )


@router.get("/admin/status", response_model=None)
async def status(request: Request, gateway: GatewayDep, caller: CallerDep) -> dict[str, Any] | Response:
    """Whether the gateway is paused, and its call counts."""
    if (refused := _require_admin(caller, request)) is not None:
        return refused
    return gateway.pause_switch.counts()
