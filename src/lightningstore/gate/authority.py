"""Who may write which gate records: the learner (algorithm) never writes what judges it."""

from __future__ import annotations

from lightningstore.auth.tokens import Caller, Permission, Role
from lightningstore.errors import PermissionDeniedError

FILE_RECEIPT = frozenset({Role.ADMIN, Role.ALGORITHM, Role.APPROVER})
"""A receipt only pins ids and hashes the checks recompute, so the learner may file one."""
RECORD_EVIDENCE = frozenset({Role.ADMIN, Role.APPROVER})
"""Reports, canary runs, rollback drills and approvals."""
DEFINE_JUDGEMENT = frozenset({Role.ADMIN})
"""Evaluators, protected cases and policies."""


def require_role(caller: Caller, allowed: frozenset[Role], action: str) -> None:
    """Raise PermissionDeniedError (403) unless the caller's role is in `allowed`."""
    if caller.role not in allowed:
        names = ", ".join(sorted(r.value for r in allowed))
        raise PermissionDeniedError(f"the {caller.role.value} role may not {action} (allowed: {names})")


def require_reader(caller: Caller) -> None:
    caller.require(Permission.READ_RUNTIME)


def recorded_by(caller: Caller, actor: str | None) -> str:
    """`role:actor` as stored: the role comes from the credentials, the name from the caller."""
    return f"{caller.role.value}:{actor or 'unnamed'}"
