"""ROUTES: every route of the store API in one table, and which of them the fast path serves.

Each row is a method, a path template, the FastAPI endpoint, its OpenAPI tag and, for a route the
fast path also serves, its `HotRoute`. `register_routes` adds the rows to the app in this order (the
order FastAPI matches them in); `fast_path` builds its dispatch, which `StoreApp`'s early answer
shares, from the rows that carry a `HotRoute`. The model gateway's call routes are PROXY_CALLS: the
proxy registers them (`proxy.install_proxy`) and the fast path matches them with
`proxy.fast_call.match_call`. The gate's routes (`gate.routes`), the dashboard (`server.ui`) and the
API docs (`server.api_docs`) are mounted by their own packages and never take the fast path.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import FastAPI
from pydantic import Field, TypeAdapter

import lightningstore.auth.raw_path  # noqa: F401  (registers the `{name:id}` path convertor)
from lightningstore import semconv
from lightningstore.data.attempt import Attempt, AttemptedRollout
from lightningstore.data.rollout import Rollout, RolloutRequest
from lightningstore.data.span import Span, SpanIn
from lightningstore.http_api import DequeueBody, UpdateAttemptBody
from lightningstore.server.routes import attempts, events, resources, rollouts, system, telemetry
from lightningstore.server.routes import otlp as otlp_routes


@dataclass(frozen=True)
class HotRoute:
    """How the fast path serves a route: `run(store, caller, body, *path_ids)` on the validated body."""

    body: TypeAdapter[Any] | None
    """Validates the JSON body in one pass; None: the route takes no body (`run` gets None)."""
    run: Callable[..., Awaitable[Any]]
    answer: TypeAdapter[Any]


@dataclass(frozen=True)
class Route:
    """One row: a route FastAPI serves, and how the fast path serves it when it does."""

    method: str
    path: str
    """FastAPI's path template; the fast path's routes use only `{name:id}` parameters."""
    endpoint: Callable[..., Any]
    tag: str
    hot: HotRoute | None = None
    """Set: the fast path answers a bare JSON request (no query string) to this route itself."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """More keyword arguments of `FastAPI.add_api_route`."""


ADD_SPANS = HotRoute(
    TypeAdapter(Annotated[list[SpanIn], Field(max_length=telemetry.MAX_SPANS)]),
    telemetry.add_spans_as,
    TypeAdapter(list[Span]),
)
ENQUEUE = HotRoute(
    TypeAdapter(Annotated[list[RolloutRequest], Field(max_length=rollouts.MAX_REQUESTS)]),
    rollouts.enqueue_as,
    TypeAdapter(list[Rollout]),
)
DEQUEUE = HotRoute(TypeAdapter(DequeueBody), rollouts.dequeue_as, TypeAdapter(list[AttemptedRollout]))
UPDATE_ATTEMPT = HotRoute(TypeAdapter(UpdateAttemptBody), attempts.update_attempt_as, TypeAdapter(Attempt))
QUERY_SPANS = HotRoute(None, telemetry.query_spans_as, TypeAdapter(list[Span]))
"""Only without a query string (a filter goes to FastAPI): the algorithm's read after each rollout."""

ROLLOUT = "/v1/rollouts/{rollout_id:id}"
ATTEMPT = ROLLOUT + "/attempts/{attempt_id:id}"

