"""FastPathMiddleware: the store's hottest routes answered without FastAPI's per-request machinery.

A runner's loop is claim -> spans -> finish, and an algorithm enqueues one rollout at a time: on the
store's workload (bench/store_vs_agl.py) these four routes carry ~90% of the requests, and FastAPI's
routing, dependency solving, body parsing (json.loads, then a second pass to validate) and response
validation cost about as much CPU as the store's own work. Here a well-formed JSON body is parsed
and validated in one pass (`TypeAdapter.validate_json`, the same models and limits as the routes),
the route's own function (`add_spans_as`, `enqueue_as`, `dequeue_as`, `update_attempt_as`) runs
it, and the answer is serialised once. A rollout's spans (GET /v1/rollouts/{rollout_id}/spans with
no query string: the algorithm's read after each rollout) go to `query_spans_as` the same way. When none
of the app's middleware would act on a request, `StoreApp` (server.app) answers it with `serve_hot`
ahead of the whole middleware stack (`early_route` says when).

The model gateway's call routes (`proxy.fast_call.match_call`) go straight to `Gateway.call`, as
their FastAPI routes would. Anything else falls through to the FastAPI app unchanged: other routes, a query string, another
content type, and a body that does not validate (replayed to FastAPI, so that bad input gets exactly
the 4xx answer it always got). Errors raised by the route function get the app's own handlers
(`error_handlers.answer_error`). The OpenAPI document still describes these routes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import unquote

from pydantic import Field, TypeAdapter, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lightningstore.attempt import Attempt, AttemptedRollout
from lightningstore.auth.bearer import current_caller
from lightningstore.proxy.fast_call import ProxyCall, match_call
from lightningstore.rollout import Rollout, RolloutRequest
from lightningstore.server.auth import context
from lightningstore.server.error_handlers import answer_error
from lightningstore.server.routes.attempts import update_attempt_as
from lightningstore.server.routes.rollouts import MAX_REQUESTS, dequeue_as, enqueue_as
from lightningstore.server.routes.telemetry import MAX_SPANS, add_spans_as, query_spans_as
from lightningstore.server.schemas import DequeueBody, UpdateAttemptBody
from lightningstore.span import Span, SpanIn

if TYPE_CHECKING:
    from lightningstore.proxy.gateway import Gateway


@dataclass(frozen=True)
class HotRoute:
    body: TypeAdapter[Any]
    run: Callable[..., Awaitable[Any]]
    """`run(store, caller, body, *path_ids)`."""
    answer: TypeAdapter[Any]


HOT_ROUTES: dict[tuple[str, str], HotRoute] = {
    ("POST", "/v1/spans"): HotRoute(
        TypeAdapter(Annotated[list[SpanIn], Field(max_length=MAX_SPANS)]),
        add_spans_as,
        TypeAdapter(list[Span]),
    ),
    ("POST", "/v1/rollouts"): HotRoute(
        TypeAdapter(Annotated[list[RolloutRequest], Field(max_length=MAX_REQUESTS)]),
        enqueue_as,
        TypeAdapter(list[Rollout]),
    ),
    ("POST", "/v1/rollouts/dequeue"): HotRoute(
        TypeAdapter(DequeueBody), dequeue_as, TypeAdapter(list[AttemptedRollout])
    ),
}
UPDATE_ATTEMPT = HotRoute(TypeAdapter(UpdateAttemptBody), update_attempt_as, TypeAdapter(Attempt))
"""PATCH /v1/rollouts/{rollout_id}/attempts/{attempt_id}: ids percent-decoded as `IdConvertor` does."""
QUERY_SPANS = HotRoute(TypeAdapter(None), query_spans_as, TypeAdapter(list[Span]))
"""GET /v1/rollouts/{rollout_id}/spans without a query string: no body, `run(store, caller, None, rollout_id)`."""


def _route(method: str, path: str) -> tuple[HotRoute | None, tuple[str, ...]]:
    route = HOT_ROUTES.get((method, path))
    if route is not None or method not in ("PATCH", "GET"):
        return route, ()
    parts = path.split("/")
    if method == "GET":
        if len(parts) == 5 and parts[1:3] == ["v1", "rollouts"] and parts[3] and parts[4] == "spans":
            return QUERY_SPANS, (unquote(parts[3]),)
        return None, ()
    if (
        len(parts) == 6
        and parts[1:3] == ["v1", "rollouts"]
        and parts[4] == "attempts"
        and parts[3]
        and parts[5]
    ):
        return UPDATE_ATTEMPT, (unquote(parts[3]), unquote(parts[5]))
    return None, ()


def _is_json(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"content-type":
            return value.split(b";", 1)[0].strip().lower() == b"application/json"
    return False


async def _read_body(receive: Receive) -> bytes | None:
    """The whole body, or None when the client went away first."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands the app the body already read, then whatever comes next."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def serve_hot(
    route: HotRoute, ids: tuple[str, ...], scope: Scope, receive: Receive, send: Send, fallback: ASGIApp
) -> None:
    """Answer a request to a hot route; `fallback` gets a body that is not JSON or does not validate."""
    value = None
    if route is not QUERY_SPANS:
        if not _is_json(scope):
            await fallback(scope, receive, send)
            return
        body = await _read_body(receive)
        if body is None:
            return
        try:
            value = route.body.validate_json(body)
        except ValidationError:
            await fallback(scope, _replay(body, receive), send)
            return
    request = Request(scope, receive)
    try:
        store, caller = context(request)
        result = await route.run(store, caller, value, *ids)
        response = Response(route.answer.dump_json(result), media_type="application/json")
    except Exception as exc:  # noqa: BLE001 - every error gets the app's own answer
        response = answer_error(request, exc)
    await response(scope, receive, send)


