"""ProxyConfig: how the model gateway resolves, rewrites, retries and waits."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ProxyConfig:
    """Settings of the model gateway; the defaults suit one machine and a few backends."""

    resource_name: str = "llm"
    """The resource whose `approved` version serves rollouts that have no `resources_id`."""
    mode_overrides_win: frozenset[str] = frozenset({"train", "val", "test"})
    """Modes whose sampling (`LLM.mode_sampling`) replaces the agent's own; elsewhere the agent's win.
    Leaving "train" out (or an LLM's `respect_agent_sampling`) opts out of the train-mode rewrite."""
    defaults_win: bool = False
    """Whether the resource's `sampling` defaults replace the agent's own values (else only fill gaps)."""
    max_retries: int = 3
    """Retries of a call after a 408/429/5xx or a connection error (so at most 1 + max_retries tries)."""
    backoff_base_s: float = 0.1
    backoff_max_s: float = 2.0
    connect_timeout_s: float = 5.0
    upstream_timeout_s: float = 600.0
    """Longest wait for an upstream read (a long generation is normal)."""
    pause_wait_s: float = 120.0
    """How long a call waits while the gateway is paused before it is refused with 503."""
    drain_timeout_s: float = 60.0
    """Default bound of `POST /proxy/admin/drain`."""
    binding_cache_size: int = 4096
    """Rollouts whose resolved LLM resources are kept in memory (least recently used dropped)."""
    pointer_ttl_s: float = 1.0
    """How long a rollout without `resources_id` keeps the `approved` version it resolved."""
    max_connections: int = 512
    max_keepalive_connections: int = 128
    upstream_headers: Mapping[str, str] = field(default_factory=dict)
    """Headers sent to every OpenAI-compatible upstream (e.g. its own Authorization); the agent's
    credential is never forwarded."""
    trust_env: bool = True
    """Whether the upstream client honours HTTP(S)_PROXY and friends from the environment."""

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.binding_cache_size < 1:
            raise ValueError(f"binding_cache_size must be >= 1, got {self.binding_cache_size}")
        for name in ("backoff_base_s", "backoff_max_s", "pause_wait_s", "drain_timeout_s", "pointer_ttl_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
