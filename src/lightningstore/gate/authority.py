"""Who may write which gate records: the learner (algorithm) never writes what judges it."""

from __future__ import annotations

from lightningstore.auth.tokens import Caller, Permission, Role
from lightningstore.errors import PermissionDeniedError
from lightningstore.gate.records import GateRecords

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


def pointer_actor(caller: Caller, stated: str) -> str:
    """The actor a pointer move over HTTP records: the credentials' identity (`Caller.identity`), and
    the name the caller gave after it when that differs, so a stated name never reads as a role."""
    return caller.identity if stated == caller.name else f"{caller.identity} (stated: {stated})"


async def require_default_approver(gate: GateRecords, caller: Caller, resource_name: str) -> None:
    """Raise PermissionDeniedError (403) unless the caller may move `resource_name`'s `approved`: the
    gate policy's `default_approvers`, when it names any, must name the caller's token (an admin may
    always: it may rewrite the policy)."""
    if caller.role == Role.ADMIN:
        return
    policy = await gate.get_policy(resource_name)
    named = policy.default_approvers if policy is not None else []
    if named and caller.name not in named:
        who = (
            f"the {caller.role.value} token {caller.name!r}"
            if caller.name
            else f"an unnamed {caller.role.value} token"
        )
        raise PermissionDeniedError(
            f"{who} may not move approved of {resource_name!r}: its gate policy names "
            f"{', '.join(named)} as default approvers"
        )
