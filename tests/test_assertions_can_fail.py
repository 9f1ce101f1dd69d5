"""No test asserts something that holds whatever the code does.

`assert x == y or a` is true whenever `a` is truthy, `assert "text"` always; both read like checks and
check nothing. The scan is over every test file's AST, so a new one fails here with its line.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent


def vacuous(test: ast.expr) -> str | None:
    """Why an assert's condition cannot fail, or None when it can."""
    if isinstance(test, ast.Constant | ast.JoinedStr | ast.Tuple | ast.List):
        return "asserts a constant"
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        if not any(isinstance(value, ast.Compare) for value in test.values):
            return None  # `assert a or b` over flags is a real check
        for value in test.values:
            if isinstance(value, ast.Constant | ast.JoinedStr | ast.Name | ast.Subscript | ast.Attribute):
                return f"`or {ast.unparse(value)}` is true whenever that value is truthy"
    if isinstance(test, ast.Compare) and len(test.comparators) == 1:
        left, right = test.left, test.comparators[0]
        if isinstance(left, ast.Constant) and isinstance(right, ast.Constant):
            return "compares two constants"
        if ast.dump(left) == ast.dump(right) and isinstance(test.ops[0], ast.Eq | ast.Is | ast.GtE | ast.LtE):
            return "compares a value with itself"
    return None


def test_no_assert_is_vacuous() -> None:
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Assert) and (why := vacuous(node.test)):
                found.append(
                    f"{path.relative_to(TESTS)}:{node.lineno}: {why}: {ast.unparse(node.test)[:120]}"
                )
    assert found == []


def test_the_scan_sees_the_kinds_it_names() -> None:
    samples = {
        "assert x == f'\"{a}\"' or a": True,
        "assert 'text'": True,
        "assert 1 == 1": True,
        "assert x == x": True,
        "assert x == y or z == w": False,
        "assert 'a' in (reason or '')": False,
    }
    for source, expected in samples.items():
        (node,) = ast.parse(source).body
        assert isinstance(node, ast.Assert)
        assert (vacuous(node.test) is not None) is expected, source
