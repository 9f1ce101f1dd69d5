"""The paper's experiments in miniature: run each example demo a few times and print one table.

    .venv/bin/python examples/experiments.py [--runs 3] [--only calc,sql] [--model tiny|smollm2] [--output DIR] [--resume]

Each demo runs as its own process, one at a time, with its default settings and seeds 0..runs-1; its
last line (`held-out success: before X after Y (seed S, N RL steps, W s wall)`) is the result. The
table (markdown, also written to `<output>/table.md`) gives per task: framework, model size, held-out
before -> after as min / median / max over the runs, steps and wall (median). Per task,
`<output>/<task>.png` overlays every run's train reward and held-out success per step. Each finished
run leaves `<task>-seed<S>.json` (its command line, code version, commit and wall) beside its log, so
that a stopped invocation goes on with `--resume`: the same command line again runs only what is
missing, and refuses a finished run made with another command line or another version of the code
(`CODE_PATHS`; a commit of docs alone does not count).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LAST_LINE = re.compile(
    r"held-out success: before (?P<before>[\d.]+) after (?P<after>[\d.]+) "
    r"\(seed (?P<seed>\d+), (?P<steps>\d+) RL steps, (?P<wall>\d+) s wall\)"
)


@dataclass(frozen=True)
class Experiment:
    name: str
    task: str
    framework: str
    script: str
    run_dir: str
    """The demo's output directory for seed S under --output (`{seed}` is filled in)."""
    args: tuple[str, ...] = ()


EXPERIMENTS = (
    Experiment("calc", "calculator tools", "plain openai client", "examples/calc/demo.py", "seed{seed}"),
    Experiment(
        "calc_autogen",
        "calculator tools (function calling)",
        "AutoGen AgentChat",
        "examples/calc_autogen/demo.py",
        "python-seed{seed}",
    ),
    Experiment(
        "calc_sft",
        "calculator tools, SFT on successes (same steps, same rollouts)",
        "plain openai client",
        "examples/calc/demo.py",
        "seed{seed}",
        ("--algorithm", "sft"),
    ),
    Experiment(
        "calc_apo",
        "calculator tools, APO of the system prompt (SmolLM2-135M optimizer, weights kept)",
        "plain openai client",
        "examples/calc/demo.py",
        "seed{seed}",
        ("--algorithm", "apo"),
    ),
    Experiment("sql", "text-to-SQL", "LangGraph", "examples/sql/demo.py", "writer-seed{seed}"),
    Experiment("rag", "retrieval QA", "OpenAI Agents SDK", "examples/rag/demo.py", "seed{seed}"),
)
SMOLLM2_EXPERIMENTS = (
    Experiment(
        "calc",
        "calculator tools (function calling), 120 held-out",
        "plain openai client",
        "examples/calc/demo_smollm2.py",
        "seed{seed}",
    ),
    Experiment(
        "calc_autogen",
        "calculator tools (function calling, AutoGen's defaults), 120 held-out",
        "AutoGen AgentChat",
        "examples/calc/demo_smollm2.py",
        "seed{seed}",
        ("--framework", "autogen"),
    ),
    Experiment(
        "sql",
        "text-to-SQL (function calling), 108 held-out",
        "LangGraph",
        "examples/sql/demo_smollm2.py",
        "seed{seed}",
    ),
    Experiment(
        "rag",
        "retrieval QA (function calling), 144 held-out",
        "OpenAI Agents SDK",
        "examples/rag/demo_smollm2.py",
        "seed{seed}",
    ),
)
EXPERIMENTS_BY_MODEL = {"tiny": EXPERIMENTS, "smollm2": SMOLLM2_EXPERIMENTS}


@dataclass(frozen=True)
class RunResult:
    before: float
    after: float
    steps: int
    wall: float
    params: int | None
    metrics_csv: Path | None
    slices_before: dict[str, float]
    slices_after: dict[str, float]


def parameter_count(model_dir: Path) -> int | None:
    """Parameters of the safetensors checkpoint in `model_dir` (None when there is none)."""
    from safetensors import safe_open

    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        return None
    total = 0
    for file in files:
        with safe_open(str(file), "pt") as fh:
            for key in fh.keys():  # noqa: SIM118 (safe_open is not a mapping)
                total += math.prod(fh.get_slice(key).get_shape())
    return total


