"""Which version a rollout uses: a Runner and the proxy's binding give one answer for every mode, runner
kind and pointer, on a real store (the rule of `lightningstore.resource_resolver`)."""

from __future__ import annotations

import re

from lightningstore import LLM, LightningStore, PromptTemplate, RolloutConfig
from lightningstore.proxy import ProxyConfig
from lightningstore.proxy.binding import Bindings
from runner import AgentResources, Runner, rollout

MODES = ("train", "val", "test")
POINTERS = ("latest", "approved", "candidate", "canary")
REFUSED = re.compile(r"names 'llm' version (\S+), but its approved version is (\S+):")


async def publish(store: LightningStore) -> tuple[dict[str, str | None], dict[str, str]]:
    """A root (approved), a candidate and a newer latest of `llm`, and a prompt; the resource set each
    pointer's rollouts name (None: production traffic, no set) and the llm version each should use."""
    root = await store.add_resource_version("llm", LLM(endpoints=["http://root/v1"], model="m"))
    prompt = await store.add_resource_version("prompt", PromptTemplate(template="{q}"))
    candidate = await store.add_resource_version(
        "llm", LLM(endpoints=["http://candidate/v1"], model="m"), parent_id=root.version_id
    )
    latest = await store.add_resource_version(
        "llm", LLM(endpoints=["http://latest/v1"], model="m"), parent_id=candidate.version_id
    )
    pointed = await store.get_latest_version("llm")
    assert pointed is not None and pointed.version_id == latest.version_id
    training = await store.add_resource_set({"llm": latest.version_id, "prompt": prompt.version_id})
    evaluation = await store.add_resource_set({"llm": candidate.version_id})
    # As `run_canary` binds it: the other resources' versions, then the receipt's candidate (the newest set).
    canary = await store.add_resource_set({"prompt": prompt.version_id, "llm": candidate.version_id})
    sets = {
        "latest": training.resources_id,
        "approved": None,
        "candidate": evaluation.resources_id,
        "canary": canary.resources_id,
    }
    expected = {
        "latest": latest.version_id,
        "approved": root.version_id,
        "candidate": candidate.version_id,
        "canary": candidate.version_id,
    }
    return sets, expected


async def run_matrix(
    store: LightningStore, sets: dict[str, str | None], *, production: bool, tag: str
) -> dict[tuple[str, str], tuple[str | None, str | None, str]]:
    """Run one rollout per (mode, pointer) on a Runner; (mode, pointer) -> (the llm version the runner
    resolved, the approved version it refused that for or None, the version the proxy binds)."""
    seen: dict[str, str] = {}

    @rollout
    def capture(task: str, resources: AgentResources) -> None:
        seen[task] = resources.versions["llm"]

    ids = {}
    for mode in MODES:
        for pointer in POINTERS:
            rid = ids[mode, pointer] = f"{tag}-{mode}-{pointer}"
            await store.enqueue_rollout(
                rid,
                mode=mode,
                resources_id=sets[pointer],
                rollout_id=rid,
                config=RolloutConfig(max_attempts=1),
            )
    runner = Runner(store, capture, workers=2, production=production, show_progress=False)
    summary = await runner.run(max_rollouts=len(ids))
    assert summary.succeeded + summary.failed == len(ids)
    bindings = Bindings(store, ProxyConfig(pointer_ttl_s=0))
    answers: dict[tuple[str, str], tuple[str | None, str | None, str]] = {}
    for cell, rid in ids.items():
        proxy = (await bindings.get(rid)).pick(None, "llm").version_id
        if rid in seen:
            answers[cell] = (seen[rid], None, proxy)
            continue
        (attempt,) = await store.query_attempts(rid)
        refused = REFUSED.search(attempt.failure_reason or "")
        assert refused is not None, (cell, attempt.failure_reason)
        answers[cell] = (refused.group(1), refused.group(2), proxy)
    return answers


async def test_runner_and_proxy_resolve_the_same_version(store: LightningStore) -> None:
    sets, expected = await publish(store)
    root = expected["approved"]

    # Training and evaluation runners: the set's version, else `approved`; nothing is refused.
    for (mode, pointer), (runner, refused_for, proxy) in (
        await run_matrix(store, sets, production=False, tag="train")
    ).items():
        assert (runner, refused_for, proxy) == (expected[pointer], None, expected[pointer]), (mode, pointer)

    # Production runners resolve the same version and run it only when it is the approved one.
    for (mode, pointer), (runner, refused_for, proxy) in (
        await run_matrix(store, sets, production=True, tag="prod")
    ).items():
        assert runner == proxy == expected[pointer], (mode, pointer)
        assert refused_for == (None if pointer == "approved" else root), (mode, pointer)

    # Promoting the candidate moves production traffic to it in both, and lets its sets run there.
    candidate = expected["candidate"]
    await store.move_pointer("llm", "approved", candidate, actor="gate", reason="test promote")
    promoted = {**expected, "approved": candidate}
    for (mode, pointer), (runner, refused_for, proxy) in (
        await run_matrix(store, sets, production=True, tag="promoted")
    ).items():
        assert runner == proxy == promoted[pointer], (mode, pointer)
        assert refused_for == (candidate if pointer == "latest" else None), (mode, pointer)
