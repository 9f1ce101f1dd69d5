"""The token that guards our inference server's `/reload`: whoever may swap the served weights decides
what the policy samples, and so what the trainer learns from.

`lightningrl serve-model` reads `$LIGHTNINGRL_RELOAD_TOKEN` once (then removes it from its environment);
with one set, `/reload` answers 401 to a request without it. The weight sync sends the same variable of
its own process. `fit` makes one per run; without one the route is open, as before.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
from collections.abc import Iterator

RELOAD_TOKEN_ENV = "LIGHTNINGRL_RELOAD_TOKEN"


def reload_headers() -> dict[str, str]:
    """The weight sync's `Authorization` header: this process's $LIGHTNINGRL_RELOAD_TOKEN, if set."""
    token = os.environ.get(RELOAD_TOKEN_ENV)
    return {"Authorization": f"Bearer {token}"} if token else {}


def reload_allowed(expected: str | None, authorization: str | None) -> bool:
    """True when no token is configured, or `authorization` is `Bearer <that token>`."""
    if not expected:
        return True
    scheme, _, given = (authorization or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), expected.encode())


@contextlib.contextmanager
def reload_token_for_run() -> Iterator[None]:
    """$LIGHTNINGRL_RELOAD_TOKEN set to a fresh token while the block runs (unless already set): the
    inference server started inside reads it, and so does the weight sync of this process."""
    if os.environ.get(RELOAD_TOKEN_ENV):
        yield
        return
    os.environ[RELOAD_TOKEN_ENV] = secrets.token_urlsafe(32)
    try:
        yield
    finally:
        os.environ.pop(RELOAD_TOKEN_ENV, None)
