"""Release the CPU demo's last candidate through the gate, on the demo's real store.

    .venv/bin/python examples/calc/release.py --run runs/calc/seed0

Registers an evaluator, a policy and protected cases (admin token); evaluates the candidate (`latest`)
and its exact parent on the held-out tasks; files the receipt (learner token); runs a bounded canary
whose verifier recomputes the arithmetic and reads back the row the agent wrote; drills the rollback;
then `lightningrl release check | approve | promote | rollback | status` (approver token) and two
production-mode runs that show which version served. Modifies DIR/store.db: run it on a copy.

Every demo version names the demo's one inference endpoint (the demo reloaded that server after each
step). This script starts one inference server on each endpoint the two versions name and, before each
phase, loads the checkpoint of the version that phase runs and confirms it via /healthz; phases never
overlap, so each call is served by the weights of the version the proxy bound it to.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import sqlite3
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx  # noqa: E402
from agent import calc_agent, solve  # noqa: E402
from tasks import OPS, TOOLS, CalcTask, run_tool, split_tasks  # noqa: E402

from algorithm import Evaluate, Task  # noqa: E402
from lightningrl.fitting.local_stack import serve_app  # noqa: E402
from lightningrl.release import (  # noqa: E402
    CanaryTask,
    RoutingProof,
    Verification,
    drill_rollback,
    production_run,
    run_canary,
)
from lightningrl.release.selection import task_id_of  # noqa: E402
from lightningstore import LLM, LightningStore, ResourceVersion, Rollout, RolloutMode, SqlStore  # noqa: E402
from lightningstore.client.store_client import StoreClient  # noqa: E402
from lightningstore.gate import (  # noqa: E402
    CanaryLimits,
    CanaryRun,
    Evaluator,
    GatePolicy,
    GateRecords,
    ProtectedCase,
    RollbackDrill,
    gate_records,
)
from lightningstore.server.run import free_port  # noqa: E402
from runner import Runner, trace  # noqa: E402

NAME = "llm"
SECRET = "calc-release-agent-secret"
TOKENS = {"admin": "calc-adm", "algorithm": "calc-alg", "runner": "calc-run", "approver": "calc-apr"}
RESULTS = (
    "CREATE TABLE IF NOT EXISTS results (task_id TEXT, a INT, op TEXT, b INT, answer TEXT, version TEXT)"
)


# ---- the canary agent and its verifier ---------------------------------------------------------------


@trace(kind="tool", name="calculator")
def calculator(tool_call: str) -> str:
    return run_tool(tool_call)


@trace(kind="tool", name="report_answer")
def report_answer(db: str, task: dict[str, Any], answer: str, version: str) -> None:
    """The task's destination: one row in the results table."""
    with sqlite3.connect(db, timeout=30) as conn:
        conn.execute(RESULTS)
        row = (task["task_id"], task["a"], task["op"], task["b"], answer, version)
        conn.execute("INSERT INTO results VALUES (?, ?, ?, ?, ?, ?)", row)


async def canary_agent(task: dict[str, Any], resources: Any) -> float:
    """The calc agent's two calls, then it reports its answer as a row in `task['results_db']`."""
    _, _, answer = await solve(resources.llm, task["question"], tool=calculator)
    report_answer(task["results_db"], task, answer, resources.versions.get(NAME, "?"))
    return 1.0 if answer == str(task["answer"]) else 0.0


async def verify_result(task: CanaryTask, rollout: Rollout, store: LightningStore) -> Verification:
    """Recompute the arithmetic and read the destination back: exactly one row, with the right number,
    written by the version the rollout was bound to; rows for tasks nobody asked for are harmful."""
    spec = task.input
    expected = TOOLS[OPS[spec["op"]]](spec["a"], spec["b"])
    bound = await store.get_resources_by_id(rollout.resources_id or "")
    version = bound.versions[NAME].version_id if bound is not None else None
    with sqlite3.connect(spec["results_db"]) as conn:
        conn.execute(RESULTS)
        rows = conn.execute(
            "SELECT answer, version FROM results WHERE task_id = ?", (task.task_id,)
        ).fetchall()
        strangers = [t for (t,) in conn.execute("SELECT task_id FROM results") if t not in spec["planned"]]
    harmful = (f"{len(strangers)} rows for tasks nobody asked for",) if strangers else ()
    what = f"{spec['a']} {spec['op']} {spec['b']} = {expected}"
    if len(rows) != 1:
        return Verification(False, f"expected one result row for {task.task_id}, found {len(rows)}", harmful)
    if rows[0][1] != version:
        return Verification(
            False, f"row written by {rows[0][1]}, the rollout was bound to {version}", harmful
        )
    if rows[0][0] != str(expected):
        return Verification(False, f"row says {rows[0][0]!r}, {what}", harmful)
    return Verification(True, f"row says {rows[0][0]}, {what} (by {version})", harmful)


