"""Who is calling: scoped role tokens, per-attempt agent keys, and the bearer check of a request.

Used by the server, the proxy, the gate and the runner. `lightningstore.auth.bearer` (the request-level
check) and `lightningstore.auth.raw_path` (ids in paths) import FastAPI/Starlette; this module does not.
"""

from lightningstore.auth.agent_key import agent_key, verify_agent_key
from lightningstore.auth.agent_writes import refuse_training_attributes, require_live_attempt
from lightningstore.auth.tokens import (
    AGENT_SECRET_ENV,
    ENV_VARS,
    Caller,
    Permission,
    Role,
    TokenConfig,
)

__all__ = [
    "AGENT_SECRET_ENV",
    "ENV_VARS",
    "Caller",
    "Permission",
    "Role",
    "TokenConfig",
    "agent_key",
    "refuse_training_attributes",
    "require_live_attempt",
    "verify_agent_key",
]
