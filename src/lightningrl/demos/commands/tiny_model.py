"""`lightningrl build-tiny-model OUT_DIR`: a seeded tiny Qwen2-style model + tokenizer."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    build = sub.add_parser("build-tiny-model", help="build a seeded tiny Qwen2-style model + tokenizer")
    build.add_argument("out_dir")
    build.add_argument("--seed", type=int, default=0)
    build.add_argument("--tokenizer", choices=["bpe", "word"], default="bpe")
    build.add_argument("--hidden-size", type=int, default=128)
    build.add_argument("--layers", type=int, default=2)
    build.add_argument(
        "--untied", action="store_true", help="an output head of its own (needed to train behind vLLM)"
    )
    build.set_defaults(func=_build)


def _build(args: argparse.Namespace) -> int:
    from lightningrl.demos.tinylm import build_tiny_model

    path = build_tiny_model(
        args.out_dir,
        seed=args.seed,
        tokenizer_kind=args.tokenizer,
        hidden_size=args.hidden_size,
        num_layers=args.layers,
        tie_word_embeddings=not args.untied,
    )
    print(path)
    return 0
