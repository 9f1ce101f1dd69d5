"""Who may look at the dashboard: the store's scoped tokens, carried by a browser in a cookie.

A browser cannot send `Authorization` on a navigation, so a person signs in once with the login form
(POST only) and the token is kept in an HttpOnly, SameSite=Strict cookie scoped to /ui. A token is
never taken from a URL (`?token=` is refused: it would sit in the history and let another site sign
a browser in as someone else). Sign-in and sign-out are POSTs guarded against other sites (login
CSRF): a double-submitted form token (the `csrf` field must equal the `lightningrl_ui_csrf` cookie,
which only a page of the dashboard can have set), and a request a browser marks as coming from
another site (`Sec-Fetch-Site`, or an `Origin` that is not this host) is refused outright. The Origin
check alone would not do: the pages send `Referrer-Policy: no-referrer`, under which a browser's own
form posts carry `Origin: null`. Only the roles a person looks with may view (DASHBOARD_ROLES); a
runner token, an algorithm token and an agent key may not. The pages only read.
"""

from __future__ import annotations

import hmac
import secrets
from urllib.parse import urlencode, urlsplit

from fastapi import Request

from lightningstore.auth.tokens import Caller, Role, TokenConfig

COOKIE = "lightningrl_ui_token"
CSRF_COOKIE = "lightningrl_ui_csrf"
COOKIE_PATH = "/ui"
DASHBOARD_ROLES = frozenset({Role.ADMIN, Role.APPROVER, Role.VIEWER})
"""People's roles: the machines' tokens (algorithm, runner) and agent keys never sign a browser in."""


class PageError(Exception):
    """A page that cannot be shown (a bad filter, an unknown id): answered as an HTML page with `status`."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class PageRefused(Exception):
    """A page request without the right to view: answered with the login page (400, 401) or a refusal
    (403)."""

    def __init__(self, status: int, message: str, next_url: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.next_url = next_url


def _bearer(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return request.cookies.get(COOKIE) or None


def _path_with_query(request: Request, drop: str | None = None) -> str:
    query = [(k, v) for k, v in request.query_params.multi_items() if k != drop]
    return request.url.path + (f"?{urlencode(query)}" if query else "")


def refusal(caller: Caller) -> str | None:
    """Why `caller` may not view the dashboard; None when it may."""
    if caller.role in DASHBOARD_ROLES:
        return None
    who = "an agent key" if caller.role == Role.AGENT else f"the {caller.role.value} role"
    return f"{who} may not view the dashboard (sign in with a viewer, approver or admin token)"


def viewer(request: Request) -> Caller:
    """The caller of a page request (a FastAPI dependency); raises PageRefused."""
    tokens: TokenConfig = request.app.state.tokens
    here = _path_with_query(request, drop="token")
    if "token" in request.query_params:
        raise PageRefused(400, "a token in the URL is not accepted: sign in with the form", here)
    token = _bearer(request)
    caller = tokens.resolve(token)
    if caller is None:
        raise PageRefused(401, "unknown or expired token" if token else "sign in with a token to view", here)
    why = refusal(caller)
    if why is not None:
        raise PageRefused(403, why, here)
    return caller


def csrf_token(request: Request) -> tuple[str, bool]:
    """The browser's form token, and whether it is new (to be set as the CSRF cookie)."""
    given = request.cookies.get(CSRF_COOKIE)
    return (given, False) if given else (secrets.token_urlsafe(32), True)


def cross_site(request: Request, form: dict[str, list[str]]) -> str | None:
    """Why a sign-in or sign-out POST may not be this dashboard's own form; None when it is."""
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return f"the form was sent from another site (Sec-Fetch-Site: {site})"
    origin = request.headers.get("origin")
    if origin and origin != "null":
        parts = urlsplit(origin)
        if (parts.scheme, parts.netloc) != (request.url.scheme, request.url.netloc):
            return f"the form was sent from {origin}, not this dashboard"
    cookie = request.cookies.get(CSRF_COOKIE, "")
    sent = (form.get("csrf") or [""])[0]
    if not cookie or not hmac.compare_digest(cookie.encode(), sent.encode()):
        return "the form is not one this dashboard served (reload the page and send it again)"
    return None


def safe_next(next_url: str | None) -> str:
    """Only a path under /ui: a login must never redirect off the dashboard."""
    if next_url and (next_url == "/ui" or next_url.startswith(("/ui/", "/ui?"))):
        return next_url
    return "/ui/rollouts"
