"""server.route_table: the fast path dispatches exactly the table's hot rows, each the FastAPI route for its paths.

For every route the built app has, a concrete raw path is made from its template; the fast path must
claim it only when the table marks that very route hot, and FastAPI's router must match every path
the fast path claims to the same route. A hot route added to one and not the other fails here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from fastapi.routing import APIRoute
from starlette.routing import BaseRoute, Match

from lightningstore import SqlStore
from lightningstore.proxy.fast_call import match_call
from lightningstore.server import build_app, fast_path
from lightningstore.server.route_table import PROXY_CALLS, ROUTES

PARAM = re.compile(r"\{[a-z_]+(:[a-z]+)?\}")
ID = "ro%2F1"
"""Every path id: percent-encoded, as a client sends an id holding a slash."""


def sample(template: str) -> str:
    """A raw path that `template` matches: `{mode}` a real mode, every other parameter ID."""
    return PARAM.sub(ID, template.replace("{mode}", "train"))


def api_routes(routes: Sequence[BaseRoute]) -> list[APIRoute]:
    """The app's API routes in the order FastAPI tries them, those of the routers it includes in place."""
    found: list[APIRoute] = []
    for route in routes:
        if isinstance(route, APIRoute):
            found.append(route)
        elif (router := getattr(route, "original_router", None)) is not None:  # an included APIRouter
            found.extend(api_routes(router.routes))
    return found


def fastapi_route(routes: list[APIRoute], method: str, path: str) -> APIRoute | None:
    """The route FastAPI answers `method path` with (the first full match), if one."""
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "root_path": "",
        "query_string": b"",
        "headers": [],
    }
    return next((route for route in routes if route.matches(scope)[0] == Match.FULL), None)


def test_the_app_registers_every_row_in_order(sql_store: SqlStore) -> None:
    routes = api_routes(build_app(sql_store, sweep_interval=None).routes)
    registered = [(route.path, route.methods, route.endpoint) for route in routes]
    assert registered[: len(ROUTES)] == [(row.path, {row.method}, row.endpoint) for row in ROUTES]


def test_the_fast_path_dispatches_only_the_tables_hot_rows() -> None:
    hot = {row.hot for row in ROUTES if row.hot is not None}
    dispatched = {*fast_path.HOT_PATHS.values()}
    dispatched |= {template.route for templates in fast_path.HOT_TEMPLATES.values() for template in templates}
    assert dispatched == hot and len(hot) == sum(row.hot is not None for row in ROUTES)


def test_every_hot_row_is_the_fastapi_route_for_the_paths_the_fast_path_takes(sql_store: SqlStore) -> None:
    routes = api_routes(build_app(sql_store, sweep_interval=None).routes)
    for row in ROUTES:
        if row.hot is None:
            continue
        path = sample(row.path)
        assert fast_path._route(row.method, path) == (row.hot, ("ro/1",) * row.path.count("{"))
        route = fastapi_route(routes, row.method, path)
        assert route is not None and route.endpoint is row.endpoint, (row.method, row.path)
    for method, template in PROXY_CALLS:
        assert match_call(method, sample(template)) is not None, template
        route = fastapi_route(routes, method, sample(template))
        assert route is not None and route.path == template and method in route.methods


def test_the_fast_path_takes_no_other_fastapi_route(sql_store: SqlStore) -> None:
    routes = api_routes(build_app(sql_store, sweep_interval=None).routes)
    hot = {(row.method, row.path): row.hot for row in ROUTES if row.hot is not None}
    assert len(routes) > len(ROUTES)  # the gateway's, the gate's and the dashboard's too
    for route in routes:
        for method in route.methods:
            path = sample(route.path)
            if fastapi_route(routes, method, path) is not route:
                continue  # an earlier route answers this path: it is checked on its own
            taken, _ = fast_path._route(method, path)
            assert taken is hot.get((method, route.path)), (method, route.path)
            assert (match_call(method, path) is not None) == ((method, route.path) in PROXY_CALLS), route.path


def test_the_client_and_the_table_share_one_definition_of_every_path() -> None:
    """`StorePaths` holds each path once: the table registers every one of them (through the id
    convertor), and the client writes no path of its own."""
    import inspect

    from lightningstore.client import store_client
    from lightningstore.http_api import StorePaths, filled, route_path

    templates = {v for k, v in vars(StorePaths).items() if k.isupper()}
    registered = {route.path for route in ROUTES}
    assert {route_path(t) for t in templates} <= registered
    assert not re.search(r"[\"']/(v1|healthz)", inspect.getsource(store_client))
    # An id is one segment, percent-encoded: a slash in it cannot reach another route.
    assert (
        filled(StorePaths.HEARTBEAT, rollout_id="a/b", attempt_id="c")
        == "/v1/rollouts/a%2Fb/attempts/c/heartbeat"
    )
    assert (
        route_path(StorePaths.HEARTBEAT) == "/v1/rollouts/{rollout_id:id}/attempts/{attempt_id:id}/heartbeat"
    )
