"""The dashboard at /ui, in a real headless chromium, on a store filled by a short real training run.

One store server process (tokens on, the run's metrics.csv) and one browser for the module; each test
opens a page and checks what a person would look for, and saves a screenshot under test-artifacts/ui/.
"""

from __future__ import annotations

import asyncio
import csv
import json
import os
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from backends import LiveServer
from playwright.sync_api import Browser, Page, expect, sync_playwright
from ui_demo_store import STEPS, DemoStore, build_demo_store

from lightningrl.cli import main
from lightningrl.processes.supervisor import child_env
from lightningstore import SqlStore
from lightningstore.data.span import Span

CHROMIUM = os.environ.get("LIGHTNINGRL_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "ui"
T = TypeVar("T")
TOKENS = {"admin": "adm-ui", "viewer": "view-ui", "runner": "run-ui"}


def in_thread(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to its end on a thread of its own (Playwright's sync API runs a loop on this one)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoStore:
    return in_thread(build_demo_store(tmp_path_factory.mktemp("ui")))


@pytest.fixture(scope="module")
def server(demo: DemoStore) -> Iterator[LiveServer]:
    tokens = demo.db.parent / "tokens.json"
    tokens.write_text(json.dumps(TOKENS))
    args = ("--tokens-file", str(tokens), "--metrics-csv", str(demo.metrics_csv))
    live = LiveServer(demo.db, demo.db.parent / "server.log", extra_args=args, env=child_env()).start()
    yield live
    live.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"no chromium at {CHROMIUM}: scripts/setup installs Debian's chromium (or set LIGHTNINGRL_CHROMIUM)"
        )
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield launched
        launched.close()


def sign_in(tab: Page, token: str) -> None:
    """Fill the sign-in form the page shows and send it."""
    tab.fill("input[name=token]", token)
    tab.click("button[type=submit]")


@pytest.fixture
def page(browser: Browser, server: LiveServer) -> Iterator[Page]:
    """A page signed in with the read-only viewer token, through the sign-in form."""
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    tab = context.new_page()
    errors: list[str] = []
    refused: list[str] = []
    elsewhere: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(f"{exc}\n{exc.stack}"))
    # Chromium reports what the Content-Security-Policy blocked as console errors.
    tab.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)
    tab.on("request", lambda r: None if r.url.startswith(server.url) else elsewhere.append(r.url))
    tab.goto(f"{server.url}/ui/login?next=/ui/rollouts")
    sign_in(tab, TOKENS["viewer"])
    expect(tab).to_have_url(f"{server.url}/ui/rollouts")
    yield tab
    context.close()
    assert not errors, errors  # no script error on any page
    assert not refused, refused  # nothing on any page breaks the CSP (no inline script or style)
    assert not elsewhere, elsewhere  # works offline: nothing is fetched from anywhere but the store server


def shot(tab: Page, name: str) -> None:
    tab.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def as_shown(text: str) -> str:
    """A tiny model's reply may hold any character: the page shows control characters as their Unicode
    pictures (NUL as U+2400), everything else as it is."""
    return "".join(chr(0x2400 + ord(c)) if ord(c) < 0x20 and c not in "\n\t" else c for c in text).replace(
        "\x7f", "\u2421"
    )


def read(db: Path, fn: Callable[[SqlStore], Awaitable[T]]) -> T:
    """What `fn` reads from the store, straight from the database (not through the page)."""

    async def go() -> T:
        store = SqlStore(db)
        try:
            return await fn(store)
        finally:
            await store.close()

    return in_thread(go())


def test_only_reading_tokens_can_view(browser: Browser, server: LiveServer) -> None:
    context = browser.new_context()
    tab = context.new_page()
    response = tab.goto(f"{server.url}/ui/rollouts")
    assert response is not None and response.status == 401
    expect(tab.locator("form[action='/ui/login']")).to_be_visible()
    assert response.headers["content-security-policy"].startswith("default-src 'none'; script-src 'self'")
    sign_in(tab, "not-a-token")
    expect(tab.locator("#login-message")).to_have_text("that token is not one this store knows")
    shot(tab, "login")
    sign_in(tab, TOKENS["runner"])  # a machine's token, not a person's
    expect(tab.locator("#login-message")).to_contain_text("the runner role may not view the dashboard")
    # A token in the URL is refused, and signs nobody in.
    response = tab.goto(f"{server.url}/ui/release?token={TOKENS['viewer']}")
    assert response is not None and response.status == 400
    expect(tab.locator("#login-message")).to_contain_text("a token in the URL is not accepted")
    tab.goto(f"{server.url}/ui/login?next=/ui/resources")
    sign_in(tab, TOKENS["viewer"])
    expect(tab).to_have_url(f"{server.url}/ui/resources")
    expect(tab.locator("#role")).to_have_text("viewer")
    # the viewer token reads, it never writes
    api = httpx.post(
        f"{server.url}/v1/rollouts",
        json=[{"input": {}}],
        headers={"authorization": f"Bearer {TOKENS['viewer']}"},
    )
    assert api.status_code == 403, api.text
    response = tab.goto(f"{server.url}/ui/logout")  # a GET signs nobody out
    assert response is not None and response.status == 405
    tab.goto(f"{server.url}/ui/resources")
    expect(tab.locator("#role")).to_have_text("viewer")
    tab.click("#sign-out")  # the page's own POST form
    expect(tab).to_have_url(f"{server.url}/ui/login")
    response = tab.goto(f"{server.url}/ui/rollouts")
    assert response is not None and response.status == 401
    context.close()


