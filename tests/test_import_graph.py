"""The house rules on imports, read from the source: packages point down, nothing imports in a circle,
and the library never imports its demos (lightningrl.demos).

Every import statement counts, including ones inside functions (a lazy import is still a dependency).
`if TYPE_CHECKING:` blocks count for circles and for the demos (a type-only import still ties the two
together); the layering rules leave them out, since they never run.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGES = ("lightningstore", "runner", "algorithm", "lightningrl")
# What each top-level package may import (besides itself). runner and algorithm meet only in the store.
ALLOWED = {
    "lightningstore": set(),
    "runner": {"lightningstore"},
    "algorithm": {"lightningstore"},
    "lightningrl": {"lightningstore", "runner", "algorithm"},
}
# Inside lightningstore, top to bottom; a module imports its own layer and the ones below it
# (docs/architecture.md). The bottom holds the contract, its implementations (sql/, client.py), the
# models, semconv, the HTTP API's bodies (http_api.py) and auth/.
LIGHTNINGSTORE_LAYERS = (
    ("lightningstore.server",),
    ("lightningstore.proxy", "lightningstore.gate"),
    ("lightningstore",),
)
# Demo code (tiny models, warm-ups, the demos' flags): examples/, tests/ and bench/ import it, the
# library does not. The CLI loads its commands by name (lightningrl.cli.COMMAND_PACKAGES), not by import.
DEMOS = "lightningrl.demos"


def _modules() -> dict[str, tuple[Path, bool]]:
    found: dict[str, tuple[Path, bool]] = {}
    for package in PACKAGES:
        for path in (SRC / package).rglob("*.py"):
            parts = list(path.relative_to(SRC).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            found[".".join(parts)] = (path, is_package)
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST, type_checking: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.iter_child_nodes(tree):
        if not type_checking and isinstance(node, ast.If) and _is_type_checking(node):
            for other in node.orelse:
                yield from _import_nodes(ast.Module(body=[other], type_ignores=[]), type_checking)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        yield from _import_nodes(node, type_checking)


def _graph(type_checking: bool = False) -> dict[str, set[str]]:
    """module -> the modules of ours it imports (`from a import b` counts as a.b when b is a module);
    `type_checking`: the imports of `if TYPE_CHECKING:` blocks count too."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, (path, is_package) in modules.items():
        package = name if is_package else name.rpartition(".")[0]
        for node in _import_nodes(ast.parse(path.read_text(), str(path)), type_checking):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - (node.level - 1)]
                    base = ".".join([*parts, base] if base else parts)
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                    for alias in node.names
                ]
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _edges_between(graph: dict[str, set[str]], group_of: Callable[[str], str]) -> dict[str, set[str]]:
    grouped: dict[str, set[str]] = {}
    for source, targets in graph.items():
        for target in targets:
            a, b = group_of(source), group_of(target)
            if a != b and not a.startswith(b + "."):  # a subpackage always loads its parents
                grouped.setdefault(a, set()).add(b)
    return grouped


def _subpackage(module: str, packages: set[str]) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if ".".join(parts[:2]) in packages else parts[0]


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _layer(module: str) -> int | None:
    """The index of the lightningstore layer holding `module` (None outside lightningstore)."""
    for depth, layer in enumerate(LIGHTNINGSTORE_LAYERS):
        if any(_inside(module, top) for top in layer):
            return depth
    return None


def _imports_of_demos(graph: dict[str, set[str]]) -> list[str]:
    """Imports of lightningrl.demos from modules outside it."""
    return sorted(
        f"{source} imports {target}"
        for source, targets in graph.items()
        for target in targets
        if _inside(target, DEMOS) and not _inside(source, DEMOS)
    )


def _upward_arrows(graph: dict[str, set[str]]) -> list[str]:
    """Imports inside lightningstore that point at a higher layer than their own."""
    return sorted(
        f"{source} imports {target}"
        for source, targets in graph.items()
        for target in targets
        if (a := _layer(source)) is not None and (b := _layer(target)) is not None and b < a
    )


def test_no_module_imports_itself_through_a_loop() -> None:
    assert _cycles(_graph(type_checking=True)) == []


def test_no_two_subpackages_import_each_other() -> None:
    modules = _modules()
    packages = {name for name, (_, is_package) in modules.items() if is_package}
    grouped = _edges_between(_graph(type_checking=True), lambda m: _subpackage(m, packages))
    assert _cycles(grouped) == []


def test_packages_point_down() -> None:
    wrong = sorted(
        f"{source} imports {target}"
        for source, targets in _graph().items()
        for target in targets
        if (a := source.split(".")[0]) != (b := target.split(".")[0]) and b not in ALLOWED[a]
    )
    assert wrong == []


def test_the_checker_sees_a_loop() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_lightningstore_layers_point_down() -> None:
    assert _upward_arrows(_graph()) == []


def test_the_checker_sees_a_module_pointing_up() -> None:
    graph = {
        "lightningstore.client.store_client": {"lightningstore.server.schemas", "lightningstore.store"},
        "lightningstore.gate.routes": {"lightningstore.server.auth", "lightningstore.auth.tokens"},
        "lightningstore.server.app": {"lightningstore.gate.routes", "lightningstore.client.store_client"},
    }
    assert _upward_arrows(graph) == [
        "lightningstore.client.store_client imports lightningstore.server.schemas",
        "lightningstore.gate.routes imports lightningstore.server.auth",
    ]


def test_only_the_demos_import_the_demos() -> None:
    assert _imports_of_demos(_graph(type_checking=True)) == []


def test_the_checker_sees_the_library_importing_a_demo() -> None:
    graph = {
        "lightningrl.serving.responses": {"lightningrl.demos.tinylm", "lightningrl.serving.bytelevel"},
        "lightningrl.demos.warmup": {"lightningrl.demos.copy_checks", "lightningrl.quiet"},
        "lightningrl.demonstrations": {"lightningrl.demos"},
    }
    assert _imports_of_demos(graph) == [
        "lightningrl.demonstrations imports lightningrl.demos",
        "lightningrl.serving.responses imports lightningrl.demos.tinylm",
    ]


def test_type_checking_imports_count_only_when_asked() -> None:
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import lightningrl.demos\nelse:\n    import lightningrl.quiet\n"
    )

    def names(type_checking: bool) -> list[str]:
        return [alias.name for node in _import_nodes(tree, type_checking) for alias in node.names]

    assert names(False) == ["TYPE_CHECKING", "lightningrl.quiet"]
    assert names(True) == ["TYPE_CHECKING", "lightningrl.demos", "lightningrl.quiet"]
