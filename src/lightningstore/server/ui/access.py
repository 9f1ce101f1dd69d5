"""Who may look at the dashboard: the store's scoped tokens, carried by a browser in a cookie.

A browser cannot send `Authorization` on a navigation, so a token arrives once, by the login form or as
`?token=` on any page (what `lightningrl dashboard` opens), and is kept in an HttpOnly, SameSite=Strict
cookie scoped to /ui; the URL is then reloaded without it. Any role that may read everything may view
(viewer, approver, algorithm, admin); a runner token or an agent key may not. The pages only read.
"""

from __future__ import annotations

from urllib.parse import urlencode

from fastapi import Request
from starlette.responses import RedirectResponse, Response

from lightningstore.auth.tokens import Caller, Permission, TokenConfig

COOKIE = "lightningrl_ui_token"
COOKIE_PATH = "/ui"


class PageError(Exception):
    """A page that cannot be shown (a bad filter, an unknown id): answered as an HTML page with `status`."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class PageRefused(Exception):
    """A page request without the right to view: answered with the login page (401) or a refusal (403)."""

    def __init__(self, status: int, message: str, next_url: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.next_url = next_url


class TokenInUrl(Exception):
    """A valid `?token=`: set the cookie and reload the page without the token in its URL."""

    def __init__(self, token: str, clean_url: str) -> None:
        super().__init__("token in URL")
        self.token = token
        self.clean_url = clean_url


def _bearer(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return request.cookies.get(COOKIE) or None


def _path_with_query(request: Request, drop: str | None = None) -> str:
    query = [(k, v) for k, v in request.query_params.multi_items() if k != drop]
    return request.url.path + (f"?{urlencode(query)}" if query else "")


def viewer(request: Request) -> Caller:
    """The caller of a page request (a FastAPI dependency); raises PageRefused or TokenInUrl."""
    tokens: TokenConfig = request.app.state.tokens
    here = _path_with_query(request, drop="token")
    given = request.query_params.get("token")
    if given is not None:
        if tokens.resolve(given) is None:
            raise PageRefused(401, "that token is not one this store knows", here)
        raise TokenInUrl(given, here)
    token = _bearer(request)
    caller = tokens.resolve(token)
    if caller is None:
        raise PageRefused(401, "unknown or expired token" if token else "sign in with a token to view", here)
    if not caller.can(Permission.READ):
        raise PageRefused(403, f"the {caller.role.value} role may not view the dashboard", here)
    return caller


def remember(response: Response, request: Request, token: str) -> Response:
    response.set_cookie(
        COOKIE,
        token,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


def token_in_url_response(request: Request, exc: TokenInUrl) -> Response:
    return remember(RedirectResponse(exc.clean_url, status_code=303), request, exc.token)


def safe_next(next_url: str | None) -> str:
    """Only a path under /ui: a login must never redirect off the dashboard."""
    if next_url and (next_url == "/ui" or next_url.startswith(("/ui/", "/ui?"))):
        return next_url
    return "/ui/rollouts"
