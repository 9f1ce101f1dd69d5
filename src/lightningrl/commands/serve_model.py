"""`lightningrl serve-model --checkpoint DIR | --resource NAME --store DB`."""

from __future__ import annotations

import argparse
import asyncio
import os


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "serve-model", help="serve a checkpoint over the OpenAI API (tiny models, CPU or CUDA)"
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", help="a Hugging Face model directory")
    source.add_argument(
        "--resource", help="serve the checkpoint of this LLM resource's version (see --pointer)"
    )
    parser.add_argument("--store", default="lightningrl.db", help="store DB or server URL, with --resource")
    parser.add_argument("--pointer", choices=["latest", "approved"], default="approved")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when present)")
    parser.add_argument("--max-batch-size", type=int, default=16)
    parser.add_argument(
        "--cpu-threads",
        type=int,
        default=None,
        help="torch threads for generation on a CPU (default: torch's)",
    )
    parser.add_argument("--served-model-name", default=None)
    parser.add_argument(
        "--api-key-env",
        default=None,
        metavar="NAME",
        help="ours: the environment variable holding an API key the /v1 routes then require "
        "(Authorization: Bearer), read once and removed from the environment",
    )
    parser.add_argument(
        "--no-prefix-cache",
        dest="prefix_cache",
        action="store_false",
        help="ours: prefill every prompt whole (default: a prefix the prompts share is prefilled once)",
    )
    parser.add_argument(
        "--no-packed-weights",
        dest="packed_weights",
        action="store_false",
        help="ours: plain torch matmuls on the CPU (default: float32 linear layers packed for oneDNN, "
        "a decode step ~1.5x as fast; log-probs differ in the last bits)",
    )
    parser.add_argument(
        "--engine",
        choices=["auto", "ours", "vllm"],
        default="ours",
        help="ours: this package's batched transformers server; vllm: vLLM's own OpenAI server "
        "(from --vllm-python); auto: vllm when it is installed and a GPU is present",
    )
    parser.add_argument(
        "--vllm-python",
        default=None,
        help="python of the environment with vLLM (default: $LIGHTNINGRL_VLLM_PYTHON, else .venv-vllm)",
    )
    parser.add_argument("--max-model-len", type=int, default=None, help="vllm: context length")
    parser.add_argument("--enforce-eager", action="store_true", help="vllm: no graph compile (faster start)")
    parser.add_argument(
        "--lora-rank", type=int, default=0, help="vllm: serve runtime LoRA adapters up to this rank"
    )
    parser.add_argument(
        "--vllm-arg", action="append", default=[], help="vllm: one more argument for vLLM (repeatable)"
    )
    parser.set_defaults(func=_serve)


def _checkpoint_of(args: argparse.Namespace) -> str:
    if args.checkpoint:
        return args.checkpoint
    from lightningstore import open_store

    async def lookup() -> str:
        store = open_store(args.store)
        try:
            version = await store.get_pointer(args.resource, args.pointer)
        finally:
            await store.close()
        if version is None or not getattr(version.resource, "checkpoint", None):
            raise SystemExit(f"resource {args.resource!r} has no {args.pointer} version with a checkpoint")
        return version.resource.checkpoint

    return asyncio.run(lookup())


def _serve(args: argparse.Namespace) -> int:
    from lightningrl.serving.vllm import resolve_engine

    if resolve_engine(args.engine, args.vllm_python) == "vllm":
        return _serve_vllm(args)
    from lightningrl.serving import run_server
    from lightningrl.serving.reload_token import RELOAD_TOKEN_ENV
    from lightningstore.auth.environment_secrets import remove_credentials

    checkpoint = _checkpoint_of(args)
    reload_token = os.environ.get(RELOAD_TOKEN_ENV) or None
    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            raise SystemExit(f"--api-key-env {args.api_key_env}: the variable is not set")
    # Read once: a process of the same user must not find them here.
    remove_credentials(extra=[args.api_key_env] if args.api_key_env else [])
    run_server(
        checkpoint,
        reload_token=reload_token,
        api_key=api_key,
        host=args.host,
        port=args.port,
        device=args.device,
        max_batch_size=args.max_batch_size,
        served_model_name=args.served_model_name,
        cpu_threads=args.cpu_threads,
        prefix_cache=args.prefix_cache,
        packed_weights=args.packed_weights,
    )
    return 0


def _serve_vllm(args: argparse.Namespace) -> int:
    """Become vLLM's OpenAI server (exec: signals and the exit code are vLLM's own)."""
    from lightningrl.serving.vllm import exec_vllm, vllm_command, vllm_env, vllm_python

    command = vllm_command(
        _checkpoint_of(args),
        port=args.port,
        host=args.host,
        python=vllm_python(args.vllm_python),
        served_model_name=args.served_model_name,
        max_model_len=args.max_model_len,
        enforce_eager=args.enforce_eager,
        lora_rank=args.lora_rank,
        extra_args=args.vllm_arg,
    )
    exec_vllm(command, vllm_env())
    return 0  # not reached
