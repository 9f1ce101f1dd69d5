"""A STAND-IN for the Kubernetes API server (no cluster here): just the batch/v1 Job endpoints BatchV1Api calls
and the networking.k8s.io/v1 NetworkPolicy create/replace NetworkingV1Api calls.

It records every call. A Job whose container command contains "fail" fails, "hang" never finishes, any
other succeeds on its second status read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

JOBS = "/apis/batch/v1/namespaces/{namespace}/jobs"
POLICIES = "/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies"


@dataclass
class StandIn:
    jobs: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    reads: dict[tuple[str, str], int] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    created: list[dict[str, Any]] = field(default_factory=list)
    policies: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    policy_calls: list[tuple[str, str]] = field(default_factory=list)


def _status(code: int, reason: str, message: str) -> JSONResponse:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": reason,
        "message": message,
        "code": code,
    }
    return JSONResponse(body, status_code=code)


def _progress(state: StandIn, key: tuple[str, str]) -> dict[str, Any]:
    job = state.jobs[key]
    state.reads[key] = state.reads.get(key, 0) + 1
    command = " ".join(job["spec"]["template"]["spec"]["containers"][0]["command"])
    if "hang" in command or state.reads[key] < 2:
        job["status"] = {"active": 1}
    elif "fail" in command:
        job["status"] = {
            "failed": 1,
            "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                            "message": "Job has reached the specified backoff limit"}],
        }  # fmt: skip
    else:
        job["status"] = {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
    return job


def create_stand_in() -> tuple[FastAPI, StandIn]:
    """The stand-in app and its recorded state."""
    app = FastAPI()
    state = StandIn()

    @app.post(JOBS)
    async def create(namespace: str, request: Request) -> Any:
        body = await request.json()
        name = body["metadata"]["name"]
        state.calls.append(("create", name))
        if (namespace, name) in state.jobs:
            return _status(409, "AlreadyExists", f'jobs.batch "{name}" already exists')
        body["metadata"].setdefault("namespace", namespace)
        body["metadata"]["uid"] = f"uid-{len(state.created)}"
        body["status"] = {}
        state.jobs[(namespace, name)] = body
        state.created.append(body)
        return JSONResponse(body, status_code=201)

    @app.get(JOBS + "/{name}")
    async def read(namespace: str, name: str) -> Any:
        state.calls.append(("read", name))
        if (namespace, name) not in state.jobs:
            return _status(404, "NotFound", f'jobs.batch "{name}" not found')
        return state.jobs[(namespace, name)]

    @app.get(JOBS + "/{name}/status")
    async def read_status(namespace: str, name: str) -> Any:
        state.calls.append(("status", name))
        if (namespace, name) not in state.jobs:
            return _status(404, "NotFound", f'jobs.batch "{name}" not found')
        return _progress(state, (namespace, name))

    @app.delete(JOBS + "/{name}")
    async def delete(namespace: str, name: str, request: Request) -> Any:
        options = await request.json() if await request.body() else {}
        state.calls.append(("delete", name))
        if state.jobs.pop((namespace, name), None) is None:
            return _status(404, "NotFound", f'jobs.batch "{name}" not found')
        return {"kind": "Status", "apiVersion": "v1", "status": "Success", "details": {"name": name},
                "propagationPolicy": options.get("propagationPolicy")}  # fmt: skip

    @app.post(POLICIES)
    async def create_policy(namespace: str, request: Request) -> Any:
        body = await request.json()
        name = body["metadata"]["name"]
        state.policy_calls.append(("create", name))
        if (namespace, name) in state.policies:
            return _status(409, "AlreadyExists", f'networkpolicies.networking.k8s.io "{name}" already exists')
        state.policies[(namespace, name)] = body
        return JSONResponse(body, status_code=201)

    @app.put(POLICIES + "/{name}")
    async def replace_policy(namespace: str, name: str, request: Request) -> Any:
        state.policy_calls.append(("replace", name))
        if (namespace, name) not in state.policies:
            return _status(404, "NotFound", f'networkpolicies.networking.k8s.io "{name}" not found')
        state.policies[(namespace, name)] = await request.json()
        return state.policies[(namespace, name)]

    return app, state
