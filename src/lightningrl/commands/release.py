"""`lightningrl release receipt | check | approve | promote | rollback | status` (and the gate's setup:
`canary`, `evaluator`, `protect`, `policy`). Readable output by default, `--json` for machines.

`--store` is a SQLite path / database URL (direct, trusted access) or a server URL (then `--token` or
$LIGHTNINGRL_TOKEN decides what the caller may do). `check` exits 3 on HOLD; `promote` exits 3 when refused.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

HOLD_EXIT = 3


def register(sub: argparse._SubParsersAction) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--store",
        default=os.environ.get("LIGHTNINGRL_DB", "lightningrl.db"),
        help="SQLite path, database URL or store server URL (default: $LIGHTNINGRL_DB)",
    )
    common.add_argument(
        "--token", default=os.environ.get("LIGHTNINGRL_TOKEN"), help="bearer token for a server"
    )
    common.add_argument(
        "--actor",
        help="who is acting (recorded; default: a server's name for --token, else $USER). A server records "
        "a named token's own name and refuses another",
    )
    common.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser = sub.add_parser("release", help="release gate: receipts, checks, approval, promotion, rollback")
    actions = parser.add_subparsers(dest="release_command", required=True)

    def action(name: str, help_text: str, func: Callable[..., Awaitable[int]]) -> argparse.ArgumentParser:
        p = actions.add_parser(name, help=help_text, parents=[common])
        p.set_defaults(func=lambda args: _run(func, args))
        return p

    p = action("receipt", "file the immutable update receipt of a candidate version", _receipt)
    p.add_argument("candidate", help="candidate version id, or 'latest' (of --resource)")
    p.add_argument("--resource", default="llm")
    p.add_argument("--evaluator", help="registered evaluator name (default: the policy's)")
    p.add_argument("--scope", default="default")
    p.add_argument("--retry-budget", type=int)
    p.add_argument("--span-coverage", help="comma-separated span kinds (default: the policy's)")
    p = action("check", "run the seven checks (exit 3 on HOLD)", _check)
    p.add_argument("receipt", help="receipt id or candidate version id (its newest receipt)")
    p.add_argument("--no-record", action="store_true", help="do not store the report")
    p = action("approve", "record an authorized approval of a receipt on the current evidence", _approve)
    p.add_argument("receipt")
    p.add_argument("--note", default="")
    p = action(
        "promote", "move `approved` to the candidate if the verdict is PROMOTE (exit 3 if not)", _promote
    )
    p.add_argument("receipt")
    p = action("rollback", "move `approved` back to the exact parent and prove routing follows", _rollback)
    p.add_argument("receipt")
    p.add_argument("--drill", action="store_true", help="test the rollback without moving `approved`")
    p = action("status", "pointers, approved history, receipts and their current verdicts", _status)
    p.add_argument("--resource", default="llm")
    p.add_argument("--receipt", help="show one receipt in full")
    p = action("canary", "run the candidate on a bounded canary task set and verify every outcome", _canary)
    p.add_argument("receipt")
    p.add_argument("--agent", required=True, help="module:function of the agent")
    p.add_argument("--verifier", required=True, help="module:function (task, rollout, store) -> Verification")
    p.add_argument("--tasks", required=True, help='JSON file: [{"task_id": ..., "input": ...}, ...]')
    p.add_argument("--max-tasks", type=int)
    p.add_argument("--max-seconds", type=float)
    p.add_argument("--max-tool-calls", type=int)
    p.add_argument("--max-cost", type=float)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--proxy-url")
    p = action("evaluator", "register an evaluator version (admin)", _evaluator)
    p.add_argument("name")
    p.add_argument("version")
    p.add_argument("--reward-name", default="reward")
    p.add_argument("--description", default="")
    p = action("protect", "add or replace a protected case (admin)", _protect)
    p.add_argument("resource")
    p.add_argument("case_id")
    p.add_argument("task_id")
    p.add_argument("--min-reward", type=float)
    p = action("policy", "show or change a resource's release policy (admin)", _policy)
    p.add_argument("resource")
    p.add_argument("--evaluator")
    p.add_argument("--retry-budget", type=int)
    p.add_argument("--span-coverage")
    p.add_argument("--min-holdout-gain", type=float)


# ---- plumbing ----------------------------------------------------------------------------------------


def _open(args: argparse.Namespace) -> Any:
    from lightningstore import open_store

    if "://" not in args.store and not Path(args.store).exists():
        raise SystemExit(
            f"error: no store at {args.store!r} (give --store PATH, a database URL or a server URL)"
        )
    # The token is --token or $LIGHTNINGRL_TOKEN (the option's default), never a role's variable.
    return open_store(args.store, args.token, role=None, max_retries=3)


def _by(args: argparse.Namespace) -> str:
    return f"local:{args.actor}"


async def _default_actor(gate: Any) -> str:
    """A server's name for the token (what it records, so an approval is the token's own), else $USER."""
    from lightningstore.gate.http_records import HttpGateRecords

    name = (await gate.whoami()).name if isinstance(gate, HttpGateRecords) else None
    return name or os.environ.get("USER") or "unnamed"


def _run(func: Callable[..., Awaitable[int]], args: argparse.Namespace) -> int:
    from lightningstore import StoreError

    async def main() -> int:
        from lightningstore.gate import gate_records

        store = _open(args)
        try:
            gate = gate_records(store)
            args.actor = args.actor or await _default_actor(gate)
            return await func(store, gate, args)
        finally:
            await store.close()

    try:
        return asyncio.run(main())
    except StoreError as error:
        _emit(
            args, {"error": type(error).__name__, "message": str(error)}, f"error: {error}", stream=sys.stderr
        )
        return HOLD_EXIT if type(error).__name__ == "GateRefusal" else 1


def _emit(args: argparse.Namespace, data: Any, text: str, *, stream: Any = None) -> None:
    if args.json:
        payload = data.model_dump(mode="json") if isinstance(data, BaseModel) else data
        print(json.dumps(payload, indent=2, default=str), file=stream or sys.stdout)
    else:
        print(text, file=stream or sys.stdout)


async def _receipt_id(gate: Any, ident: str) -> str:
    """A receipt id, or the newest receipt of a candidate version id."""
    if await gate.get_receipt(ident) is not None:
        return ident
    receipts = await gate.list_receipts(candidate_version_id=ident)
    if not receipts:
        from lightningstore import NotFoundError

        raise NotFoundError("receipt (or candidate with a receipt)", ident)
    return receipts[-1].receipt_id


def _load(spec: str) -> Any:
    module, _, name = spec.partition(":")
    if not module or not name:
        raise SystemExit(f"error: expected module:function, got {spec!r}")
    return getattr(importlib.import_module(module), name)


# ---- actions -----------------------------------------------------------------------------------------


async def _receipt(store: Any, gate: Any, args: argparse.Namespace) -> int:
    from lightningrl.release import build_receipt
    from lightningrl.release.render import receipt_text

    candidate = args.candidate
    if candidate == "latest":
        latest = await store.get_latest_version(args.resource)
        if latest is None:
            raise SystemExit(f"error: resource {args.resource!r} has no versions")
        candidate = latest.version_id
    coverage = [k.strip() for k in args.span_coverage.split(",") if k.strip()] if args.span_coverage else None
    receipt = await build_receipt(
        store,
        gate,
        candidate,
        evaluator=args.evaluator,
        scope=args.scope,
        retry_budget=args.retry_budget,
        span_coverage=coverage,
        created_by=_by(args),
    )
    _emit(args, receipt, receipt_text(receipt))
    return 0


async def _check(store: Any, gate: Any, args: argparse.Namespace) -> int:
    from lightningrl.release import check_receipt
    from lightningrl.release.render import report_text
    from lightningstore.gate import Verdict

    rid = await _receipt_id(gate, args.receipt)
    report = await check_receipt(store, gate, rid, recorded_by=_by(args), record=not args.no_record)
    _emit(args, report, report_text(report))
    return 0 if report.verdict == Verdict.PROMOTE else HOLD_EXIT


async def _approve(store: Any, gate: Any, args: argparse.Namespace) -> int:
    from lightningrl.release import approve
    from lightningrl.release.render import evidence_text

    rid = await _receipt_id(gate, args.receipt)
    record = await approve(store, gate, rid, actor=args.actor, note=args.note, recorded_by=_by(args))
    _emit(args, record, evidence_text(record))
    return 0


async def _promote(store: Any, gate: Any, args: argparse.Namespace) -> int:
    from lightningrl.release import promote
    from lightningrl.release.render import report_text

    rid = await _receipt_id(gate, args.receipt)
    done = await promote(store, gate, rid, actor=args.actor, recorded_by=_by(args))
    text = (
        f"{report_text(done.report)}\napproved: {done.move.previous_version_id} -> {done.move.version_id}"
        f"\nproduction routes: {done.routes}"
    )
    data = {
        "report": done.report.model_dump(mode="json"),
        "move": done.move.model_dump(mode="json"),
        "routes": done.routes,
    }
    _emit(args, data, text)
    return 0


async def _rollback(store: Any, gate: Any, args: argparse.Namespace) -> int:
    from lightningrl.release import drill_rollback, rollback
    from lightningrl.release.render import evidence_text

    rid = await _receipt_id(gate, args.receipt)
    if args.drill:
        record = await drill_rollback(store, gate, rid, recorded_by=_by(args))
    else:
        record = await rollback(store, gate, rid, actor=args.actor, recorded_by=_by(args))
    _emit(args, record, evidence_text(record))
    return 0 if record.body.resolved else HOLD_EXIT


async def _status(store: Any, gate: Any, args: argparse.Namespace) -> int:
    from lightningrl.release import current_report
    from lightningrl.release.render import evidence_text, pointers_text, receipt_text, report_text

    if args.receipt:
        rid = await _receipt_id(gate, args.receipt)
        receipt = await gate.get_receipt(rid)
        report = await current_report(store, gate, rid)
        evidence = await gate.list_evidence(rid)
        data = {
            "receipt": receipt.model_dump(mode="json"),
            "report": report.model_dump(mode="json") if report else None,
            "evidence": [e.model_dump(mode="json") for e in evidence],
        }
        parts = [receipt_text(receipt), report_text(report) if report else "no report yet"]
        _emit(args, data, "\n".join(parts + [evidence_text(e) for e in evidence]))
        return 0
    name = args.resource
    latest, approved = await store.get_latest_version(name), await store.get_approved_version(name)
    history = await store.query_pointer_history(name)
    rows = []
    for receipt in await gate.list_receipts(resource_name=name):
        report = await current_report(store, gate, receipt.receipt_id)
        rows.append(
            {
                "receipt_id": receipt.receipt_id,
                "candidate": receipt.candidate_version_id,
                "verdict": report.verdict.value if report else None,
                "failing": [c.name.value for c in report.failing] if report else [],
            }
        )
    lines = [pointers_text(name, latest, approved, history), "receipts:"]
    lines += [
        f"  {r['receipt_id']}  {r['candidate']}  {r['verdict'] or 'not checked'}"
        + (f" on {', '.join(r['failing'])}" if r["failing"] else "")
        for r in rows
    ]
    data = {
        "resource": name,
        "latest": latest.version_id if latest else None,
        "approved": approved.version_id if approved else None,
        "history": [m.model_dump(mode="json") for m in history],
        "receipts": rows,
    }
    _emit(args, data, "\n".join(lines))
    return 0


async def _canary(store: Any, gate: Any, args: argparse.Namespace) -> int:
    from lightningrl.release import CanaryTask, run_canary
    from lightningrl.release.inputs import load_inputs
    from lightningrl.release.render import evidence_text

    rid = await _receipt_id(gate, args.receipt)
    tasks = [CanaryTask(str(t["task_id"]), t.get("input")) for t in json.loads(Path(args.tasks).read_text())]
    receipt = await gate.get_receipt(rid)
    limits = (await load_inputs(store, gate, receipt)).policy.canary
    changes = {
        "max_tasks": args.max_tasks,
        "max_seconds": args.max_seconds,
        "max_tool_calls": args.max_tool_calls,
        "max_cost": args.max_cost,
    }
    limits = limits.model_copy(update={k: v for k, v in changes.items() if v is not None})
    record = await run_canary(
        store,
        gate,
        rid,
        _load(args.agent),
        tasks,
        _load(args.verifier),
        limits=limits,
        workers=args.workers,
        proxy_url=args.proxy_url,
        agent_key_secret=os.environ.get("LIGHTNINGRL_AGENT_SECRET") or None,
        recorded_by=_by(args),
    )
    _emit(args, record, evidence_text(record))
    return 0


async def _evaluator(store: Any, gate: Any, args: argparse.Namespace) -> int:
    from lightningstore.gate import Evaluator

    evaluator = Evaluator(
        name=args.name, version=args.version, reward_name=args.reward_name, description=args.description
    )
    stored = await gate.register_evaluator(evaluator, recorded_by=_by(args))
    _emit(
        args, stored, f"evaluator {stored.name}@{stored.version} registered (reward {stored.reward_name!r})"
    )
    return 0


async def _protect(store: Any, gate: Any, args: argparse.Namespace) -> int:
    from lightningstore.gate import ProtectedCase

    case = ProtectedCase(
        resource_name=args.resource, case_id=args.case_id, task_id=args.task_id, min_reward=args.min_reward
    )
    stored = await gate.put_protected_case(case, recorded_by=_by(args))
    _emit(args, stored, f"protected case {stored.case_id} (task {stored.task_id}) of {stored.resource_name}")
    return 0


async def _policy(store: Any, gate: Any, args: argparse.Namespace) -> int:
    policy = await gate.policy_or_default(args.resource)
    changes: dict[str, Any] = {
        "evaluator": args.evaluator,
        "retry_budget": args.retry_budget,
        "min_holdout_gain": args.min_holdout_gain,
    }
    if args.span_coverage:
        changes["span_coverage"] = [k.strip() for k in args.span_coverage.split(",") if k.strip()]
    changes = {k: v for k, v in changes.items() if v is not None}
    if changes:
        policy = await gate.put_policy(
            type(policy).model_validate({**policy.model_dump(), **changes}), recorded_by=_by(args)
        )
    _emit(args, policy, json.dumps(policy.model_dump(mode="json"), indent=2))
    return 0
