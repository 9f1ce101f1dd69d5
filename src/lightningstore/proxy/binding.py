"""Binding: the LLM resources a rollout's calls go to, resolved once and kept in a small LRU."""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass

from lightningstore.data.attempt import Attempt
from lightningstore.data.resource import LLM, ResourceVersion
from lightningstore.errors import NotFoundError
from lightningstore.proxy.config import ProxyConfig
from lightningstore.proxy.errors import ProxyError
from lightningstore.resource_resolver import ResourceResolutionError, resolve
from lightningstore.store import LightningStore

PREFERRED_NAMES = ("llm", "policy")


@dataclass(frozen=True)
class BoundLLM:
    """One LLM resource version a call may use."""

    name: str
    version_id: str
    llm: LLM


@dataclass(frozen=True)
class Binding:
    """A rollout's LLM resources; `expires` is None when they can never change (a fixed resource set)."""

    rollout_id: str
    llms: tuple[BoundLLM, ...]
    missing: str
    """Why there is no LLM, for the error when `llms` is empty."""
    expires: float | None
    mode: str | None = None
    """The rollout's mode (`RolloutMode` value); None when bound without a rollout (the gate's probe)."""

    def check_mode(self, mode: str) -> None:
        """409 when a call's URL names another mode than the rollout's own (the runner's URLs never do)."""
        # The mode picks the sampling the proxy writes (`LLM.mode_sampling`): an agent choosing it could
        # record greedy calls as trainable in a train rollout (a batch the loop cannot score) or sample
        # an evaluation at train temperature.
        if self.mode is not None and mode != self.mode:
            raise ProxyError(
                409,
                f"rollout {self.rollout_id!r} is a {self.mode} rollout; its calls go to "
                f".../mode/{self.mode}/, not mode/{mode}",
                "mode",
            )

    def pick(self, requested_model: object, preferred_name: str) -> BoundLLM:
        """The LLM for one call: the only one, the one serving the requested model, or the preferred name."""
        if not self.llms:
            raise ProxyError(409, self.missing)
        if len(self.llms) == 1:
            return self.llms[0]
        for bound in self.llms:
            if bound.llm.model == requested_model:
                return bound
        for name in (preferred_name, *PREFERRED_NAMES):
            for bound in self.llms:
                if bound.name == name:
                    return bound
        names = sorted(bound.name for bound in self.llms)
        raise ProxyError(
            409,
            f"rollout {self.rollout_id!r} binds several LLM resources {names}; "
            f"ask for one by its model (got model={requested_model!r})",
            "model",
        )


def _bound(versions: list[tuple[str, ResourceVersion]]) -> tuple[BoundLLM, ...]:
    return tuple(
        BoundLLM(name, version.version_id, version.resource)
        for name, version in versions
        if isinstance(version.resource, LLM)
    )


class Bindings:
    """Resolves rollout -> LLM resources through the store, caching the answers (LRU)."""

    def __init__(self, store: LightningStore, config: ProxyConfig) -> None:
        self._store = store
        self._config = config
        self._cache: OrderedDict[str, Binding] = OrderedDict()

    async def get(self, rollout_id: str) -> Binding:
        """The rollout's binding; ProxyError(404) for an unknown rollout."""
        cached = self._cache.get(rollout_id)
        if cached is not None and (cached.expires is None or cached.expires > time.monotonic()):
            self._cache.move_to_end(rollout_id)
            return cached
        binding = await self._resolve(rollout_id)
        self._cache[rollout_id] = binding
        self._cache.move_to_end(rollout_id)
        while len(self._cache) > self._config.binding_cache_size:
            self._cache.popitem(last=False)
        return binding

    async def _resolve(self, rollout_id: str) -> Binding:
        rollout = await self._store.get_rollout_by_id(rollout_id)
        if rollout is None:
            raise ProxyError(404, f"rollout {rollout_id!r} not found")
        return await bind(
            self._store, self._config, rollout_id, rollout.resources_id, mode=rollout.mode.value
        )


async def bind(
    store: LightningStore,
    config: ProxyConfig,
    rollout_id: str,
    resources_id: str | None,
    *,
    mode: str | None = None,
) -> Binding:
    """The binding of a rollout naming `resources_id` (None: no set), by `resource_resolver`'s rule: the
    set's LLMs, else `config.resource_name`'s approved version (kept `pointer_ttl_s`); `mode` is the
    rollout's (never changes), checked against each call's URL."""
    if resources_id:
        missing = f"resource set {resources_id!r} of rollout {rollout_id!r} has no LLM resource"
        try:
            resolved = await resolve(store, resources_id)
        except ResourceResolutionError:
            return Binding(rollout_id, (), missing, None, mode)
        # A rollout's resource set is frozen once set: this answer never goes stale.
        return Binding(rollout_id, _bound(sorted(resolved.versions.items())), missing, None, mode)
    name = config.resource_name
    resolved = await resolve(store, None, [name])
    missing = f"rollout {rollout_id!r} has no resources_id and resource {name!r} has no approved LLM version"
    expires = time.monotonic() + config.pointer_ttl_s
    return Binding(rollout_id, _bound(list(resolved.versions.items())), missing, expires, mode)


async def check_attempt(store: LightningStore, rollout_id: str, attempt_id: str) -> None:
    """Refuse calls for an unknown attempt (404) or one that has ended (409)."""
    # Calls come almost always from the rollout's latest attempt: one row, where listing them all
    # would also read and validate the rollout. Any other answer takes the full lookup below.
    try:
        latest = await store.get_latest_attempt(rollout_id)
    except NotFoundError:
        latest = None
    if latest is not None and latest.attempt_id == attempt_id:
        attempts = [latest]
    else:
        attempts = await _attempts_of(store, rollout_id)
    for attempt in attempts:
        if attempt.attempt_id == attempt_id:
            if attempt.status.terminal:
                raise ProxyError(
                    409,
                    f"attempt {attempt_id!r} of rollout {rollout_id!r} has already ended "
                    f"({attempt.status.value}); its agent may not call the model any more",
                )
            return
    raise ProxyError(404, f"attempt {attempt_id!r} not found in rollout {rollout_id!r}")


async def _attempts_of(store: LightningStore, rollout_id: str) -> list[Attempt]:
    try:
        return await store.query_attempts(rollout_id)
    except NotFoundError:
        raise ProxyError(404, f"rollout {rollout_id!r} not found") from None
