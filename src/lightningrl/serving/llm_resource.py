"""The LLM `fit` trains or evaluates, published and served: a fresh resource on a checkpoint with our
inference server (or vLLM) started, the latest version on resume (its server restarted unless it
answers), or a model served elsewhere published as it is."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from lightningrl.evaluation.report import ServedModel
from lightningrl.processes.supervisor import Supervisor, port_is_free
from lightningrl.serving.launch import (
    DETERMINISTIC_BATCH,
    INFERENCE_BATCH,
    InferenceEngine,
    InferenceLaunch,
    start_inference_server,
)
from lightningstore import LLM, LightningStore
from lightningstore.data.resource import MODE_SAMPLING
from lightningstore.server.run import free_port

SERVED_MODEL_NAME = "policy"
"""The model name our inference server serves a policy under."""


async def _answers(endpoint: str) -> bool:
    """True when an OpenAI-style endpoint lists its models."""
    try:
        async with httpx.AsyncClient(timeout=3.0) as client:
            return (await client.get(endpoint.rstrip("/") + "/models")).is_success
    except httpx.HTTPError:
        return False


async def llm_resource(
    supervisor: Supervisor,
    store: LightningStore,
    name: str,
    model_dir: Path,
    sampling_by_mode: dict[str, dict[str, Any]],
    *,
    deterministic: bool = False,
    server: InferenceEngine | None = None,
    served: ServedModel | None = None,
) -> tuple[LLM, InferenceLaunch | None]:
    """The LLM being trained, served: a fresh resource on `model_dir`, or the latest version (resume),
    with an inference server started unless its endpoints already answer (and how it was started).
    A `served` model (evaluated only) is published as it is, no server started."""
    batch = DETERMINISTIC_BATCH if deterministic else INFERENCE_BATCH
    engine = server or InferenceEngine()
    latest = await store.get_latest_version(name)
    if served is not None:
        llm = LLM(
            endpoints=[served.base_url],
            model=served.model,
            sampling_by_mode=sampling_by_mode,
            api_key_env=served.api_key_env,
        )
        if latest is None or latest.resource != llm:
            await store.add_resource_version(
                name, llm, created_by="fit", metadata={"fit": "served elsewhere"}
            )
        return llm, None
    if latest is None:
        launch = InferenceLaunch(str(model_dir), SERVED_MODEL_NAME, free_port(), engine, batch)
        endpoint = await start_inference_server(supervisor, launch)
        llm = LLM(
            endpoints=[endpoint],
            model=SERVED_MODEL_NAME,
            checkpoint=str(model_dir),
            sampling=dict(MODE_SAMPLING["train"]),
            sampling_by_mode=sampling_by_mode,
            seed_calls=deterministic,
        )
        await store.add_resource_version(name, llm, created_by="fit", artifact=str(model_dir))
        return llm, launch
    llm = latest.resource
    if not isinstance(llm, LLM) or not llm.checkpoint:
        raise ValueError(
            f"resource {name!r} in the store must be an LLM with a checkpoint to train, got {llm!r}"
        )
    if all([await _answers(e) for e in llm.endpoints]):
        return llm, None
    port = _local_port(llm.endpoints)
    launch = InferenceLaunch(
        llm.checkpoint, llm.model, port if port and port_is_free(port) else free_port(), engine, batch
    )
    endpoint = await start_inference_server(supervisor, launch)
    if llm.endpoints == [endpoint]:
        return llm, launch
    # The old server is gone and its port is taken: a version that only moves the endpoint.
    moved = llm.model_copy(update={"endpoints": [endpoint]})
    await store.add_resource_version(
        name,
        moved,
        parent_id=latest.version_id,
        created_by="fit",
        artifact=llm.checkpoint,
        metadata={"fit": "endpoints moved", "previous_endpoints": llm.endpoints},
    )
    return moved, launch


def _local_port(endpoints: list[str]) -> int | None:
    """The port of a single 127.0.0.1 endpoint (a previous fit's server, to be restarted there)."""
    if len(endpoints) != 1:
        return None
    parts = urlsplit(endpoints[0])
    return parts.port if parts.hostname in ("127.0.0.1", "localhost") else None