CODE_PATHS = ("src", "examples", "scripts", "pyproject.toml")
"""What a run executes: a commit that touches none of them (the README's table, say) keeps `--resume` going."""


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def source_version() -> str:
    """The last commit that changed the code the runs use (`CODE_PATHS`), `+changes` when the work tree
    differs from it there."""
    commit = git("log", "-1", "--format=%H", "--", *CODE_PATHS) or "unknown"
    changed = git("status", "--porcelain", "--untracked-files=no", "--", *CODE_PATHS)
    return commit + ("+changes" if changed else "")


def closing_line(log: Path) -> re.Match[str] | None:
    match = None
    if log.exists():
        for line in log.read_text().splitlines():
            match = LAST_LINE.search(line) or match
    return match


def finished_run(log: Path, record: dict[str, Any]) -> float | None:
    """A run an earlier, stopped part of this invocation finished (`--resume`): its wall, or None when
    it has to run. Refuses one made with another command line or another version of the code."""
    sidecar = log.with_suffix(".json")
    if not (sidecar.exists() and closing_line(log)):
        return None
    earlier = json.loads(sidecar.read_text())
    for key, value in record.items():
        if earlier.get(key) != value:
            raise SystemExit(
                f"--resume: {log.name} was run with {key} {earlier.get(key)!r}, this invocation has {value!r}; "
                "use another --output to start afresh"
            )
    return float(earlier["wall"])


def run_one(
    experiment: Experiment, seed: int, output: Path, extra: list[str], *, resume: bool = False
) -> RunResult:
    """Run one demo to its end (with `resume`, reuse its finished run); raise naming the demo when its
    last line is missing."""
    out = output / experiment.name
    log = output / f"{experiment.name}-seed{seed}.log"
    command = [sys.executable, experiment.script, "--seed", str(seed), "--output", str(out), *experiment.args]
    record = {"command": [Path(command[0]).name, *command[1:], *extra], "version": source_version()}
    wall = finished_run(log, record) if resume else None
    ran = wall is None
    if wall is None:
        started = time.perf_counter()
        with log.open("w") as fh:
            code = subprocess.call([*command, *extra], cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT)
        wall = time.perf_counter() - started
        if code != 0:
            raise SystemExit(f"{experiment.script} --seed {seed} failed (exit {code}); see {log}")
    match = closing_line(log)  # a resumed run's log had one (finished_run checked)
    if match is None:
        raise SystemExit(f"{experiment.script} --seed {seed} printed no closing line; see {log}")
    if ran:
        sidecar = record | {"commit": git("rev-parse", "HEAD"), "wall": wall}
        log.with_suffix(".json").write_text(json.dumps(sidecar) + "\n")
    run_dir = out / experiment.run_dir.format(seed=seed)
    metrics = run_dir / "metrics.csv"
    first, last = first_and_last_slices(metrics)
    return RunResult(
        before=float(match["before"]),
        after=float(match["after"]),
        steps=int(match["steps"]),
        wall=wall,
        params=parameter_count(run_dir / "model-warmup"),
        metrics_csv=metrics if metrics.exists() else None,
        slices_before=first,
        slices_after=last,
    )


def first_and_last_slices(metrics: Path) -> tuple[dict[str, float], dict[str, float]]:
    """Held-out success per slice (`op=plus`) at the first and last validation of a metrics.csv."""
    from lightningrl.demos.flags import heldout_slices

    if not metrics.exists():
        return {}, {}
    with metrics.open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r.get("val/success")]
    if not rows:
        return {}, {}

    def slices(row: dict[str, str]) -> dict[str, float]:
        return heldout_slices({k: float(v) for k, v in row.items() if k.startswith("val/success[") and v})

    return slices(rows[0]), slices(rows[-1])


def slice_cell(results: list[RunResult]) -> str:
    """Each slice's median held-out success, before -> after, over the runs."""
    names = sorted({name for r in results for name in (*r.slices_before, *r.slices_after)})
    parts = []
    for name in names:
        before = [r.slices_before[name] for r in results if name in r.slices_before]
        after = [r.slices_after[name] for r in results if name in r.slices_after]
        if before and after:
            parts.append(f"{name} {statistics.median(before):.2f} → {statistics.median(after):.2f}")
    return ", ".join(parts) or "-"


