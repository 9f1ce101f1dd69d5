"""Scoped tokens: roles, what each may do, and where the tokens come from (env vars or a JSON file)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import orjson

from lightningstore.auth.agent_key import verify_agent_key
from lightningstore.errors import PermissionDeniedError


class Role(StrEnum):
    ADMIN = "admin"
    ALGORITHM = "algorithm"
    RUNNER = "runner"
    APPROVER = "approver"
    VIEWER = "viewer"
    AGENT = "agent"


class Permission(StrEnum):
    READ = "read everything"
    READ_RUNTIME = "read rollouts, attempts, resources and workers"
    ENQUEUE = "enqueue rollouts"
    MANAGE_ROLLOUTS = "update or cancel rollouts"
    CLAIM = "claim rollouts and update attempts"
    WRITE_TELEMETRY = "write spans and rewards of any attempt"
    PUBLISH = "publish resource versions and move `latest`"
    APPROVE = "move `approved`"
    ADMIN = "run administrative operations"


ROLE_PERMISSIONS: dict[Role, frozenset[Permission]] = {
    Role.ADMIN: frozenset(Permission),
    Role.ALGORITHM: frozenset(
        {
            Permission.READ,
            Permission.READ_RUNTIME,
            Permission.ENQUEUE,
            Permission.MANAGE_ROLLOUTS,
            Permission.PUBLISH,
        }
    ),
    Role.RUNNER: frozenset({Permission.READ_RUNTIME, Permission.CLAIM, Permission.WRITE_TELEMETRY}),
    # An approver judges evidence (spans, rewards) before moving `approved`: it reads, it never writes it.
    Role.APPROVER: frozenset({Permission.READ, Permission.READ_RUNTIME, Permission.APPROVE}),
    # Read-only: a person looking (the dashboard at /ui, `lightningrl dashboard`), never writing.
    Role.VIEWER: frozenset({Permission.READ, Permission.READ_RUNTIME}),
    # An agent key grants only writes to its own attempt, checked by `Caller.require_attempt`, while
    # that attempt is live and without the proxy's training attributes (`auth.agent_writes`).
    Role.AGENT: frozenset(),
}

ENV_VARS: dict[Role, str] = {
    Role.ADMIN: "LIGHTNINGRL_ADMIN_TOKEN",
    Role.ALGORITHM: "LIGHTNINGRL_ALGORITHM_TOKEN",
    Role.RUNNER: "LIGHTNINGRL_RUNNER_TOKEN",
    Role.APPROVER: "LIGHTNINGRL_APPROVER_TOKEN",
    Role.VIEWER: "LIGHTNINGRL_VIEWER_TOKEN",
}
AGENT_SECRET_ENV = "LIGHTNINGRL_AGENT_SECRET"


@dataclass(frozen=True)
class Caller:
    """Who is calling: a role, the token's name when it was configured with one, and for an agent key
    the one attempt it may write."""

    role: Role
    rollout_id: str | None = None
    attempt_id: str | None = None
    name: str | None = None

    @property
    def identity(self) -> str:
        """`role:name` (or the role alone for an unnamed token): who the credentials say is calling."""
        return f"{self.role.value}:{self.name}" if self.name else self.role.value

    def can(self, permission: Permission) -> bool:
        return permission in ROLE_PERMISSIONS[self.role]

    def require(self, permission: Permission) -> None:
        """Raise PermissionDeniedError (403) unless the role grants `permission`."""
        if not self.can(permission):
            raise PermissionDeniedError(f"the {self.role.value} role may not {permission.value}")

    def require_attempt(self, rollout_id: str, attempt_id: str | None) -> None:
        """Allow writing telemetry of this attempt: any attempt by role, or exactly the agent key's."""
        if self.can(Permission.WRITE_TELEMETRY):
            return
        if self.role == Role.AGENT and rollout_id == self.rollout_id and attempt_id == self.attempt_id:
            return
        raise PermissionDeniedError(
            f"the {self.role.value} credential may not write to rollout {rollout_id!r} attempt {attempt_id!r}"
        )


DEV_CALLER = Caller(Role.ADMIN)


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


