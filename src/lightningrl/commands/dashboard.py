"""`lightningrl dashboard --store URL [--token T]`: open a store server's dashboard (/ui) in a browser.

The token (default $LIGHTNINGRL_VIEWER_TOKEN) is checked first; the browser opens the dashboard's
sign-in page, where the person pastes it (a token never travels in a URL: it would sit in the
browser's history). A store given as a database path is served here, on 127.0.0.1, in dev mode (no
sign-in), until Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import webbrowser
from urllib.parse import quote

VIEWER_TOKEN_ENV = "LIGHTNINGRL_VIEWER_TOKEN"


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("dashboard", help="open the store's dashboard in a browser")
    parser.add_argument(
        "--store",
        required=True,
        help="a store server's URL (http(s)://...), or a database to serve here on 127.0.0.1",
    )
    parser.add_argument("--token", help=f"a token that may read (default: ${VIEWER_TOKEN_ENV})")
    parser.add_argument(
        "--page", default="rollouts", choices=["rollouts", "training", "resources", "release"]
    )
    parser.add_argument("--port", type=int, default=4748, help="port when serving a database here")
    parser.add_argument("--metrics-csv", help="when serving a database here: the run's metrics.csv")
    parser.add_argument("--no-browser", action="store_true", help="print the URL, open nothing")
    parser.set_defaults(func=_run)


def check_access(url: str, token: str | None) -> str | None:
    """None when `url`'s dashboard admits `token`, else why not (naming the store and the answer)."""
    import httpx

    headers = {"authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx.get(f"{url}/ui/rollouts", headers=headers, timeout=10.0, follow_redirects=False)
    except httpx.HTTPError as exc:
        return f"no store server answers at {url} ({exc})"
    if response.status_code == 200:
        return None
    if response.status_code == 401:
        return f"{url} refused the token (give --token or set ${VIEWER_TOKEN_ENV})"
    if response.status_code == 403:
        return f"{url}: that token's role may not view the dashboard (use a viewer token)"
    if response.status_code == 404:
        return f"{url} serves no dashboard at /ui (an older store server?)"
    return f"{url}/ui answered {response.status_code}"


def dashboard_url(url: str, page: str, token: str | None) -> str:
    """The page itself in dev mode (no token), else the sign-in page that leads to it."""
    return f"{url}/ui/login?next={quote(f'/ui/{page}', safe='')}" if token else f"{url}/ui/{page}"


def _run(args: argparse.Namespace) -> int:
    token = args.token or os.environ.get(VIEWER_TOKEN_ENV) or None
    if args.store.startswith(("http://", "https://")):
        return _open(args.store.rstrip("/"), args.page, token, browser=not args.no_browser)
    return _serve_and_open(args)


def _open(url: str, page: str, token: str | None, *, browser: bool) -> int:
    problem = check_access(url, token)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    print(f"dashboard: {url}/ui/{page}")
    if browser:
        webbrowser.open(dashboard_url(url, page, token))
    return 0


def _serve_and_open(args: argparse.Namespace) -> int:
    """Serve the database here (dev mode: no tokens, loopback only) and open its dashboard."""
    import time

    import httpx

    from lightningstore.server.run import serve

    url = f"http://127.0.0.1:{args.port}"
    thread = threading.Thread(
        target=serve,
        args=(args.store,),
        kwargs={"port": args.port, "metrics_csv": args.metrics_csv},
        daemon=True,
    )
    thread.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and thread.is_alive():
        try:
            if httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.1)
    code = _open(url, args.page, None, browser=not args.no_browser)
    if code:
        return code
    print("serving the dashboard here; Ctrl-C stops it")
    try:
        thread.join()
    except KeyboardInterrupt:
        pass
    return 0
