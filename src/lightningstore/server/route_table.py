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
from lightningstore.http_api import DequeueBody, StorePaths, UpdateAttemptBody, route_path
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

P = StorePaths

ROUTES: tuple[Route, ...] = (
    # FastAPI tries the rows in this order; a 405's Allow header comes from the first row whose path matches.
    Route("POST", route_path(P.ROLLOUTS), rollouts.enqueue_rollouts, "rollouts", ENQUEUE),
    Route("POST", route_path(P.DEQUEUE), rollouts.dequeue_rollouts, "rollouts", DEQUEUE),
    Route("POST", route_path(P.START), rollouts.start_rollout, "rollouts"),
    Route("POST", route_path(P.QUERY_ROLLOUTS), rollouts.query_rollouts, "rollouts"),
    Route("POST", route_path(P.WAIT), rollouts.wait_for_rollouts, "rollouts"),
    Route("GET", route_path(P.ROLLOUT), rollouts.get_rollout, "rollouts"),
    Route("PATCH", route_path(P.ROLLOUT), rollouts.update_rollout, "rollouts"),
    Route("POST", route_path(P.CANCEL), rollouts.cancel_rollout, "rollouts"),
    Route("POST", route_path(P.SPANS), telemetry.add_spans, "telemetry", ADD_SPANS),
    Route("POST", route_path(P.REWARDS), telemetry.add_reward, "telemetry"),
    Route("GET", route_path(P.ROLLOUT_SPANS), telemetry.query_spans, "telemetry", QUERY_SPANS),
    Route("GET", route_path(P.ROLLOUT_REWARDS), telemetry.query_rewards, "telemetry"),
    Route("POST", route_path(P.QUERY_SPANS), telemetry.query_spans_many, "telemetry"),
    Route("POST", route_path(P.QUERY_REWARDS), telemetry.query_rewards_many, "telemetry"),
    Route("POST", route_path(P.ATTEMPTS), attempts.start_attempt, "attempts"),
    Route("GET", route_path(P.ATTEMPTS), attempts.query_attempts, "attempts"),
    Route("GET", route_path(P.LATEST_ATTEMPT), attempts.get_latest_attempt, "attempts"),
    Route("POST", route_path(P.HEARTBEAT), attempts.heartbeat, "attempts"),
    Route("PATCH", route_path(P.ATTEMPT), attempts.update_attempt, "attempts", UPDATE_ATTEMPT),
    Route("POST", route_path(P.FINISH), attempts.finish_attempt, "attempts"),
    Route("POST", route_path(P.AGENT_KEY), attempts.mint_agent_key, "attempts"),
    Route("GET", route_path(P.HEALTHZ), system.healthz, "system"),
    Route("PUT", route_path(P.WORKER), system.update_worker, "system"),
    Route("GET", route_path(P.WORKERS), system.query_workers, "system"),
    Route("GET", route_path(P.STATISTICS), system.statistics, "system"),
    Route("POST", route_path(P.SWEEP), system.sweep_stale_attempts, "system"),
    Route("POST", route_path(P.RESOURCE_VERSIONS), resources.add_resource_version, "resources"),
    Route("GET", route_path(P.RESOURCE_VERSIONS), resources.list_resource_versions, "resources"),
    Route("GET", route_path(P.RESOURCE_VERSION), resources.get_resource_version, "resources"),
    Route("POST", route_path(P.RESOURCES), resources.add_resources, "resources"),
    Route("POST", route_path(P.RESOURCE_SETS), resources.add_resource_set, "resources"),
    Route("GET", route_path(P.LATEST_RESOURCE_SET), resources.get_latest_resources, "resources"),
    Route("GET", route_path(P.RESOURCE_SET), resources.get_resources, "resources"),
    Route("GET", route_path(P.POINTERS), resources.get_pointer, "resources"),
    Route("PUT", route_path(P.POINTERS), resources.move_pointer, "resources"),
    Route("GET", route_path(P.POINTER_HISTORY), resources.query_pointer_history, "resources"),
    Route("POST", P.TRACES, otlp_routes.export_traces, "otlp", options=otlp_routes.ROUTE_OPTIONS),
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