# ---- serving the versions ----------------------------------------------------------------------------


class Models:
    """One inference server per endpoint the versions name, on that very host:port."""

    def __init__(self, urls: dict[str, str]) -> None:
        self.urls = urls  # endpoint (.../v1) -> server root

    async def load(self, version: ResourceVersion) -> str:
        """Make the version's endpoint serve the version's checkpoint; return that checkpoint."""
        assert isinstance(version.resource, LLM) and version.resource.checkpoint
        want = version.resource.checkpoint
        async with httpx.AsyncClient(timeout=120) as http:
            for endpoint in version.resource.endpoints:
                root = self.urls[endpoint]
                if (await http.get(f"{root}/healthz")).json()["checkpoint"] != want:
                    (await http.post(f"{root}/reload", json={"checkpoint": want})).raise_for_status()
                served = (await http.get(f"{root}/healthz")).json()["checkpoint"]
                assert served == want, f"{endpoint} serves {served}, not {want}"
        return want


@contextlib.asynccontextmanager
async def stack(store: SqlStore, versions: list[ResourceVersion]) -> AsyncIterator[tuple[str, Models]]:
    """Store server (role tokens, proxy, gate routes) + inference servers on the versions' endpoints."""
    from lightningrl.serving import create_app as inference_app
    from lightningstore.auth import TokenConfig
    from lightningstore.proxy import ProxyConfig
    from lightningstore.server import build_app

    app = build_app(
        store,
        tokens=TokenConfig.from_mapping({**TOKENS, "agent_secret": SECRET}),
        proxy=ProxyConfig(resource_name=NAME, pointer_ttl_s=0.0),
        sweep_interval=None,
    )
    endpoints = {e: v for v in versions for e in v.resource.endpoints}  # type: ignore[union-attr]
    async with contextlib.AsyncExitStack() as stack_:
        urls: dict[str, str] = {}
        for endpoint, version in endpoints.items():
            parsed = urlparse(endpoint)
            if parsed.hostname not in ("127.0.0.1", "localhost") or parsed.port is None:
                raise SystemExit(f"{endpoint} is not a local endpoint this script can serve")
            model = inference_app(
                version.resource.checkpoint, served_model_name=version.resource.model, cpu_threads=1
            )  # type: ignore[union-attr]
            urls[endpoint] = await stack_.enter_async_context(serve_app(model, parsed.port))
        store_url = await stack_.enter_async_context(serve_app(app, free_port()))
        yield store_url, Models(urls)


# ---- steps -------------------------------------------------------------------------------------------


async def cli(store_url: str, role: str, *args: str, show: bool = True) -> tuple[int, str]:
    """`lightningrl release ARGS --store URL --token <role's token>`; echo its output."""
    exe = Path(sys.executable).with_name("lightningrl")
    argv = [str(exe), "release", args[0], "--store", store_url, "--token", TOKENS[role], *args[1:]]
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out = (await proc.communicate())[0].decode().rstrip()
    code = proc.returncode or 0
    if show:
        print(f"\n$ lightningrl release {' '.join(args)}   [{role} token] -> exit {code}\n{out}")
    return code, out


