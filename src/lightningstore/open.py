"""`open_store(target)`: the store a command-line argument names, a server URL or a database."""

from __future__ import annotations

import os

from lightningstore.auth.tokens import ENV_VARS, Role
from lightningstore.store import LightningStore


def _role_token(role: Role | str) -> str | None:
    """The value of `role`'s $LIGHTNINGRL_{ROLE}_TOKEN, or None when it is unset or empty."""
    role = Role(role)
    if role not in ENV_VARS:
        names = [r.value for r in ENV_VARS]
        raise ValueError(f"the {role.value} role has no token variable (roles that have one: {names})")
    return os.environ.get(ENV_VARS[role]) or None


def open_store(
    target: str,
    token: str | None = None,
    *,
    role: Role | str | None = Role.ADMIN,
    max_retries: int | None = None,
) -> LightningStore:
    """A StoreClient for an http(s) URL, else a SqlStore on the database URL or SQLite path.

    The client's bearer token is `token` when given, else `role`'s $LIGHTNINGRL_{ROLE}_TOKEN (the
    admin's by default; a runner passes `role="runner"`), else none; `role=None` reads no variable.
    `max_retries` overrides the client's default. A SqlStore is direct, trusted access: no token.
    """
    if target.startswith(("http://", "https://")):
        from lightningstore.client.store_client import StoreClient

        if not token and role is not None:
            token = _role_token(role)
        if max_retries is None:
            return StoreClient(target, token=token or None)
        return StoreClient(target, token=token or None, max_retries=max_retries)
    from lightningstore.sql import SqlStore

    return SqlStore(target)
