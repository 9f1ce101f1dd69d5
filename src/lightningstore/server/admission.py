"""`admit`: what the store server decides from a request's head, before routing and before its body.

AdmissionMiddleware asks it of every HTTP request, first after the rate limit (a token guesser is
limited too), and `StoreApp` before its early answer of a hot route, so each rule holds on both
paths: the browser rules (`origin_guard`: without tokens, a loopback Host and no write from another
site; always, no form or text body outside the dashboard), the bearer check of a write (its 401
comes before a byte of its body is read: an unknown caller's 30 MB cost nothing, and other requests
do not wait meanwhile), and an agent key's requests and bytes (`attempt_quota`). A write's caller
stays in the scope for the routes (`auth.context`), so its token is resolved once. Reads need no
early check: they carry no body, and their routes check the caller.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from lightningstore.auth.bearer import CALLER_SCOPE_KEY
from lightningstore.auth.tokens import Role, TokenConfig
from lightningstore.server.auth import head_caller
from lightningstore.server.origin_guard import dev_mode_refusal, simple_body_refusal

if TYPE_CHECKING:
    from lightningstore.server.attempt_quota import QuotaLedger

ADMITTED = "lightningstore.admitted"
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
OPEN_PREFIX = "/ui"
"""The dashboard: its pages sign a browser in with a cookie and their forms check their own origin
(`ui.access`); its sign-in form posts a urlencoded body without a bearer header."""


def admit(
    tokens: TokenConfig, ledger: QuotaLedger | None, scope: Scope, receive: Receive
) -> tuple[Response | None, Receive]:
    """The refusal of an HTTP request decided from its head alone (None: go on), and the `receive` to
    read its body with."""
    if ADMITTED in scope:  # the early answer's fallback to the stack: admitted (and counted) once
        return None, receive
    scope[ADMITTED] = True
    headers = dict(scope["headers"])
    write = scope["method"] not in READ_METHODS
    if not tokens.enabled:
        refused = dev_mode_refusal(headers, write)
        if refused is not None or not write:
            return refused, receive
    elif not write:
        return None, receive
    path: str = scope["path"]
    root = scope.get("root_path")
    if root and path.startswith(root):
        path = path[len(root) :]
    if path == OPEN_PREFIX or path.startswith(OPEN_PREFIX + "/"):
        return None, receive
    if not tokens.enabled:
        return simple_body_refusal(headers), receive
    caller = head_caller(tokens, headers.get(b"authorization"))
    if isinstance(caller, Response):
        return caller, receive
    scope[CALLER_SCOPE_KEY] = caller
    refused = simple_body_refusal(headers)
    if refused is not None or ledger is None or caller.role is not Role.AGENT:
        return refused, receive
    length = headers.get(b"content-length")
    declared = int(length) if length is not None and length.isdigit() else None
    refused = ledger.admit(caller, declared)
    if refused is None and declared is None and b"transfer-encoding" in headers:
        receive = ledger.metered(caller, receive)
    return refused, receive


class AdmissionMiddleware:
    """Answers the refusal `admit` decides from the head; hands the rest on. Must sit outside
    BodyLimitMiddleware, which answers a streamed body past the attempt's byte quota."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            state = scope["app"].state
            refused, receive = admit(state.tokens, state.quota_ledger, scope, receive)
            if refused is not None:
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)
