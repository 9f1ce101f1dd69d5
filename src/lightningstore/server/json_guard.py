"""JSON bodies no route can keep, refused with 400 before any route runs: too deep, or a lone surrogate.

FastAPI parses bodies with `json.loads`, which takes any depth up to the interpreter's recursion limit
and strings holding a lone UTF-16 surrogate (`"\\ud800"`); the store's writer (orjson) can write
neither (it stops at 255 levels, and UTF-8 cannot hold a surrogate), so such a body would fail deep
inside a route. `FastPathMiddleware` asks `json_refusal` about every JSON body before
anything else reads it, so one rule holds on every route, the hot ones, the gateway's and OTLP's
included: at most MAX_JSON_DEPTH levels of objects and arrays (the limit of pydantic-core's parser,
which the hot routes validate with), and no lone surrogates. A JSON body is one whose content type
FastAPI parses as JSON (`is_json_type`: `application/json` or any `application/*+json`, parameters
such as a charset aside), so no content type reaches a route's `json.loads` unguarded.
"""

from __future__ import annotations

import json
import re

import pydantic_core
from starlette.responses import Response

from lightningstore.server.error_handlers import error_response

MAX_JSON_DEPTH = 200
"""Levels of objects and arrays a request body may nest (pydantic-core's parser's own limit)."""
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_HIGH_SURROGATE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}")
"""pydantic-core's "unexpected end of hex escape" just after one of these: no low surrogate followed."""
_WHERE = re.compile(r" at line (\d+) column (\d+)$")


def is_json_type(content_type: bytes) -> bool:
    """Whether FastAPI parses a body of this content type as JSON (its rule: main type `application`,
    subtype `json` or ending in `+json`, read as `email.message` reads the header)."""
    media = content_type.split(b";", 1)[0].strip().lower()
    if media.count(b"/") != 1:
        return False
    main, sub = media.split(b"/")
    return main == b"application" and (sub == b"json" or sub.endswith(b"+json"))


def json_refusal(body: bytes) -> Response | None:
    """A 400 naming the problem when `body` nests too deep or holds a lone surrogate; None otherwise
    (malformed JSON is left to the route, which answers it as it always has)."""
    openers = body.count(b"[") + body.count(b"{")
    if openers <= MAX_JSON_DEPTH and not (b"\\u" in body and _SURROGATE_ESCAPE.search(body)):
        return None  # cannot be too deep, holds no surrogate escape: most bodies stop here, unparsed
    try:  # as UTF-8, the way `json.loads` reads bytes (UTF-8, -16 or -32, a BOM dropped)
        data = body.decode(json.detect_encoding(body)).encode()
    except UnicodeError:
        return None  # not text: the route's parser refuses it
    try:
        pydantic_core.from_json(data)
    except ValueError as exc:
        return _classify(data, str(exc))
    return None


def _classify(data: bytes, message: str) -> Response | None:
    found = _WHERE.search(message)
    if found is None:
        return None
    pos = _offset(data, int(found[1]), int(found[2]))
    if message.startswith("recursion limit exceeded"):
        reason = f"JSON nested deeper than {MAX_JSON_DEPTH} levels of objects and arrays (at position {pos})"
    elif "surrogate" in message or (
        message.startswith("unexpected end of hex escape") and _HIGH_SURROGATE.fullmatch(data, pos - 6, pos)
    ):
        reason = f"a JSON string holds a lone UTF-16 surrogate (before position {pos}): text must be Unicode"
    else:
        return None
    return error_response(400, "bad_request", reason, {"field": "body"})


def _offset(data: bytes, line: int, column: int) -> int:
    """The byte offset of pydantic-core's 1-based line and column."""
    start = 0
    for _ in range(line - 1):
        start = data.find(b"\n", start) + 1
    return start + column - 1
