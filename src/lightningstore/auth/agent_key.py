"""Per-attempt agent keys: HMAC-signed, self-describing, verifiable without storage."""

from __future__ import annotations

import base64
import hashlib
import hmac

import orjson

PREFIX = "lrk1"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _secret_bytes(secret: str | bytes) -> bytes:
    return secret.encode() if isinstance(secret, str) else secret


def _signature(secret: str | bytes, rollout_id: str, attempt_id: str) -> str:
    message = orjson.dumps(["lightningrl-agent-key", rollout_id, attempt_id])
    return _b64(hmac.new(_secret_bytes(secret), message, hashlib.sha256).digest())


def agent_key(secret: str | bytes, rollout_id: str, attempt_id: str) -> str:
    """The key that lets an agent write spans and rewards of exactly this attempt."""
    if not secret:
        raise ValueError("agent key secret must not be empty")
    ids = f"{_b64(rollout_id.encode())}.{_b64(attempt_id.encode())}"
    return f"{PREFIX}.{ids}.{_signature(secret, rollout_id, attempt_id)}"


def verify_agent_key(secret: str | bytes, key: str) -> tuple[str, str] | None:
    """(rollout_id, attempt_id) if `key` was made by `agent_key` with `secret`, else None."""
    parts = key.split(".")
    if not secret or len(parts) != 4 or parts[0] != PREFIX or not key.isascii():
        return None
    try:
        rollout_id = _unb64(parts[1]).decode()
        attempt_id = _unb64(parts[2]).decode()
    except (ValueError, UnicodeDecodeError):
        return None
    if not hmac.compare_digest(parts[3], _signature(secret, rollout_id, attempt_id)):
        return None
    return rollout_id, attempt_id
