"""match_call: the gateway's two call routes recognised without FastAPI's router (the store's fast path).

A proxied model call is the hottest request a rollout makes, and FastAPI's routing and dependency
machinery are a large share of its own cost in the server. The URL layout is `semconv`'s, ids percent-decoded once as the `{name:id}`
convertor does; anything that does not match exactly (another method, a bad mode, a query string) is
left to the FastAPI routes, which answer it as they always did.
"""

from __future__ import annotations

from typing import NamedTuple
from urllib.parse import unquote

from lightningstore import semconv
from lightningstore.data.status import RolloutMode
from lightningstore.proxy.request import Kind

_KINDS: dict[str, Kind] = {"/chat/completions": "chat", "/completions": "completion"}
_SUFFIXES = (semconv.OPENAI_SUFFIX, semconv.AGL_OPENAI_SUFFIX)
_MODES = frozenset(mode.value for mode in RolloutMode)
_MARK = semconv.PROXY_CALL_MARK


class ProxyCall(NamedTuple):
    kind: Kind
    rollout_id: str
    attempt_id: str
    mode: str
    agl: bool = False
    """Called at Agent Lightning v1.0's `/openai/v1` base URL (the reply always carries token ids)."""


def match_call(method: str, path: str) -> ProxyCall | None:
    """The call a raw (undecoded) path asks for, or None to let the routes answer it."""
    if method != "POST" or not path.startswith(_MARK):
        return None
    # rollout_id / "attempt" / attempt_id / "mode" / mode / suffix...
    parts = path[len(_MARK) :].split("/", 5)
    if len(parts) != 6 or parts[1] != "attempt" or parts[3] != "mode" or parts[4] not in _MODES:
        return None
    if not parts[0] or not parts[2]:
        return None
    rest = "/" + parts[5]
    for suffix in _SUFFIXES:
        if rest.startswith(suffix) and (kind := _KINDS.get(rest[len(suffix) :])) is not None:
            agl = suffix == semconv.AGL_OPENAI_SUFFIX
            return ProxyCall(kind, unquote(parts[0]), unquote(parts[2]), parts[4], agl)
    return None
