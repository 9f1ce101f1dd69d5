"""Run the store server with uvicorn: `serve(...)`, its command-line options, and `main`."""

from __future__ import annotations

import argparse
import gc
import json
import logging
import math
import os
import socket
import sys
from typing import Any

from lightningstore.auth.environment_secrets import remove_credentials
from lightningstore.auth.tokens import TokenConfig
from lightningstore.server.app import DEFAULT_MAX_BODY_BYTES, build_app
from lightningstore.server.attempt_quota import DEFAULT_ATTEMPT_QUOTA, AttemptQuota, QuotaLedger
from lightningstore.server.origin_guard import is_loopback


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now on `host` (the OS picks it; the one definition)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def load_tokens(tokens_file: str | None, environ: dict[str, str] | None = None) -> TokenConfig:
    """Tokens from the environment (LIGHTNINGRL_*_TOKEN, LIGHTNINGRL_AGENT_SECRET) plus `tokens_file`."""
    tokens = TokenConfig.from_env(environ)
    if tokens_file:
        tokens = tokens.merged(TokenConfig.from_file(tokens_file))
    return tokens


def serve(
    db: str,
    *,
    host: str = "127.0.0.1",
    port: int = 4747,
    tokens: TokenConfig | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    sweep_interval: float | None = 1.0,
    log_level: str = "warning",
    rate_limit: float | None = None,
    rate_burst: int | None = None,
    metrics_csv: str | None = None,
    workers: int = 1,
    attempt_quota: AttemptQuota | None = DEFAULT_ATTEMPT_QUOTA,
) -> None:
    """Serve a SqlStore on `db` until interrupted; refuses a non-loopback host without tokens.

    `rate_limit` requests/second per caller (None: unlimited), bursts of `rate_burst` (see build_app);
    `attempt_quota`: what each attempt's agent key may send (None: no bound; counted per process);
    `metrics_csv`: the run whose metrics the dashboard's training page charts; `workers` > 1 serves
    from that many processes on one socket (PostgreSQL only; see `app_from_spec`).
    """
    import uvicorn

    from lightningstore.server.http_protocol import CoalescingHttpToolsProtocol

    tokens = tokens or TokenConfig()
    if not tokens.enabled and not is_loopback(host):
        raise SystemExit(
            f"refusing to serve on non-loopback host {host!r} without tokens: set LIGHTNINGRL_ADMIN_TOKEN "
            "(and the other role tokens) or pass --tokens-file"
        )
    if workers < 1:
        raise SystemExit(f"workers must be >= 1, got {workers}")
    if workers > 1 and not db.startswith(("postgresql:", "postgresql+", "postgres:")):
        raise SystemExit(
            f"workers={workers} needs a PostgreSQL database (a SQLite file has one writer), got {db!r}"
        )
    spec = {
        "db": db,
        "tokens": _tokens_spec(tokens),
        "max_body_bytes": max_body_bytes,
        "sweep_interval": sweep_interval,
        "rate_limit": rate_limit,
        "rate_burst": rate_burst,
        "metrics_csv": metrics_csv,
        "workers": workers,
        "attempt_quota": attempt_quota.as_dict() if attempt_quota is not None else None,
    }
    if workers > 1:
        os.environ[SPEC_ENV] = json.dumps(spec)
        target: Any = "lightningstore.server.run:app_from_spec"
    else:
        target = _with_quota(_app(spec), spec)
    config = uvicorn.Config(
        target,
        factory=workers > 1,
        workers=workers,
        host=host,
        port=port,
        loop="uvloop",
        http=CoalescingHttpToolsProtocol,
        lifespan="on",
        access_log=False,
        log_level=log_level,
        timeout_keep_alive=30,
        backlog=4096,
    )
    if workers == 1:
        uvicorn.Server(config).run()
        return
    from uvicorn.supervisors import Multiprocess

    # uvicorn's own supervisor: one listening socket, `workers` processes, each restarted if it dies.
    Multiprocess(config, sockets=[config.bind_socket()]).run()


SPEC_ENV = "LIGHTNINGRL_STORE_SERVER_SPEC"
"""How `serve(workers>1)` hands each worker process its settings (JSON; tokens as SHA-256 digests)."""


def _tokens_spec(tokens: TokenConfig) -> dict[str, Any]:
    """The tokens as JSON: roles and names by hex digest (a named approver stays named), the secret."""
    roles = {digest.hex(): role.value for digest, role in tokens.roles_by_digest.items()}
    names = {digest.hex(): name for digest, name in tokens.names_by_digest.items()}
    return {"roles_by_digest": roles, "names_by_digest": names, "agent_secret": tokens.agent_secret}


def _tokens_from_spec(spec: dict[str, Any]) -> TokenConfig:
    """The TokenConfig `_tokens_spec` wrote, names included."""
    from lightningstore.auth.tokens import Role

    return TokenConfig(
        roles_by_digest={bytes.fromhex(h): Role(r) for h, r in spec["roles_by_digest"].items()},
        agent_secret=spec["agent_secret"],
        names_by_digest={bytes.fromhex(h): n for h, n in spec.get("names_by_digest", {}).items()},
    )