def test_rollouts_table_filters_pages_and_updates_live(
    page: Page, server: LiveServer, demo: DemoStore
) -> None:
    stored = read(demo.db, lambda s: s.query_rollouts())
    rows = page.locator("#rollouts tbody tr")
    expect(rows).to_have_count(min(len(stored), 25))
    expect(page.locator("#counts")).to_contain_text(f"{len(stored)} rollouts")
    shot(page, "rollouts")

    page.select_option("select[name=status]", "failed")
    page.click("#filters button[type=submit]")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-rollout", demo.failed_rollout_id)

    response = page.goto(f"{server.url}/ui/rollouts?status=done")
    assert response is not None and response.status == 422
    expect(page.locator("#error-message")).to_contain_text("status='done' is not one of")
    response = page.goto(f"{server.url}/ui/rollouts/ro-nope")
    assert response is not None and response.status == 404
    expect(page.locator("#error-message")).to_have_text("no rollout 'ro-nope' in this store")

    page.goto(f"{server.url}/ui/rollouts?mode=train&per_page=5")
    newest = read(demo.db, lambda s: s.query_rollouts(mode="train", sort_by="enqueue_time", descending=True))
    train = [r.rollout_id for r in newest]
    first_page = [rows.nth(i).get_attribute("data-rollout") for i in range(5)]
    assert first_page == train[:5]
    page.click("a[rel=next]")
    expect(rows.first).to_have_attribute("data-rollout", train[5])
    expect(page.locator("#rollouts td").nth(2)).to_have_text("train")

    # live: a rollout enqueued while the page is open appears without a reload
    page.goto(f"{server.url}/ui/rollouts")
    enqueued = httpx.post(
        f"{server.url}/v1/rollouts",
        json=[{"input": {"prompt": "late"}, "mode": "test", "group_id": "live-check"}],
        headers={"authorization": f"Bearer {TOKENS['admin']}"},
    ).json()[0]
    new_row = page.locator(f"#rollouts tr[data-rollout='{enqueued['rollout_id']}']")
    expect(new_row).to_be_visible(timeout=8000)
    expect(new_row).to_have_attribute("data-status", "queuing")

    # a running rollout's page follows it: a span stored while it is open appears
    admin = {"authorization": f"Bearer {TOKENS['admin']}"}
    (claimed,) = httpx.post(f"{server.url}/v1/rollouts/dequeue", json={"limit": 1}, headers=admin).json()
    assert claimed["rollout"]["rollout_id"] == enqueued["rollout_id"]
    new_row.locator("a").click()
    expect(page.locator("#rollout-status")).to_have_text("preparing")
    span = {
        "rollout_id": enqueued["rollout_id"],
        "attempt_id": claimed["attempt"]["attempt_id"],
        "trace_id": "ab" * 16,
        "span_id": "cd" * 8,
        "name": "tool.lookup",
        "start_time": claimed["attempt"]["start_time"],
        "end_time": claimed["attempt"]["start_time"] + 0.5,
        "attributes": {"tool.output": "\n42"},  # a leading newline the HTML parser would drop after <pre>
    }
    stored = httpx.post(f"{server.url}/v1/spans", json=[span], headers=admin)
    assert stored.status_code == 200, stored.text
    expect(page.locator("#rollout-status")).to_have_text("running", timeout=8000)
    expect(page.locator(".wf-row[data-kind=tool]")).to_contain_text("tool.lookup")
    assert page.locator(".wf-row[data-kind=tool] table.attrs pre").first.text_content() == "\n42"


def test_failed_rollout_shows_its_traceback(page: Page, demo: DemoStore) -> None:
    page.click(f"a[href='/ui/rollouts/{demo.failed_rollout_id}']")
    expect(page.locator("#rollout-status")).to_have_text("failed")
    failure = page.locator("#rollout-failure")
    expect(failure).to_contain_text("Traceback (most recent call last)")
    expect(failure).to_contain_text("RuntimeError: the agent cannot handle 'explode'")
    expect(page.locator("#attempt-1 .attempt-failure")).to_contain_text("two_call_agent")
    shot(page, "rollout-failed")


