"""The credentials of the store server `fit` starts: fresh role tokens and an agent-key secret per run.

A store server with no tokens admits every caller as admin, and the agent under training runs on the
same machine: it could post rewards or LLM spans into any rollout, or publish a version. So `fit`
never starts one without tokens: the store server gets every role's token, each runner process only
the runner token and the agent secret (which the runner removes from its environment once read,
`runner.credentials`), `fit` itself the algorithm token, and each agent only its attempt's key.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from lightningstore.auth import AGENT_SECRET_ENV, ENV_VARS, Role


@dataclass(frozen=True)
class RunTokens:
    """One run's role tokens and agent secret, as the environment variables each process reads."""

    by_role: Mapping[Role, str]
    agent_secret: str
    generated: bool
    """True when `fit` made them (the user configured none); False when they came from the environment."""

    @classmethod
    def for_run(cls, environ: Mapping[str, str]) -> RunTokens:
        """The tokens configured in `environ` when it sets every one `fit` needs, else fresh ones.

        Partly configured (a runner token without an agent secret, say) is refused: fit would start a
        server the user's other processes cannot all reach.
        """
        present = [name for name in (*ENV_VARS.values(), AGENT_SECRET_ENV) if environ.get(name)]
        if not present:
            fresh = {role: secrets.token_urlsafe(32) for role in ENV_VARS}
            return cls(by_role=fresh, agent_secret=secrets.token_urlsafe(32), generated=True)
        missing = [name for name in (ENV_VARS[Role.RUNNER], AGENT_SECRET_ENV) if not environ.get(name)]
        if not (environ.get(ENV_VARS[Role.ADMIN]) or environ.get(ENV_VARS[Role.ALGORITHM])):
            missing.append(f"{ENV_VARS[Role.ADMIN]} (or {ENV_VARS[Role.ALGORITHM]})")
        if missing:
            raise ValueError(
                f"fit starts its store server with the tokens in the environment, but {', '.join(missing)} "
                f"is not set (set: {', '.join(present)}): set them all, or none and fit makes its own"
            )
        given = {
            role: environ[var].split(",")[0].strip() for role, var in ENV_VARS.items() if environ.get(var)
        }
        return cls(by_role=given, agent_secret=environ[AGENT_SECRET_ENV], generated=False)

    @property
    def operator(self) -> str:
        """The token `fit` itself calls the store with: the admin's (it publishes, enqueues, pauses the
        gateway, files release plans and records APO's spans), else the algorithm's."""
        return self.by_role.get(Role.ADMIN) or self.by_role[Role.ALGORITHM]

    def server_env(self) -> dict[str, str]:
        """What the store server reads: every role's token and the agent secret."""
        env = {ENV_VARS[role]: token for role, token in self.by_role.items()}
        return {**env, AGENT_SECRET_ENV: self.agent_secret}

    def runner_env(self) -> dict[str, str]:
        """What a runner process reads: its token and the agent secret, nothing else."""
        return {ENV_VARS[Role.RUNNER]: self.by_role[Role.RUNNER], AGENT_SECRET_ENV: self.agent_secret}