@dataclass(frozen=True)
class TokenConfig:
    """Configured tokens (stored as SHA-256 digests), their names, and the agent-key secret; empty
    means dev mode."""

    roles_by_digest: Mapping[bytes, Role] = field(default_factory=dict)
    agent_secret: str | None = None
    names_by_digest: Mapping[bytes, str] = field(default_factory=dict)
    """The person or service a named token stands for (`{"approver": {"alice": "tok"}}`)."""

    @property
    def enabled(self) -> bool:
        return bool(self.roles_by_digest) or bool(self.agent_secret)

    @classmethod
    def from_mapping(cls, data: Mapping[str, object]) -> TokenConfig:
        """From {"admin": "tok" | ["tok", ...] | {"name": "tok", ...}, "algorithm": ..., "agent_secret": "..."};
        a token given under a name is that person's (`Caller.name`)."""
        roles: dict[bytes, Role] = {}
        names: dict[bytes, str] = {}
        secret = data.get("agent_secret")
        if secret is not None and (not isinstance(secret, str) or not secret):
            raise ValueError("agent_secret must be a non-empty string")
        for key, value in data.items():
            if key == "agent_secret":
                continue
            try:
                role = Role(key)
            except ValueError:
                raise ValueError(
                    f"unknown role {key!r} in tokens (use {[r.value for r in ENV_VARS]})"
                ) from None
            if role == Role.AGENT:
                raise ValueError("agent credentials are derived keys; configure agent_secret instead")
            named = value if isinstance(value, dict) else None
            tokens = [value] if isinstance(value, str) else value if named is None else list(named.values())
            if not isinstance(tokens, list) or not all(isinstance(t, str) and t for t in tokens):
                raise ValueError(
                    f"tokens of role {key!r} must be a non-empty string, a list of them, or an object of names to them"
                )
            for token in tokens:
                digest = _digest(token)
                if roles.get(digest, role) != role:
                    raise ValueError(f"one token is configured for two roles ({roles[digest]}, {role})")
                roles[digest] = role
            for name, token in (named or {}).items():
                if not name or ":" in name:
                    raise ValueError(f"token name {name!r} of role {key!r} must be non-empty and hold no ':'")
                names[_digest(token)] = name
        return cls(roles_by_digest=roles, agent_secret=secret, names_by_digest=names)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> TokenConfig:
        """From LIGHTNINGRL_{ADMIN,ALGORITHM,RUNNER,APPROVER,VIEWER}_TOKEN (comma-separated) and
        LIGHTNINGRL_AGENT_SECRET."""
        env = os.environ if environ is None else environ
        data: dict[str, object] = {}
        for role, var in ENV_VARS.items():
            tokens = [t.strip() for t in env.get(var, "").split(",") if t.strip()]
            if tokens:
                data[role.value] = tokens
        if env.get(AGENT_SECRET_ENV):
            data["agent_secret"] = env[AGENT_SECRET_ENV]
        return cls.from_mapping(data)

    @classmethod
    def from_file(cls, path: str | Path) -> TokenConfig:
        data = orjson.loads(Path(path).read_bytes())
        if not isinstance(data, dict):
            raise ValueError(f"tokens file {path} must hold a JSON object")
        return cls.from_mapping(data)

    def merged(self, other: TokenConfig) -> TokenConfig:
        """Both configurations' tokens; `other`'s agent secret wins when both have one."""
        roles = dict(self.roles_by_digest)
        for digest, role in other.roles_by_digest.items():
            if roles.get(digest, role) != role:
                raise ValueError(f"one token is configured for two roles ({roles[digest]}, {role})")
            roles[digest] = role
        return TokenConfig(
            roles_by_digest=roles,
            agent_secret=other.agent_secret or self.agent_secret,
            names_by_digest={**self.names_by_digest, **other.names_by_digest},
        )

    def resolve(self, token: str | None) -> Caller | None:
        """The caller a bearer token stands for; None if it is unknown. Dev mode admits everyone."""
        if not self.enabled:
            return DEV_CALLER
        if not token:
            return None
        digest = _digest(token)
        role = self.roles_by_digest.get(digest)
        if role is not None:
            return Caller(role, name=self.names_by_digest.get(digest))
        if self.agent_secret:
            ids = verify_agent_key(self.agent_secret, token)
            if ids is not None:
                return Caller(Role.AGENT, rollout_id=ids[0], attempt_id=ids[1])
        return None