def test_span_waterfall_shows_both_llm_calls(page: Page, server: LiveServer, demo: DemoStore) -> None:
    async def one_train_rollout(store: SqlStore) -> tuple[str, list[Span]]:
        (rollout,) = await store.query_rollouts(mode="train", status=["succeeded"], limit=1)
        return rollout.rollout_id, await store.query_spans(rollout.rollout_id)

    rollout_id, spans = read(demo.db, one_train_rollout)
    page.goto(f"{server.url}/ui/rollouts/{rollout_id}")
    attempt = page.locator("#attempt-1")
    llm_rows = attempt.locator(".wf-row[data-kind=llm]")
    expect(llm_rows).to_have_count(2)
    chats = sorted((s for s in spans if s.name == "chat"), key=lambda s: s.sequence_id)
    for i, span in enumerate(chats):
        row = llm_rows.nth(i)
        expect(row).to_have_attribute("data-span", span.span_id)
        prompt_tokens = len(span.attributes["lightningrl.llm.prompt_token_ids"])
        response_tokens = len(span.attributes["lightningrl.llm.response_token_ids"])
        expect(row.locator(".input-tokens")).to_have_text(str(prompt_tokens))
        expect(row.locator(".output-tokens")).to_have_text(str(response_tokens))
        expect(row.locator(".logprobs")).to_contain_text(f"logprobs: {response_tokens} tokens, mean")
        shown = row.locator(".msg.role-response pre").text_content()
        assert shown == as_shown(span.attributes["lightningrl.llm.response_text"])
    shown = llm_rows.nth(1).locator(".msg.role-assistant pre").text_content()
    assert shown == as_shown(chats[0].attributes["lightningrl.llm.response_text"])
    # the step-0 reward is pinned to the first call; the episode reward to the attempt
    expect(llm_rows.nth(0).locator(".wf-name .reward-pin")).to_contain_text("first_call = ")
    expect(llm_rows.nth(1).locator(".wf-name .reward-pin")).to_have_count(0)
    expect(attempt.locator(".pinned")).to_contain_text("reward = ")
    tool = attempt.locator(".wf-row[data-kind=tool]")
    expect(tool).to_contain_text("tool.count_letters")
    tool.locator("summary").click()
    expect(tool.locator("table.attrs")).to_contain_text("lightningrl.trace.arguments")
    shot(page, "rollout-waterfall")


def test_training_chart_has_a_point_per_step(page: Page, server: LiveServer) -> None:
    page.goto(f"{server.url}/ui/training")
    expect(page.locator("#charts")).to_have_attribute("data-ready", "1")
    expect(page.locator("#metrics-source")).to_contain_text("metrics.csv")
    expect(page.locator("#chart-reward canvas")).to_have_count(1)
    points = page.evaluate(
        """() => { const c = LightningUI.charts.reward;
                   const i = c.series.findIndex(s => s.label === "train/reward_mean");
                   return c.data[i].filter(v => v != null).length; }"""
    )
    assert points == STEPS
    assert page.evaluate("LightningUI.charts.reward.data[0]") == list(range(STEPS + 1))  # step 0: validation
    expect(page.locator("#chart-slices")).to_contain_text("Held-out success per slice")
    expect(page.locator("#chart-actor-grad_norm")).to_have_attribute("data-points", str(STEPS))
    # Token accounting: the mismatch and drift of every update step.
    expect(page.locator("#chart-tokens-mismatch")).to_contain_text("Train-inference mismatch")
    expect(page.locator("#chart-tokens-mismatch")).to_have_attribute("data-points", str(STEPS))
    expect(page.locator("#chart-tokens-drift")).to_have_attribute("data-points", str(STEPS))
    # The learning-health panel: the run's lines after its last step (or that it found none).
    expect(page.locator("#health")).to_be_visible()
    expect(page.locator("#health-step")).to_have_text(f"after step {STEPS}")
    shown = page.locator("#health-lines li").count() + page.locator("#health-none:visible").count()
    assert shown >= 1
    shot(page, "training")


