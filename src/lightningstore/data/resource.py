"""Resources: versioned assets (an LLM, a prompt template) with `latest` and `approved` pointers."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MODE_SAMPLING: dict[str, dict[str, Any]] = {
    "train": {"temperature": 1.0, "top_p": 1.0},
    "val": {"temperature": 0.7},
    "test": {"temperature": 0.0},
}
"""Built-in per-mode sampling, the one place it is decided: train samples the model's own distribution
(Agent Lightning v1.0's; the trainer's log-probs assume it), val at 0.7 (v1.0's), test greedy (the
release gate's protected cases compare versions without sampling noise). An LLM's `sampling_by_mode`
overrides these key by key."""


class LLM(BaseModel):
    """An OpenAI-compatible model behind one or more endpoints."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["llm"] = "llm"
    endpoints: list[str] = Field(min_length=1)
    """Base URLs ending in /v1 (vLLM, our inference server, or a vendor)."""
    model: str = Field(min_length=1)
    sampling: dict[str, Any] = Field(default_factory=dict)
    """Sampling defaults for training calls (temperature, top_p, max_tokens, ...)."""
    sampling_by_mode: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Per-mode overrides the proxy writes over the request, key by key over `MODE_SAMPLING` (so train
    is 1.0/1.0, val 0.7 and test greedy unless named here)."""
    respect_agent_sampling: list[Literal["train", "val", "test"]] = Field(default_factory=list)
    """Modes whose rewrite this resource opts out of: the agent's own values win over the mode's.
    In train mode the trainer then scores log-probs at the temperature each call used (its span's)."""
    seed_calls: bool = False
    """Deterministic sampling: the proxy gives each call that has no `seed` of its own one derived from
    its rollout id and request, so the same rollout asking the same thing samples the same answer."""
    checkpoint: str | None = None
    """Where the weights of this version live (an HF directory), if trainable."""
    provider: str = "openai"
    """'openai' for OpenAI-compatible servers; any other litellm provider is observe-only."""
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=128)
    """The variable of the gateway's environment (the store server's) that holds the endpoints' API key,
    sent upstream as `Authorization: Bearer`. Only the name is stored; `fit` passes the variable to the
    store server and never to a runner, so no agent sees the key."""
    max_tokens_cap: int | None = Field(default=4096, ge=1)
    """The most completion tokens an agent's call may ask for (`max_tokens`, `max_completion_tokens`);
    the proxy refuses more (400), so one call cannot run up the cost. None: no cap of ours."""
    max_n: int = Field(default=1, ge=1)
    """The most choices (`n`, `best_of`) an agent's call may ask for; the proxy refuses more (400).
    Credit trains on a call's first choice and a group's samples are rollouts of their own."""

    def mode_sampling(self, mode: str) -> dict[str, Any]:
        """The sampling this resource writes in `mode`: `MODE_SAMPLING`, then its `sampling_by_mode`.

        The built-ins serve training, so an observe-only provider (not "openai") gets only its own."""
        builtin = MODE_SAMPLING.get(mode, {}) if self.provider == "openai" else {}
        return {**builtin, **self.sampling_by_mode.get(mode, {})}


class PromptTemplate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["prompt_template"] = "prompt_template"
    template: str
    engine: Literal["f-string", "jinja"] = "f-string"

    def format(self, **values: Any) -> str:
        if self.engine == "jinja":
            import jinja2

            return jinja2.Template(self.template).render(**values)
        return self.template.format(**values)


Resource = Annotated[LLM | PromptTemplate, Field(discriminator="kind")]


class Pointer(StrEnum):
    LATEST = "latest"
    APPROVED = "approved"


class ResourceVersion(BaseModel):
    version_id: str
    name: str
    resource: Resource
    parent_id: str | None = None
    """The exact version this one was derived from (None for a root)."""
    created_by: str = "unknown"
    artifact: str | None = None
    """Reference to the artifact (checkpoint directory, content hash)."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    create_time: float


class ResourceSet(BaseModel):
    """A frozen binding name -> version that rollouts name by `resources_id`."""

    resources_id: str
    versions: dict[str, ResourceVersion]
    create_time: float

    @property
    def resources(self) -> dict[str, LLM | PromptTemplate]:
        return {name: version.resource for name, version in self.versions.items()}


class PointerMove(BaseModel):
    """One move of a resource's `latest` or `approved` pointer; the history is append-only."""

    name: str
    pointer: Pointer
    version_id: str
    previous_version_id: str | None = None
    actor: str
    reason: str = ""
    time: float
