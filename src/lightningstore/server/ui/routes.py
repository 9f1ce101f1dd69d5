"""The dashboard's pages under /ui: rollouts, one rollout, training, resources, release. Read-only."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated
from urllib.parse import parse_qs

from fastapi import APIRouter, Depends, Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

import lightningstore.auth.raw_path  # noqa: F401  (registers the `{name:id}` path convertor)
from lightningstore.auth.tokens import Caller
from lightningstore.server.ui.access import (
    COOKIE,
    COOKIE_PATH,
    PageError,
    PageRefused,
    cross_site,
    refusal,
    safe_next,
    viewer,
)
from lightningstore.server.ui.release_view import release_view
from lightningstore.server.ui.resource_view import resource_chains
from lightningstore.server.ui.rollout_rows import RolloutFilter, rollout_page
from lightningstore.server.ui.templating import render, secured
from lightningstore.server.ui.waterfall import build_waterfall
from lightningstore.store import LightningStore

router = APIRouter(prefix="/ui", include_in_schema=False)
Viewer = Annotated[Caller, Depends(viewer)]


def _store(request: Request) -> LightningStore:
    return request.app.state.store


@router.get("")
@router.get("/")
async def home() -> Response:
    return secured(RedirectResponse("/ui/rollouts", status_code=307))


@router.get("/login")
async def login_form(request: Request, next: str = "/ui/rollouts") -> HTMLResponse:
    if "token" in request.query_params:
        raise PageRefused(400, "a token in the URL is not accepted: sign in with the form", safe_next(next))
    return render(request, "login.html", next_url=safe_next(next), message=None)


async def _form(request: Request) -> dict[str, list[str]]:
    """The urlencoded form of a sign-in or sign-out POST; PageRefused (403) unless this dashboard sent it."""
    form = parse_qs((await request.body()).decode(errors="replace"))
    why = cross_site(request, form)
    if why is not None:
        raise PageRefused(403, why, "/ui/login")
    return form


@router.post("/login")
async def login(request: Request) -> Response:
    """The form posts `token`, `next` and its `csrf` token (urlencoded); a viewer, approver or admin
    token sets the cookie."""
    form = await _form(request)
    token = (form.get("token") or [""])[0].strip()
    next_url = safe_next((form.get("next") or [""])[0])
    caller = request.app.state.tokens.resolve(token or None)
    if caller is None or not token:
        message = "that token is not one this store knows" if token else "enter a token"
        return render(request, "login.html", status=401, next_url=next_url, message=message)
    why = refusal(caller)
    if why is not None:
        return render(request, "login.html", status=403, next_url=next_url, message=why)
    response = RedirectResponse(next_url, status_code=303)
    secure = request.url.scheme == "https"
    response.set_cookie(COOKIE, token, path=COOKIE_PATH, httponly=True, samesite="strict", secure=secure)
    return secured(response)


@router.post("/logout")
async def logout(request: Request) -> Response:
    """Sign out (a POST from the page's own form: another site cannot sign a reader out)."""
    await _form(request)
    response = RedirectResponse("/ui/login", status_code=303)
    response.delete_cookie(COOKIE, path=COOKIE_PATH)
    return secured(response)


async def _rollouts_context(
    request: Request, status: str = "", mode: str = "", group: str = "", page: str = "", per_page: str = ""
) -> dict[str, object]:
    """The rollouts table's filter from the query string, and the page of rows it selects."""
    f = RolloutFilter.parse(status, mode, group, page, per_page)
    return {"f": f, "data": await rollout_page(_store(request), f)}


RolloutsContext = Annotated[dict[str, object], Depends(_rollouts_context)]


@router.get("/rollouts")
async def rollouts(request: Request, caller: Viewer, context: RolloutsContext) -> HTMLResponse:
    return render(request, "rollouts.html", caller=caller, active="rollouts", **context)


@router.get("/rollouts/live")
async def rollouts_live(request: Request, caller: Viewer, context: RolloutsContext) -> HTMLResponse:
    """The table alone, for the page's script to swap in while training runs."""
    return render(request, "_rollouts_live.html", caller=caller, **context)


@router.get("/rollouts/{rollout_id:id}")
async def rollout(request: Request, caller: Viewer, rollout_id: str) -> HTMLResponse:
    store = _store(request)
    found = await store.get_rollout_by_id(rollout_id)
    if found is None:
        raise PageError(404, f"no rollout {rollout_id!r} in this store")
    attempts = await store.query_attempts(rollout_id)
    rewards = await store.query_rewards(rollout_id)
    spans = await store.query_spans(rollout_id)
    views = []
    for attempt in reversed(attempts):  # newest first: the one that decided the rollout's status
        mine = [s for s in spans if s.attempt_id == attempt.attempt_id]
        # A reward without an attempt belongs to the rollout's latest attempt.
        judged = [
            w
            for w in rewards
            if w.attempt_id == attempt.attempt_id or (w.attempt_id is None and attempt is attempts[-1])
        ]
        views.append((attempt, build_waterfall(mine, judged)))
    resource_set = await store.get_resources_by_id(found.resources_id) if found.resources_id else None
    return render(
        request,
        "rollout.html",
        caller=caller,
        active="rollouts",
        rollout=found,
        rewards=rewards,
        attempts=views,
        resource_set=resource_set,
    )


@router.get("/training")
async def training(request: Request, caller: Viewer) -> HTMLResponse:
    return render(request, "training.html", caller=caller, active="training")


@router.get("/api/metrics")
async def metrics(request: Request, caller: Viewer) -> JSONResponse:
    csv_path: Path | None = request.app.state.ui_metrics_csv
    view = await request.app.state.ui_metrics_cache.get(_store(request), csv_path)
    return secured(JSONResponse(view.as_json()))


@router.get("/resources")
async def resources(request: Request, caller: Viewer) -> HTMLResponse:
    chains = await resource_chains(_store(request))
    return render(request, "resources.html", caller=caller, active="resources", chains=chains)


@router.get("/release")
async def release(request: Request, caller: Viewer) -> HTMLResponse:
    gate = getattr(request.app.state, "gate", None)
    receipts = await release_view(gate) if gate is not None else None
    return render(request, "release.html", caller=caller, active="release", receipts=receipts)