def test_resources_show_the_chain_and_pointers(page: Page, server: LiveServer, demo: DemoStore) -> None:
    versions = read(demo.db, lambda s: s.list_resource_versions("llm"))
    history = read(demo.db, lambda s: s.query_pointer_history("llm"))
    page.goto(f"{server.url}/ui/resources")
    section = page.locator("section[data-resource=llm]")
    rows = section.locator("table.versions tbody tr")
    expect(rows).to_have_count(len(versions))
    assert len(versions) == STEPS + 1  # the base, then one candidate per step
    for i, version in enumerate(versions):
        expect(rows.nth(i)).to_have_attribute("data-version", version.version_id)
        expect(rows.nth(i)).to_have_attribute("data-parent", version.parent_id or "")
    expect(section.locator(".pointer-latest")).to_have_text(versions[-1].version_id)
    expect(section.locator(".pointer-approved")).to_have_text(
        versions[0].version_id
    )  # training never approves
    expect(rows.nth(0).locator(".badge.approved")).to_have_count(1)
    expect(rows.nth(STEPS).locator(".badge.latest")).to_have_count(1)
    expect(section.locator("table.history tbody tr")).to_have_count(len(history))
    shot(page, "resources")


def test_release_shows_hold_and_its_reasons(page: Page, server: LiveServer, demo: DemoStore) -> None:
    page.goto(f"{server.url}/ui/release")
    receipt = page.locator(f"section[data-receipt='{demo.receipt_id}']")
    expect(receipt.locator(".verdict")).to_have_text("HOLD")
    checks = receipt.locator("table.checks tbody tr")
    expect(checks).to_have_count(7)
    names = [checks.nth(i).get_attribute("data-check") for i in range(7)]
    assert names == [
        "pinned_identity",
        "span_coverage",
        "retry_debt",
        "holdout_gain",
        "protected_cases",
        "canary",
        "rollback_and_approval",
    ]
    canary = receipt.locator("tr[data-check=canary]")
    expect(canary).to_have_attribute("data-status", "unavailable")
    assert canary.locator(".reason").inner_text().strip()  # a HOLD always says why
    approval = receipt.locator("tr[data-check=rollback_and_approval]")
    expect(approval).not_to_have_attribute("data-status", "pass")
    shot(page, "release")


def test_dashboard_command_opens_the_remote_store(
    browser: Browser, server: LiveServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    opened: list[str] = []
    monkeypatch.setattr("webbrowser.open", opened.append)  # stands in for the desktop's browser
    monkeypatch.setenv("LIGHTNINGRL_VIEWER_TOKEN", TOKENS["viewer"])
    assert main(["dashboard", "--store", server.url, "--page", "release"]) == 0
    assert capsys.readouterr().out.strip() == f"dashboard: {server.url}/ui/release"
    context = browser.new_context()
    tab = context.new_page()
    tab.goto(opened[0])
    assert "token" not in opened[0]  # the sign-in page, not the token in a URL
    sign_in(tab, TOKENS["viewer"])
    expect(tab).to_have_url(f"{server.url}/ui/release")
    expect(tab.locator("#role")).to_have_text("viewer")
    context.close()

    assert main(["dashboard", "--store", server.url, "--token", "wrong", "--no-browser"]) == 2
    assert "refused the token" in capsys.readouterr().err
    assert main(["dashboard", "--store", server.url, "--token", TOKENS["runner"], "--no-browser"]) == 2
    assert "may not view the dashboard" in capsys.readouterr().err
    assert len(opened) == 1


def test_training_metrics_from_the_store_alone(demo: DemoStore) -> None:
    """A remote store's server has no metrics.csv: the rewards and update statistics come from the store
    and agree with what the run wrote."""
    tokens = demo.db.parent / "tokens.json"
    log = demo.db.parent / "server-no-csv.log"
    live = LiveServer(demo.db, log, extra_args=("--tokens-file", str(tokens)), env=child_env()).start()
    try:
        body = httpx.get(
            f"{live.url}/ui/api/metrics", headers={"authorization": f"Bearer {TOKENS['viewer']}"}
        ).json()
    finally:
        live.stop()
    with demo.metrics_csv.open(newline="") as fh:
        csv_rows = {int(r["step"]): r for r in csv.DictReader(fh)}
    assert body["source"].startswith("the metrics stored with each published version")
    charts = {c["key"]: c for c in body["charts"]}
    reward = charts["reward"]
    assert reward["steps"] == list(range(STEPS + 1))
    train = reward["series"]["train/reward_mean"]
    assert train[0] is None and all(v is not None for v in train[1:])
    for step in range(1, STEPS + 1):
        assert train[step] == pytest.approx(float(csv_rows[step]["train/reward_mean"]))
        assert charts["actor-grad_norm"]["series"]["actor/grad_norm"][step - 1] == pytest.approx(
            float(csv_rows[step]["actor/grad_norm"])
        )
    assert body["health"]["step"] == STEPS - 1  # the newest version's record: the steps before it
    assert all(isinstance(line, str) for line in body["health"]["lines"])
    val = reward["series"]["val/reward_mean"]
    assert val[0] == pytest.approx(float(csv_rows[0]["val/reward_mean"]))
    assert val[STEPS] == pytest.approx(float(csv_rows[STEPS]["val/reward_mean"]))