def early_route(scope: Scope, max_body_bytes: int) -> tuple[HotRoute, tuple[str, ...]] | None:
    """The hot route of a request that none of the app's middleware would act on (the app runs without a
    rate limit): no query string, and a declared body within `max_body_bytes` (none for a GET)."""
    if scope["type"] != "http" or scope.get("query_string") or not scope.get("raw_path"):
        return None
    route, ids = _route(scope["method"], scope["raw_path"].decode("latin-1"))
    if route is None:
        return None
    length = None
    for name, value in scope["headers"]:
        if name == b"content-length":
            if length is not None or not value.isdigit() or int(value) > max_body_bytes:
                return None
            length = value
        elif name == b"transfer-encoding":
            return None
    if length is None and route is not QUERY_SPANS:
        return None
    return route, ids


class FastPathMiddleware:
    """Serves HOT_ROUTES and UPDATE_ATTEMPT directly; everything else goes to `app`. Must sit inside BodyLimitMiddleware
    (its limit applies while the body is read here) and RawPathMiddleware."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope.get("query_string"):
            call = match_call(scope["method"], scope["path"])
            gateway = getattr(scope["app"].state, "proxy", None) if call is not None else None
            if gateway is not None:
                await self._proxy_call(gateway, call, scope, receive, send)
                return
        route, ids = _route(scope["method"], scope["path"]) if scope["type"] == "http" else (None, ())
        if route is None or scope.get("query_string"):
            await self.app(scope, receive, send)
            return
        await serve_hot(route, ids, scope, receive, send, self.app)

    @staticmethod
    async def _proxy_call(
        gateway: Gateway, call: ProxyCall, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """A model call through the gateway, as its FastAPI route would run it."""
        request = Request(scope, receive)
        try:
            caller = current_caller(request)
            response = await gateway.call(
                request, call.kind, caller, call.rollout_id, call.attempt_id, call.mode
            )
        except Exception as exc:  # noqa: BLE001 - every error gets the app's own answer
            response = answer_error(request, exc)
        await response(scope, receive, send)
