"""docs/architecture.md names modules, folders and files; each one it names must exist.

Two rules: a name in the first cell of a module table under "Inside `pkg`" is a path inside
`src/pkg/` (so the table says where a module lives, not only that one of that name exists somewhere);
any other backticked path (`x.py`, `folder/`, `a/b.py`) must be a file or folder of the repository
(matched as a path suffix), and a dotted name of ours (`lightningrl.verl_cpu`) must be a module or
an attribute of one (a span attribute name from `semconv`, such as `lightningrl.rollout_id`, is not
a module and is checked against `semconv` instead).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = ("lightningstore", "runner", "algorithm", "lightningrl")
TICKED = re.compile(r"`([^`\n]+)`")
PATHLIKE = re.compile(r"^[\w.-]+(/[\w.-]+)*/?$")
DOTTED = re.compile(r"^(?:" + "|".join(PACKAGES) + r")(?:\.\w+)+$")
TABLE_OWNER = re.compile(r"^Inside `(\w+)`")


def _repo_paths() -> set[str]:
    skip = {".git", ".venv", ".venv-vllm", "runs", "node_modules", "__pycache__"}
    out: set[str] = set()
    for path in ROOT.rglob("*"):
        parts = path.relative_to(ROOT).parts
        if skip.intersection(parts):
            continue
        out.add("/".join(parts) + ("/" if path.is_dir() else ""))
    return out


def _is_path(token: str) -> bool:
    return bool(PATHLIKE.match(token)) and (token.endswith((".py", "/", ".j2", ".ini")) or "/" in token)


def _exists_as_suffix(token: str, paths: set[str]) -> bool:
    want = token if token.endswith("/") or "." in token.rsplit("/", 1)[-1] else token + "/"
    return any(p == want or p.endswith("/" + want) for p in paths)


def _dotted_exists(name: str) -> bool:
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        target: object = module
        for attr in parts[cut:]:
            if not hasattr(target, attr):
                return False
            target = getattr(target, attr)
        return True
    return False


def _semconv_names() -> set[str]:
    from lightningstore import semconv

    return {value for value in vars(semconv).values() if isinstance(value, str)}


def _named() -> tuple[list[tuple[str, str]], list[str]]:
    """(package, path) pairs from the module tables, and every other backticked token."""
    in_table: list[tuple[str, str]] = []
    loose: list[str] = []
    owner: str | None = None
    for line in DOC.read_text().splitlines():
        found = TABLE_OWNER.match(line)
        if found:
            owner = found.group(1)
        elif line.startswith("#"):
            owner = None
        if owner and line.startswith("|") and not line.startswith(("| module", "|---")):
            first, _, rest = line[1:].partition("|")
            in_table += [(owner, t) for t in TICKED.findall(first) if _is_path(t)]
            loose += TICKED.findall(rest)
        else:
            loose += TICKED.findall(line)
    return in_table, loose


def test_the_module_tables_name_paths_that_exist_in_their_package() -> None:
    in_table, _ = _named()
    assert len(in_table) > 20  # the tables are read at all
    missing = [f"src/{pkg}/{path}" for pkg, path in in_table if not (ROOT / "src" / pkg / path).exists()]
    assert not missing, f"docs/architecture.md's module tables name what is not there: {missing}"


def test_every_path_and_module_the_doc_names_exists() -> None:
    _, loose = _named()
    paths = _repo_paths()
    named_paths = [t for t in loose if _is_path(t) and not t.startswith(".")]
    attributes = _semconv_names()
    named_modules = [t for t in loose if DOTTED.match(t) and t not in attributes]
    assert len(named_paths) > 20 and len(named_modules) > 3
    missing = [t for t in named_paths if not _exists_as_suffix(t, paths)]
    missing += [t for t in named_modules if not _dotted_exists(t)]
    assert not missing, f"docs/architecture.md names what is not in the repository: {missing}"


def _calls_in_order(path: str, function: str) -> list[str]:
    """The names `function` (`Class.method` or a module-level function) in `src/path` calls, in source
    order: `f(...)` and `x.f(...)` give `f`, `self.f(...)` gives `self.f`; a function handed to a call
    (`to_thread(x.f, ...)`) counts as called there."""
    import ast

    tree = ast.parse((ROOT / "src" / path).read_text())
    owner, _, name = function.rpartition(".")
    scope: ast.AST = tree
    if owner:
        scope = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == owner)
    body = next(
        n
        for n in ast.iter_child_nodes(scope)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name
    )
    calls = [n for n in ast.walk(body) if isinstance(n, ast.Call)]
    calls.sort(key=lambda n: (n.lineno, n.col_offset))
    names = []
    for call in calls:
        if isinstance(call.func, ast.Name):
            names.append(call.func.id)
        elif isinstance(call.func, ast.Attribute):
            own = isinstance(call.func.value, ast.Name) and call.func.value.id == "self"
            names.append(f"self.{call.func.attr}" if own else call.func.attr)
        names += [arg.attr for arg in call.args if isinstance(arg, ast.Attribute)]
    return names


def _in_order(calls: list[str], expected: list[str]) -> bool:
    positions = [calls.index(name) if name in calls else -1 for name in expected]
    return -1 not in positions and positions == sorted(positions)


def test_the_step_flows_as_the_doc_tells_it() -> None:
    """ "One rollout, from enqueue to a weight update", steps 6-9, held against the code: the doc names
    each step's function in the order the loop calls them, and the loop calls them in that order."""
    text = DOC.read_text()
    section = text[text.index("## One rollout, from enqueue to a weight update") :]
    section = section[: section.index("\n## ", 1)]
    steps = {
        title: body
        for title, body in re.findall(
            r"^\d+\. \*\*([\w ]+)\.\*\*(.*?)(?=^\d+\. \*\*|\Z)", section, re.M | re.S
        )
    }
    assert list(steps)[5:9] == ["Collect", "Credit", "Update", "Publish"], list(steps)
    for title, names in {
        "Collect": ["query_spans_many", "rl/batch_fill.py"],
        "Credit": ["lightningrl.credit.assign_credit"],
        "Update": ["rl_step", "rl/step.py", "collate", "compute_advantages", "train_step"],
        "Publish": ["serving.endpoint.sync_weights"],
    }.items():
        missing = [name for name in names if f"`{name}`" not in steps[title]]
        assert not missing, f"step {title} no longer names {missing}"
    run = _calls_in_order("lightningrl/rl/loop.py", "LightningRL.run")
    assert _in_order(run, ["self._fill_batch", "self.collect", "self.update"]), run
    assert "assign_credit_to_rollouts" in _calls_in_order("lightningrl/rl/loop.py", "LightningRL.collect")
    update = _calls_in_order("lightningrl/rl/loop.py", "LightningRL.update")
    assert _in_order(update, ["rl_step", "save_checkpoint", "self.publish", "self._sync_servers"]), update
    step = _calls_in_order("lightningrl/rl/step.py", "rl_step")
    assert _in_order(step, ["collate", "compute_advantages", "train_step"]), step
