"""`lightningrl store serve --db URL --host 127.0.0.1 --port P`: the LightningStore HTTP server."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from lightningstore.server.run import add_serve_arguments

    parser = sub.add_parser("store", help="the LightningStore server")
    actions = parser.add_subparsers(dest="store_command", required=True)
    serve = actions.add_parser("serve", help="serve a store over HTTP (JSON REST + OTLP /v1/traces)")
    add_serve_arguments(serve)
    serve.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    from lightningstore.server.run import serve_from_args

    return serve_from_args(args)
