"""Signing in to the dashboard: POST only, from its own form (login CSRF), people's roles only, no token
in a URL; signing out by POST too. The API's description needs a token; every /ui answer has a CSP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from lightningstore import SqlStore
from lightningstore.auth import TokenConfig
from lightningstore.auth.agent_key import agent_key
from lightningstore.server import build_app
from lightningstore.server.ui.access import COOKIE, CSRF_COOKIE

TOKENS = {"admin": "adm", "algorithm": "alg", "runner": "run", "approver": "apr", "viewer": "view"}
SECRET = "ui-agent-secret"
BASE = "http://127.0.0.1"


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """A cookie-keeping client on an app with tokens (what a browser does, minus the rendering)."""
    store = SqlStore(tmp_path / "store.db")
    tokens = TokenConfig.from_mapping({**TOKENS, "agent_secret": SECRET})
    app = build_app(store, tokens=tokens, sweep_interval=None, proxy=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as client:
        yield client
    await store.close()


async def _form_token(client: httpx.AsyncClient) -> str:
    page = await client.get("/ui/login")
    assert page.status_code == 200
    return client.cookies[CSRF_COOKIE]


async def _sign_in(client: httpx.AsyncClient, token: str, **headers: str) -> httpx.Response:
    csrf = await _form_token(client)
    form = {"token": token, "next": "/ui/resources", "csrf": csrf}
    return await client.post("/ui/login", data=form, headers=headers)


async def test_a_cross_site_sign_in_is_refused(browser: httpx.AsyncClient) -> None:
    # Another site's form: no form token of this dashboard's (and SameSite=Strict keeps its cookie home).
    forged = await browser.post("/ui/login", data={"token": "view", "next": "/ui/rollouts"})
    assert forged.status_code == 403 and "not one this dashboard served" in forged.text
    assert COOKIE not in forged.cookies
    # Even with the form token, a browser marking the post as another site's, or another Origin: 403.
    cross = await _sign_in(browser, "view", **{"sec-fetch-site": "cross-site"})
    assert cross.status_code == 403 and "Sec-Fetch-Site: cross-site" in cross.text
    elsewhere = await _sign_in(browser, "view", origin="https://evil.example")
    assert elsewhere.status_code == 403 and "https://evil.example" in elsewhere.text
    wrong = await browser.post("/ui/login", data={"token": "view", "csrf": "guessed"})
    assert wrong.status_code == 403
    assert COOKIE not in browser.cookies
    # The dashboard's own form (its pages send no referrer, so a browser says Origin: null) signs in.
    ok = await _sign_in(browser, "view", origin="null", **{"sec-fetch-site": "same-origin"})
    assert ok.status_code == 303 and ok.headers["location"] == "/ui/resources"
    assert browser.cookies[COOKIE] == "view"
    assert (await browser.get("/ui/resources")).status_code == 200


async def test_only_peoples_roles_sign_in(browser: httpx.AsyncClient) -> None:
    key = agent_key(SECRET, "ro-1", "at-1")
    for token, who in ((key, "an agent key"), ("run", "the runner role"), ("alg", "the algorithm role")):
        refused = await _sign_in(browser, token)
        assert refused.status_code == 403, token
        assert f"{who} may not view the dashboard" in refused.text
        assert COOKIE not in browser.cookies
        by_header = await browser.get("/ui/rollouts", headers={"authorization": f"Bearer {token}"})
        assert by_header.status_code == 403
    for token in ("apr", "adm", "view"):
        assert (await _sign_in(browser, token)).status_code == 303, token


async def test_no_token_in_urls(browser: httpx.AsyncClient) -> None:
    for url in ("/ui/rollouts?token=view", "/ui/login?token=view"):
        page = await browser.get(url)
        assert page.status_code == 400 and "a token in the URL is not accepted" in page.text
        assert COOKIE not in browser.cookies


async def test_sign_out_is_a_post_from_the_page(browser: httpx.AsyncClient) -> None:
    assert (await _sign_in(browser, "view")).status_code == 303
    assert (await browser.get("/ui/logout")).status_code == 405  # a link or an <img> signs nobody out
    forged = await browser.post("/ui/logout", data={})
    assert forged.status_code == 403 and browser.cookies.get(COOKIE) == "view"
    page = await browser.get("/ui/rollouts")
    assert 'action="/ui/logout"' in page.text and browser.cookies[CSRF_COOKIE] in page.text
    out = await browser.post("/ui/logout", data={"csrf": browser.cookies[CSRF_COOKIE]})
    assert out.status_code == 303 and out.headers["location"] == "/ui/login"
    assert COOKIE not in browser.cookies
    assert (await browser.get("/ui/rollouts")).status_code == 401


async def test_every_ui_answer_has_the_csp(browser: httpx.AsyncClient) -> None:
    headers = {"authorization": "Bearer view"}
    answers = [
        await browser.get("/ui/login"),
        await browser.get("/ui/rollouts"),  # 401: the sign-in page
        await browser.get("/ui/rollouts", headers=headers),
        await browser.get("/ui/training", headers=headers),
        await browser.get("/ui/api/metrics", headers=headers),
        await browser.get("/ui", headers=headers),
        await browser.get("/ui/static/ui.js"),
        await browser.get("/ui/static/uPlot.iife.min.js"),
        await browser.get("/ui/rollouts/nope", headers=headers),
    ]
    for answer in answers:
        csp = answer.headers.get("content-security-policy", "")
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp, answer.url
        assert answer.headers["x-content-type-options"] == "nosniff"
    page = answers[2].text
    assert "<script>" not in page and "style=" not in page  # nothing inline for the CSP to refuse


async def test_the_api_description_needs_a_token(browser: httpx.AsyncClient, tmp_path: Path) -> None:
    for path in ("/openapi.json", "/docs", "/redoc"):
        assert (await browser.get(path)).status_code == 401, path
        assert (await browser.get(path, headers={"authorization": "Bearer wrong"})).status_code == 401
        assert (await browser.get(path, headers={"authorization": "Bearer run"})).status_code == 200
    schema = (await browser.get("/openapi.json", headers={"authorization": "Bearer view"})).json()
    assert "/v1/rollouts" in schema["paths"]
    # Dev mode (no tokens): open, as every route is.
    store = SqlStore(tmp_path / "dev.db")
    dev = build_app(store, sweep_interval=None, proxy=False, gate=False, ui=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=dev), base_url=BASE) as client:
        assert (await client.get("/openapi.json")).status_code == 200
    await store.close()
