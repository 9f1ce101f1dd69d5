"""What a web page may not make the store server do: the browser's two ways in, refused from the head.

Without tokens every caller is admin, so the server binds loopback only (`run.serve`), and a browser
on the same machine is the one way in from elsewhere: a page whose host name its owner re-pointed at
127.0.0.1 (DNS rebinding: its requests carry that name as Host), or a page on any site posting to
http://127.0.0.1:PORT (a "simple" request, which a browser sends without asking the server first).
`dev_mode_refusal` refuses a Host that is not loopback (421) and a write that a browser marks as sent
from another site (`Sec-Fetch-Site`) or from a non-loopback `Origin` (403).

With tokens neither check applies: a browser never sends an `Authorization` header to another site
without a CORS preflight, which this server never grants; the dashboard's cookie is SameSite=Strict
and host-only, so a rebound name carries none (and its sign-in form checks its own origin,
`ui.access`); and a server behind a proxy is reached by real host names. `simple_body_refusal`
applies always: outside the dashboard's forms every body is JSON (or OTLP protobuf), so the three
content types a browser sends cross-site unasked are refused (415) before the body is read.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from functools import lru_cache
from urllib.parse import urlsplit

from starlette.responses import Response

from lightningstore.server.error_handlers import error_response

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
BROWSER_SITES = frozenset({b"same-origin", b"none"})
"""`Sec-Fetch-Site` values of a request this server's own page (or no page: an address typed in) made."""
SIMPLE_CONTENT_TYPES = frozenset(
    {b"text/plain", b"application/x-www-form-urlencoded", b"multipart/form-data"}
)
"""The body types a browser sends to another site without a CORS preflight."""


@lru_cache(maxsize=1024)
def is_loopback_host(host: bytes) -> bool:
    """`localhost`, `127.x.x.x` or `[::1]`, with or without a port (a Host header's or Origin's netloc)."""
    text = host.decode("latin-1").strip().lower()
    if text.startswith("["):
        name, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return False
    else:
        name, colon, port = text.rpartition(":")
        if not colon:
            name = port
        elif not port.isdigit():
            return False
    return is_loopback(name.rstrip("."))


def is_loopback(host: str) -> bool:
    """`localhost` or a loopback address (no port, no brackets)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@lru_cache(maxsize=1024)
def _loopback_origin(origin: bytes) -> bool:
    parts = urlsplit(origin.decode("latin-1"))
    return parts.scheme in ("http", "https") and is_loopback_host(parts.netloc.encode("latin-1"))


def dev_mode_refusal(headers: Mapping[bytes, bytes], write: bool) -> Response | None:
    """Why a request to a server without tokens may not be served (421 or 403); None when it may."""
    host = headers.get(b"host")
    if host is not None and not is_loopback_host(host):
        shown = host.decode("latin-1")[:100]
        return error_response(
            421,
            "misdirected_request",
            f"Host {shown!r} is not this server: without tokens it answers only loopback names "
            f"({', '.join(LOOPBACK_NAMES)}), so that a web page whose name was pointed at this machine "
            "(DNS rebinding) cannot use it; configure tokens to serve other host names",
            {"field": "host"},
        )
    if not write:
        return None
    site = headers.get(b"sec-fetch-site")
    if site is not None and site not in BROWSER_SITES:
        shown = site.decode("latin-1")[:40]
        return error_response(
            403,
            "forbidden",
            f"a write sent by a page of another site (Sec-Fetch-Site: {shown}) is refused: "
            "without tokens every caller is admin",
            {"field": "sec-fetch-site"},
        )
    origin = headers.get(b"origin")
    if origin is not None and not _loopback_origin(origin) and not (origin == b"null" and site is not None):
        # `Origin: null` (a sandboxed frame, a no-referrer form) passes only when Sec-Fetch-Site vouched.
        shown = origin.decode("latin-1")[:100]
        return error_response(
            403,
            "forbidden",
            f"a write from Origin {shown!r} is refused: without tokens every caller is admin, so only "
            "pages served from a loopback address may write",
            {"field": "origin"},
        )
    return None


def simple_body_refusal(headers: Mapping[bytes, bytes]) -> Response | None:
    """415 for a write whose body is one a browser sends cross-site unasked; None otherwise."""
    content_type = headers.get(b"content-type")
    if content_type is None or content_type == b"application/json":
        return None
    media = content_type.split(b";", 1)[0].strip().lower()
    if media not in SIMPLE_CONTENT_TYPES:
        return None
    shown = media.decode("latin-1")
    return error_response(
        415,
        "unsupported_media_type",
        f"content-type {shown!r} is refused: this route takes application/json (OTLP also "
        "application/x-protobuf); a form or text body is what another site's page can send unasked",
        {"field": "content-type"},
    )