async def top_up_holdout(
    store: SqlStore,
    models: Models,
    proxy: str,
    version: ResourceVersion,
    heldout: list[CalcTask],
    repeats: int,
) -> int:
    """Val rollouts (the demo's validation protocol) until `version` has `repeats` per held-out task."""
    have: dict[str, int] = {t.task_id: 0 for t in heldout}
    for mode in (RolloutMode.VAL, RolloutMode.TEST):
        for rollout in await store.query_rollouts(mode=mode):
            if "gate" in rollout.metadata or not rollout.resources_id or task_id_of(rollout) not in have:
                continue
            found = await store.get_resources_by_id(rollout.resources_id)
            if (
                found is not None
                and found.versions.get(NAME)
                and found.versions[NAME].version_id == version.version_id
            ):
                have[task_id_of(rollout)] += 1
    need = repeats - min(have.values())
    if need <= 0:
        return 0
    await models.load(version)
    bound = await store.add_resource_set({NAME: version.version_id})
    runner = Runner(
        store, calc_agent, workers=16, proxy_url=proxy, agent_key_secret=SECRET, show_progress=False
    )
    work = asyncio.create_task(runner.run())
    tasks = [Task(task_id=t.task_id, input=t.as_input(), tags={"op": t.op}) for t in heldout]
    result = await Evaluate(
        store, tasks, resources_id=bound.resources_id, n=need, group_prefix="gate-holdout/"
    ).run()
    runner.stop()
    await asyncio.wait_for(work, timeout=60)
    print(f"  {version.version_id}: +{len(result.outcomes)} val rollouts, success {result.success_rate:.3f}")
    return len(result.outcomes)


async def judgement(judge: GateRecords, protected: list[CalcTask], canary: int) -> None:
    """What the learner may not write (admin token): evaluator, policy with canary limits, protected cases."""
    by = "release-example"
    await judge.register_evaluator(
        Evaluator(name="calc-exact", version="1", description="a op b"), recorded_by=by
    )
    limits = CanaryLimits(
        max_tasks=canary, max_seconds=300, max_tool_calls=4 * canary, cost_per_1k_tokens=0.01
    )
    policy = GatePolicy(resource_name=NAME, evaluator="calc-exact", retry_budget=5, canary=limits)
    await judge.put_policy(policy, recorded_by=by)
    for t in protected:
        case = ProtectedCase(resource_name=NAME, case_id=f"case-{t.task_id}", task_id=t.task_id)
        await judge.put_protected_case(case, recorded_by=by)
    print(f"admin: evaluator calc-exact@1, policy, protected cases {[t.task_id for t in protected]}")


async def canary_run(
    store: SqlStore, judge: GateRecords, rid: str, proxy: str, canary: list[CalcTask], results_db: Path
) -> None:
    """The bounded canary: every answer lands as a row in `results_db`, which the verifier reads back."""
    results_db.unlink(missing_ok=True)
    planned = [f"canary-{t.task_id}" for t in canary]
    extra = {"results_db": str(results_db), "planned": planned}
    tasks = [
        CanaryTask(i, {**t.as_input(), "task_id": i, **extra}) for i, t in zip(planned, canary, strict=True)
    ]
    record = await run_canary(
        store, judge, rid, canary_agent, tasks, verify_result, proxy_url=proxy, agent_key_secret=SECRET
    )
    run = record.body
    assert isinstance(run, CanaryRun)
    verified = sum(o.verified for o in run.outcomes)
    print(f"canary: {verified}/{len(run.planned)} verified in {results_db.name}, {run.tool_calls} tool calls")
    for o in [o for o in run.outcomes if not o.verified] or run.outcomes[:2]:
        print(f"  {o.task_id}: {'ok' if o.verified else 'NOT VERIFIED'} - {o.reason}")


async def production(
    store: SqlStore, models: Models, proxy: str, tasks: list[CalcTask], label: str
) -> RoutingProof:
    """Production rollouts (no resource set): the proxy binds `approved`; serve `approved`'s checkpoint."""
    approved = await store.get_approved_version(NAME)
    assert approved is not None
    await models.load(approved)
    prod = [CanaryTask(f"{label}-{t.task_id}", t.as_input()) for t in tasks]
    proof = await production_run(
        store,
        calc_agent,
        prod,
        expected_version_id=approved.version_id,
        proxy_url=proxy,
        agent_key_secret=SECRET,
    )
    print(
        f"\nproduction run ({label}): {proof.finished}/{proof.planned} finished, LLM calls by {proof.served}"
    )
    return proof