def spread(values: list[float]) -> str:
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


def table(rows: dict[Experiment, list[RunResult]]) -> str:
    lines = [
        "| task | framework | model | runs | held-out before (min / median / max) | after (min / median / max) "
        "| rise (median) | by slice (median) | steps | wall, median |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for experiment, results in rows.items():
        before = [r.before for r in results]
        after = [r.after for r in results]
        params = results[0].params
        size = f"{params / 1e6:.2f}M" if params else "?"
        rise = statistics.median(a - b for a, b in zip(after, before, strict=True))
        lines.append(
            f"| {experiment.task} | {experiment.framework} | {size} | {len(results)} | {spread(before)} | "
            f"{spread(after)} | {rise:+.2f} | {slice_cell(results)} | {results[0].steps} | {statistics.median(r.wall for r in results):.0f} s |"
        )
    return "\n".join(lines)


def plot(experiment: Experiment, results: list[RunResult], path: Path) -> None:
    """Every run's train reward (line) and held-out success (dots) per step, on one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    for index, result in enumerate(results):
        if result.metrics_csv is None:
            continue
        with result.metrics_csv.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        color = f"C{index}"
        train = [(int(r["step"]), float(r["train/reward_mean"])) for r in rows if r.get("train/reward_mean")]
        val = [(int(r["step"]), float(r["val/success"])) for r in rows if r.get("val/success")]
        if train:
            ax.plot(*zip(*train, strict=True), color=color, alpha=0.6, label=f"run {index + 1}: train reward")
        if val:
            ax.plot(*zip(*val, strict=True), "o--", color=color, label=f"run {index + 1}: held-out success")
    ax.set_xlabel("RL step")
    ax.set_ylabel("reward / success")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=7)
    ax.set_title(f"{experiment.task} ({experiment.framework})")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def chosen_experiments(only: str, model: str = "tiny") -> list[Experiment]:
    """The demos `--only` names (comma-separated) for `model`, in the order given; all of them for ""."""
    experiments = EXPERIMENTS_BY_MODEL[model]
    names = list(dict.fromkeys(name for name in only.split(",") if name))
    unknown = set(names) - {e.name for e in experiments}
    if unknown:
        raise KeyError(f"--only: unknown demo(s) {sorted(unknown)} for --model {model}")
    by_name = {e.name: e for e in experiments}
    return [by_name[name] for name in names] if names else list(experiments)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per demo, seeds 0..runs-1")
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated demos, run in that order: "
        + "; ".join(f"{m}: " + ",".join(e.name for e in es) for m, es in EXPERIMENTS_BY_MODEL.items()),
    )
    parser.add_argument(
        "--model",
        choices=sorted(EXPERIMENTS_BY_MODEL),
        default="tiny",
        help="tiny: the 0.7M-parameter models built here; smollm2: the real SmolLM2-135M-Instruct",
    )
    parser.add_argument("--output", default=None, help="default: runs/experiments (runs/experiments-smollm2)")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue a stopped invocation in --output: reuse each run it finished (same command, same "
        "code, refused otherwise), run the rest",
    )
    args, extra = parser.parse_known_args(argv)
    if args.output is None:
        args.output = "runs/experiments" if args.model == "tiny" else f"runs/experiments-{args.model}"
    try:
        chosen = chosen_experiments(args.only, args.model)
    except KeyError as error:
        parser.error(str(error.args[0]))
    output = Path(args.output).resolve()
    output.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    rows: dict[Experiment, list[RunResult]] = {}
    for experiment in chosen:
        rows[experiment] = []
        for seed in range(args.runs):
            result = run_one(experiment, seed, output, extra, resume=args.resume)
            rows[experiment].append(result)
            print(
                f"{experiment.name} seed {seed}: held-out {result.before:.2f} -> {result.after:.2f}, "
                f"{result.steps} steps, {result.wall:.0f} s",
                flush=True,
            )
        plot(experiment, rows[experiment], output / f"{experiment.name}.png")
    text = table(rows)
    (output / "table.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
