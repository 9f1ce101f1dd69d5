"""FastPathMiddleware: the store's hottest routes answered without FastAPI's per-request machinery.

A runner's loop is claim -> spans -> finish, and an algorithm enqueues rollouts and reads each
rollout's spans: these routes carry most of the store's requests, and FastAPI's routing, dependency
solving, body parsing (json.loads, then a second pass to validate) and response validation are a large
share of each one's CPU. The fast path serves the five rows of `route_table.ROUTES` that
carry a `HotRoute` (add spans, enqueue, dequeue, update an attempt, and a rollout's spans without a
query string) and the gateway's four call routes (`route_table.PROXY_CALLS`). A well-formed JSON body
is parsed and validated in one pass (`TypeAdapter.validate_json`, the same models and limits as the
routes), the route's own function (`add_spans_as`, ...) runs it, and the answer is serialised once.
When none of the app's middleware would act on a request, `StoreApp` (server.app) answers it with
`serve_hot` ahead of the whole middleware stack (`early_route` says when).

The model gateway's call routes (`proxy.fast_call.match_call`) go straight to `Gateway.call`, as
their FastAPI routes would. Anything else falls through to the FastAPI app unchanged: other routes, a
query string, another content type, and a body that does not validate (replayed to FastAPI, so that
bad input gets exactly the 4xx answer it always got). A JSON body nested too deep or holding a lone
surrogate is answered 400 here, on every route (`json_guard`). Errors raised by the route function get
the app's own handlers (`error_handlers.answer_error`). The OpenAPI document still describes these routes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import unquote

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lightningstore.auth.bearer import current_caller
from lightningstore.auth.raw_path import IdConvertor
from lightningstore.proxy.fast_call import ProxyCall, match_call
from lightningstore.server.auth import context
from lightningstore.server.error_handlers import answer_error
from lightningstore.server.json_guard import is_json_type, json_refusal
from lightningstore.server.route_table import ROUTES, HotRoute, Route

if TYPE_CHECKING:
    from lightningstore.proxy.gateway import Gateway


class Template(NamedTuple):
    """A hot route whose path has `{name:id}` parameters."""

    match: Callable[[str], re.Match[str] | None]
    """Starlette's own regex of the path template (`compile_path`), so both match the same raw paths."""
    route: HotRoute


def _template(route: Route, hot: HotRoute) -> Template:
    regex, _, convertors = compile_path(route.path)
    for name, convertor in convertors.items():
        if not isinstance(convertor, IdConvertor):
            raise ValueError(f"the fast path takes only {{name:id}} parameters, got {name!r} in {route.path}")
    return Template(regex.match, hot)


HOT_PATHS: dict[tuple[str, str], HotRoute] = {
    (route.method, route.path): route.hot
    for route in ROUTES
    if route.hot is not None and "{" not in route.path
}
"""The hot routes without path parameters, by (method, path)."""
HOT_TEMPLATES: dict[str, tuple[Template, ...]] = {}
"""The hot routes with path parameters, by method, in ROUTES' order."""
for _row in ROUTES:
    if _row.hot is not None and "{" in _row.path:
        HOT_TEMPLATES[_row.method] = (*HOT_TEMPLATES.get(_row.method, ()), _template(_row, _row.hot))


def _route(method: str, path: str) -> tuple[HotRoute | None, tuple[str, ...]]:
    """The hot route of a raw path and its ids, percent-decoded as `IdConvertor` does."""
    route = HOT_PATHS.get((method, path))
    if route is not None:
        return route, ()
    for match, route in HOT_TEMPLATES.get(method, ()):
        found = match(path)
        if found is not None:
            ids = found.groups()
            return route, ids if "%" not in path else tuple(map(unquote, ids))
    return None, ()


BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def _is_json(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"content-type":
            return is_json_type(value)  # whatever FastAPI parses as JSON (`+json` too) is guarded
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
    if route.body is not None:
        if not _is_json(scope):
            await fallback(scope, receive, send)
            return
        body = await _read_body(receive)
        if body is None:
            return
        try:
            value = route.body.validate_json(body)
        except ValidationError:
            refused = json_refusal(body)
            if refused is not None:
                await refused(scope, receive, send)
                return
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
    if length is None and route.body is not None:
        return None
    return route, ids


class FastPathMiddleware:
    """Serves the hot routes (HOT_PATHS, HOT_TEMPLATES) and the gateway's calls directly; everything else
    goes to `app`, a JSON body once `json_refusal` let it through. Must sit inside BodyLimitMiddleware (its limit applies while the
    body is read here) and RawPathMiddleware."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in BODY_METHODS and _is_json(scope):
            route, ids = _route(scope["method"], scope["path"])
            if route is None or scope.get("query_string"):  # a hot route checks its body itself
                body = await _read_body(receive)
                if body is None:
                    return
                refused = json_refusal(body)
                if refused is not None:
                    await refused(scope, receive, send)
                    return
                receive = _replay(body, receive)
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
                request, call.kind, caller, call.rollout_id, call.attempt_id, call.mode, token_ids=call.agl
            )
        except Exception as exc:  # noqa: BLE001 - every error gets the app's own answer
            response = answer_error(request, exc)
        await response(scope, receive, send)
