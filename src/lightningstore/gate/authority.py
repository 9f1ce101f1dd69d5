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


UNNAMED = "unnamed"
"""The name part of a record written by a token configured without a name (or a stated name left out)."""


def recorded_by(caller: Caller, *stated: str | None, checked: bool = True, strict: bool = True) -> str:
    """Who a gate write over HTTP is recorded by, `role:name`, from the credentials, never a stated name.

    A named token records its name (`approver:alice`). Where the record is what the gate judges by
    (`strict`: evidence and reports), stating another name (`actor`, an approval's own `actor`) is
    refused, 403 naming both; elsewhere (receipts, plans, evaluators, protected cases, policies, whose
    writers state labels such as a run's name) it is kept after the identity, `approver:alice (stated:
    bob)`, as pointer moves keep it. An unnamed token records `role:unnamed`, a stated name kept after
    it the same way, so it never counts as one of a plan's named approvers. Without tokens (`checked`
    False: dev mode, every caller an unnamed admin) nothing can check a name, so the stated one is the
    local user's label, `admin:bob`. A stated `unnamed` counts as none stated.
    """
    names = sorted({s for s in stated if s and s != UNNAMED})
    role = caller.role.value
    if not checked:
        return f"{role}:{names[0] if names else UNNAMED}"
    others = [s for s in names if s != caller.name]
    if caller.name is not None and others and strict:
        raise PermissionDeniedError(
            f"the {role} token {caller.name!r} may not record as {others[0]!r}: gate evidence names the "
            f"token's own identity, {caller.identity!r} (leave actor out or state {caller.name!r})"
        )
    who = f"{role}:{caller.name or UNNAMED}"
    return who + (f" (stated: {', '.join(others)})" if others else "")


def recorded_name(recorded: str) -> str:
    """The name part of a stored `recorded_by` (`alice` of `approver:alice`)."""
    return recorded.split(":", 1)[1] if ":" in recorded else UNNAMED


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
