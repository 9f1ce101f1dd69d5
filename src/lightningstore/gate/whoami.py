"""WhoAmI: who the store server takes a caller for, and the name its gate records write it under."""

from __future__ import annotations

from pydantic import BaseModel

from lightningstore.auth.tokens import Role


class WhoAmI(BaseModel):
    """The caller's role, its token's configured name (None: unnamed), and its gate `recorded_by`."""

    role: Role
    name: str | None
    recorded_by: str
