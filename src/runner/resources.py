"""What an agent gets for one attempt: its LLMs (pointed at the proxy), prompt templates and ids."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from lightningstore import LLM, LightningStore, PromptTemplate, ResourceSet, ResourceVersion, Rollout
from lightningstore.auth import agent_key
from lightningstore.resource_resolver import ResourceResolutionError, check_production, resolve
from lightningstore.semconv import proxy_base_url

DEFAULT_API_KEY = "lightningrl"


@dataclass(frozen=True)
class ResolvedLLM:
    """An LLM resource as one attempt should call it."""

    base_url: str
    model: str
    api_key: str
    sampling: dict[str, Any] = field(default_factory=dict)
    version_id: str | None = None
    name: str | None = None


@dataclass(frozen=True)
class AgentResources:
    """The resources, ids and mode of the attempt an agent runs in."""

    rollout_id: str
    attempt_id: str
    mode: str
    llms: dict[str, ResolvedLLM] = field(default_factory=dict)
    prompts: dict[str, PromptTemplate] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    """Resource name -> the version id this attempt uses."""
    api_key: str = DEFAULT_API_KEY
    """The attempt's agent key (or the placeholder when no secret is configured)."""
    timeout_seconds: float | None = None
    """The rollout's `config.timeout_seconds` (the runner cancels the agent after it)."""

    @property
    def llm(self) -> ResolvedLLM:
        """The single LLM resource; an error naming the choices when there are none or several."""
        if len(self.llms) != 1:
            raise LookupError(
                f"resources.llm needs exactly one LLM resource, this rollout has {sorted(self.llms)}: "
                "use resources.llms[name]"
            )
        return next(iter(self.llms.values()))


def attempt_api_key(secret: str | None, rollout_id: str, attempt_id: str) -> str:
    """The attempt's agent key when a secret is configured, else the placeholder key."""
    return agent_key(secret, rollout_id, attempt_id) if secret else DEFAULT_API_KEY


class ResourceSetCache:
    """Resource sets by id, remembered: a set never changes once stored, and every rollout of a
    step names the same one (one store round trip per step instead of one per rollout)."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._sets: OrderedDict[str, ResourceSet] = OrderedDict()

    async def get(self, store: LightningStore, resources_id: str) -> ResourceSet | None:
        found = self._sets.get(resources_id)
        if found is not None:
            self._sets.move_to_end(resources_id)
            return found
        found = await store.get_resources_by_id(resources_id)
        if found is not None:
            self._sets[resources_id] = found
            while len(self._sets) > self.size:
                self._sets.popitem(last=False)
        return found


async def resolve_versions(
    store: LightningStore,
    rollout: Rollout,
    *,
    production: bool,
    cache: ResourceSetCache | None = None,
) -> list[ResourceVersion]:
    """The versions an attempt uses, by `lightningstore.resource_resolver`'s rule: the rollout's set, else
    the `approved` pointers; a production runner refuses a set naming an unapproved version."""
    get_set = partial(cache.get, store) if cache is not None else None
    try:
        resolved = await resolve(store, rollout.resources_id, get_set=get_set)
        if resolved.missing:
            raise ResourceResolutionError(f"resource {resolved.missing[0]!r} has no approved version")
        if production:
            await check_production(store, resolved)
    except ResourceResolutionError as error:
        raise ResourceResolutionError(f"rollout {rollout.rollout_id}: {error}") from None
    return list(resolved.versions.values())


def build_resources(
    versions: list[ResourceVersion],
    rollout: Rollout,
    attempt_id: str,
    *,
    proxy_url: str | None,
    agent_key_secret: str | None,
) -> AgentResources:
    """AgentResources for one attempt from its resolved versions."""
    mode = rollout.mode.value
    key = attempt_api_key(agent_key_secret, rollout.rollout_id, attempt_id)
    llms: dict[str, ResolvedLLM] = {}
    prompts: dict[str, PromptTemplate] = {}
    for version in versions:
        resource = version.resource
        if isinstance(resource, LLM):
            base_url = (
                proxy_base_url(proxy_url, rollout.rollout_id, attempt_id, mode)
                if proxy_url
                else resource.endpoints[0]
            )
            sampling = {**resource.sampling, **resource.mode_sampling(mode)}
            llms[version.name] = ResolvedLLM(
                base_url=base_url,
                model=resource.model,
                api_key=key,
                sampling=sampling,
                version_id=version.version_id,
                name=version.name,
            )
        else:
            prompts[version.name] = resource
    return AgentResources(
        rollout_id=rollout.rollout_id,
        attempt_id=attempt_id,
        mode=mode,
        llms=llms,
        prompts=prompts,
        versions={v.name: v.version_id for v in versions},
        api_key=key,
        timeout_seconds=rollout.config.timeout_seconds,
    )