ROUTES: tuple[Route, ...] = (
    # FastAPI tries the rows in this order; a 405's Allow header comes from the first row whose path matches.
    Route("POST", "/v1/rollouts", rollouts.enqueue_rollouts, "rollouts", ENQUEUE),
    Route("POST", "/v1/rollouts/dequeue", rollouts.dequeue_rollouts, "rollouts", DEQUEUE),
    Route("POST", "/v1/rollouts/start", rollouts.start_rollout, "rollouts"),
    Route("POST", "/v1/rollouts/query", rollouts.query_rollouts, "rollouts"),
    Route("POST", "/v1/rollouts/wait", rollouts.wait_for_rollouts, "rollouts"),
    Route("GET", ROLLOUT, rollouts.get_rollout, "rollouts"),
    Route("PATCH", ROLLOUT, rollouts.update_rollout, "rollouts"),
    Route("POST", ROLLOUT + "/cancel", rollouts.cancel_rollout, "rollouts"),
    Route("POST", "/v1/spans", telemetry.add_spans, "telemetry", ADD_SPANS),
    Route("POST", "/v1/rewards", telemetry.add_reward, "telemetry"),
    Route("GET", ROLLOUT + "/spans", telemetry.query_spans, "telemetry", QUERY_SPANS),
    Route("GET", ROLLOUT + "/rewards", telemetry.query_rewards, "telemetry"),
    Route("POST", "/v1/spans/query", telemetry.query_spans_many, "telemetry"),
    Route("POST", "/v1/rewards/query", telemetry.query_rewards_many, "telemetry"),
    Route("POST", ROLLOUT + "/attempts", attempts.start_attempt, "attempts"),
    Route("GET", ROLLOUT + "/attempts", attempts.query_attempts, "attempts"),
    Route("GET", ROLLOUT + "/attempts/latest", attempts.get_latest_attempt, "attempts"),
    Route("POST", ATTEMPT + "/heartbeat", attempts.heartbeat, "attempts"),
    Route("PATCH", ATTEMPT, attempts.update_attempt, "attempts", UPDATE_ATTEMPT),
    Route("POST", ATTEMPT + "/finish", attempts.finish_attempt, "attempts"),
    Route("POST", ATTEMPT + "/agent-key", attempts.mint_agent_key, "attempts"),
    Route("GET", "/healthz", system.healthz, "system"),
    Route("PUT", "/v1/workers/{worker_id:id}", system.update_worker, "system"),
    Route("GET", "/v1/workers", system.query_workers, "system"),
    Route("GET", "/v1/statistics", system.statistics, "system"),
    Route("POST", "/v1/watchdog/sweep", system.sweep_stale_attempts, "system"),
    Route("POST", "/v1/resource-versions", resources.add_resource_version, "resources"),
    Route("GET", "/v1/resource-versions", resources.list_resource_versions, "resources"),
    Route("GET", "/v1/resource-versions/{version_id:id}", resources.get_resource_version, "resources"),
    Route("POST", "/v1/resources", resources.add_resources, "resources"),
    Route("POST", "/v1/resource-sets", resources.add_resource_set, "resources"),
    Route("GET", "/v1/resource-sets/latest", resources.get_latest_resources, "resources"),
    Route("GET", "/v1/resource-sets/{resources_id:id}", resources.get_resources, "resources"),
    Route("GET", "/v1/pointers", resources.get_pointer, "resources"),
    Route("PUT", "/v1/pointers", resources.move_pointer, "resources"),
    Route("GET", "/v1/pointer-history", resources.query_pointer_history, "resources"),
    Route("POST", "/v1/traces", otlp_routes.export_traces, "otlp", options=otlp_routes.ROUTE_OPTIONS),
    Route(
        "POST",
        semconv.AGL_EVENTS_PATH.format(rollout_id="{rollout_id:id}", attempt_id="{attempt_id:id}"),
        events.post_event,
        "events",
    ),
)

_CALL_IDS = {"rollout_id": "{rollout_id:id}", "attempt_id": "{attempt_id:id}", "mode": "{mode}"}
PROXY_CALLS: tuple[tuple[str, str], ...] = tuple(
    ("POST", semconv.PROXY_PREFIX + base.format(**_CALL_IDS) + call)
    for base in (semconv.PROXY_CALL_PATH, semconv.AGL_CALL_PATH)
    for call in ("/chat/completions", "/completions")
)
"""(method, path) of the gateway's model calls: registered by `proxy.routes`, served on the fast path
by `Gateway.call` once `match_call` recognises them."""


def register_routes(app: FastAPI) -> None:
    """Add every row of ROUTES to `app`, in order."""
    for route in ROUTES:
        app.add_api_route(
            route.path, route.endpoint, methods=[route.method], tags=[route.tag], **route.options
        )