async def main(args: argparse.Namespace) -> int:
    run = Path(args.run).resolve()
    store = SqlStore(run / "store.db")
    if args.candidate == "latest":
        candidate = await store.get_latest_version(NAME)
    else:
        candidate = await store.get_resource_version(args.candidate)
    assert candidate is not None and candidate.parent_id, "no candidate with a parent in this store"
    parent = await store.get_resource_version(candidate.parent_id)
    assert parent is not None and isinstance(candidate.resource, LLM)
    seed = args.seed if args.seed is not None else int(candidate.metadata["algorithm_config"]["seed"])
    _, heldout = split_tasks(seed)
    # fixed before any result is seen: the first two held-out questions (phrasing 0) of each operation
    protected = [t for op in OPS for t in [x for x in heldout if x.op == op and x.task_id.endswith("-0")][:2]]
    # canary: a seeded sample of the other held-out questions, in the agent's real setting (greedy, test mode)
    canary = random.Random(seed).sample([t for t in heldout if t not in protected], args.canary_tasks)
    print(
        f"candidate {candidate.version_id} (step {candidate.metadata.get('step')}) <- parent {parent.version_id} "
        f"(step {parent.metadata.get('step')}); both served at {candidate.resource.endpoints}"
    )
    summary: dict[str, Any] = {"candidate": candidate.version_id, "parent": parent.version_id}
    async with stack(store, [candidate, parent]) as (url, models):
        proxy = f"{url}/proxy"
        admin = StoreClient(url, TOKENS["admin"], max_retries=0)
        judge = gate_records(admin)
        await judgement(judge, protected, args.canary_tasks)
        print(f"holdout: {len(heldout)} held-out tasks x {args.repeats} val rollouts per version")
        for version in (parent, candidate):
            await top_up_holdout(store, models, proxy, version, heldout, args.repeats)

        code, out = await cli(url, "algorithm", "receipt", args.candidate, "--json", show=False)
        assert code == 0, out
        rid = json.loads(out)["receipt_id"]
        print(f"\nreceipt {rid} filed with the learner's (algorithm) token")
        await models.load(candidate)
        await canary_run(store, judge, rid, proxy, canary, run / f"canary-{rid}.db")
        drill = (await drill_rollback(store, judge, rid, recorded_by="release-example")).body
        assert isinstance(drill, RollbackDrill)
        print(f"rollback drill: {drill.reason}; routed to {drill.routed_version_id}")

        await cli(url, "approver", "check", rid)
        code, out = await cli(url, "algorithm", "approve", rid, "--actor", "learner", show=False)
        print(f"\napprove with the learner's token -> exit {code}: {out.splitlines()[-1]}")
        await cli(url, "approver", "approve", rid, "--actor", "alice", "--note", "calc demo release")
        code, out = await cli(url, "approver", "check", rid)
        summary["verdict"] = out.splitlines()[-1]
        code, _ = await cli(url, "approver", "promote", rid, "--actor", "alice")
        summary["promoted"] = code == 0
        if code == 0:
            after = await production(store, models, proxy, heldout[: args.production_tasks], "promoted")
            await cli(url, "approver", "rollback", rid, "--actor", "alice")
            back = await production(store, models, proxy, heldout[: args.production_tasks], "rolled-back")
            summary.update(after_promote=after.served, after_rollback=back.served)
            summary["routing_ok"] = after.expected == candidate.version_id and after.ok and back.ok
            summary["routing_ok"] &= back.expected == parent.version_id
        await cli(url, "approver", "status")
        await admin.close()
    await store.close()
    print("\nsummary: " + json.dumps(summary))
    return 0 if summary.get("routing_ok") else 3


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--run", required=True, help="a finished demo output, e.g. runs/calc/seed0 (modified: use a copy)"
    )
    p.add_argument("--seed", type=int, help="the demo's seed (default: the candidate's algorithm_config)")
    p.add_argument("--repeats", type=int, default=3, help="val rollouts per held-out task and version")
    p.add_argument("--candidate", default="latest", help="version id to release (default: `latest`)")
    p.add_argument("--canary-tasks", type=int, default=12)
    p.add_argument("--production-tasks", type=int, default=6)
    return p.parse_args(argv)


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse_args())))