def _app(spec: dict[str, Any]) -> Any:
    from lightningstore.sql import SqlStore

    app = build_app(
        SqlStore(spec["db"]),
        tokens=_tokens_from_spec(spec["tokens"]),
        max_body_bytes=spec["max_body_bytes"],
        sweep_interval=spec["sweep_interval"],
        close_store=True,
        rate_limit=spec["rate_limit"],
        rate_burst=spec["rate_burst"],
        ui_metrics_csv=spec["metrics_csv"],
    )
    app.state.server_processes = spec["workers"]
    # Everything built so far (modules, the app, the store) lives as long as the process: keep it out
    # of the cyclic collector's full passes, which otherwise walk it all and stall every request
    # while they run (bench/store_open_loop.py shows the stalls).
    gc.collect()
    gc.freeze()
    return app


def _with_quota(app: Any, spec: dict[str, Any]) -> Any:
    """`app` bounding agent keys by the spec's attempt quota (`_app` builds it with the default one)."""
    quota = spec.get("attempt_quota", DEFAULT_ATTEMPT_QUOTA.as_dict())
    app.state.quota_ledger = QuotaLedger(AttemptQuota(**quota)) if quota is not None else None
    return app


def app_from_spec() -> Any:
    """The app of one worker process of a multi-process server (uvicorn calls this factory in each)."""
    spec = json.loads(os.environ[SPEC_ENV])
    remove_credentials(extra=[SPEC_ENV])  # the spec holds the agent secret
    return _with_quota(_app(spec), spec)


QUOTA_FLAGS: dict[str, tuple[str, str, str]] = {
    "--attempt-max-spans": ("max_spans", "N", "spans stored per attempt"),
    "--attempt-max-bytes": ("max_bytes", "BYTES", "request body bytes per attempt"),
    "--attempt-max-requests": ("max_requests", "N", "write requests per attempt, model calls included"),
    "--request-max-spans": ("max_spans_per_request", "N", "spans in one request"),
}
"""`lightningrl store serve`'s flags of the AttemptQuota fields."""


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        default=os.environ.get("LIGHTNINGRL_DB", "lightningrl.db"),
        help="database URL or SQLite file path (default: $LIGHTNINGRL_DB or lightningrl.db)",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=4747)
    parser.add_argument(
        "--tokens-file",
        help="JSON {role: token | [tokens] | {name: token}, agent_secret: str} (a named token records as role:name); "
        "adds to LIGHTNINGRL_{ADMIN,ALGORITHM,RUNNER,APPROVER,VIEWER}_TOKEN / LIGHTNINGRL_AGENT_SECRET",
    )
    parser.add_argument("--max-body-bytes", type=int, default=DEFAULT_MAX_BODY_BYTES)
    parser.add_argument(
        "--sweep-interval", type=float, default=1.0, help="seconds between watchdog sweeps (0 disables)"
    )
    parser.add_argument(
        "--rate-limit",
        type=_non_negative_float,
        default=0.0,
        metavar="RPS",
        help="requests/second allowed per caller (token, agent key or client address); 0: unlimited (default)",
    )
    parser.add_argument(
        "--rate-burst",
        type=_positive_int,
        metavar="N",
        help="most requests a caller may send at once (bucket size; default: one second's worth)",
    )
    parser.add_argument(
        "--metrics-csv",
        default=os.environ.get("LIGHTNINGRL_METRICS_CSV"),
        metavar="PATH",
        help="a training run's metrics.csv for the dashboard's training page (/ui/training); "
        "default: $LIGHTNINGRL_METRICS_CSV, else the metrics stored with each published version",
    )
    parser.add_argument(
        "--workers",
        type=_positive_int,
        default=1,
        metavar="N",
        help="serve from N processes on one socket (PostgreSQL only). Each has its own model gateway: "
        "/proxy/admin pause and drain need one process, so they answer 409 when N > 1",
    )
    quota = parser.add_argument_group(
        "attempt quota", "what one attempt's agent key may send (counted per server process)"
    )
    for flag, (name, metavar, what) in QUOTA_FLAGS.items():
        default = getattr(DEFAULT_ATTEMPT_QUOTA, name)
        help = f"{what} (default {default})"
        quota.add_argument(
            flag, type=_positive_int, default=default, dest=f"quota_{name}", metavar=metavar, help=help
        )
    quota.add_argument(
        "--no-attempt-quota", action="store_true", help="no bound on agent keys (role tokens have none)"
    )
    parser.add_argument("--log-level", default="warning")


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return value


def serve_from_args(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        tokens = load_tokens(args.tokens_file)
    except (OSError, ValueError) as exc:
        print(f"error: cannot load tokens: {exc}", file=sys.stderr)
        return 2
    # Read once: a process of the same user (an agent on this machine) must not find them here.
    remove_credentials()
    if args.rate_burst is not None and not args.rate_limit:
        print("error: --rate-burst needs --rate-limit", file=sys.stderr)
        return 2
    serve(
        args.db,
        host=args.host,
        port=args.port,
        tokens=tokens,
        max_body_bytes=args.max_body_bytes,
        sweep_interval=args.sweep_interval or None,
        log_level=args.log_level,
        rate_limit=args.rate_limit or None,
        rate_burst=args.rate_burst,
        metrics_csv=args.metrics_csv,
        workers=args.workers,
        attempt_quota=None if args.no_attempt_quota else _quota_from_args(args),
    )
    return 0


def _quota_from_args(args: argparse.Namespace) -> AttemptQuota:
    return AttemptQuota(**{name: getattr(args, f"quota_{name}") for name, _, _ in QUOTA_FLAGS.values()})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lightningstore.server", description="Serve a LightningStore."
    )
    add_serve_arguments(parser)
    return serve_from_args(parser.parse_args(argv))
