"""Guard (issue 16 item 3): no function under batch/ or integrations/ is longer than
MAX_LINES, counted as the AST counts them (end_lineno - lineno + 1, decorators excluded)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("batch", "integrations")
MAX_LINES = 80

# Flat declarations, not logic: long because they list things, with no branch to split out.
ALLOWED = {
    # the table of the built-in resource types the sandbox serves: one list literal
    ("batch/sandbox/meta.py", "builtin_types"),
    # the scheduler's metric declarations (one Histogram, Counter or Gauge after another)
    ("batch/kube/metrics.py", "__init__"),
}


def long_functions(max_lines: int = MAX_LINES) -> list[tuple[str, str, int, int]]:
    """(path, function, first line, length) of every function over max_lines."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for node in ast.walk(ast.parse(path.read_text(), filename=rel)):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    assert node.end_lineno is not None
                    length = node.end_lineno - node.lineno + 1
                    if length > max_lines:
                        found.append((rel, node.name, node.lineno, length))
    return found


def test_no_function_is_longer_than_the_limit() -> None:
    over = [f for f in long_functions() if (f[0], f[1]) not in ALLOWED]
    listed = "\n".join(f"  {path}:{line} {name} ({n} lines)" for path, name, line, n in over)
    assert not over, f"functions over {MAX_LINES} lines (split them into named steps):\n{listed}"


def test_the_allow_list_names_only_long_functions() -> None:
    """An entry whose function was split (or renamed) must leave the list."""
    long = {(path, name) for path, name, _line, _n in long_functions()}
    assert long >= ALLOWED, f"allowed but not over {MAX_LINES} lines: {sorted(ALLOWED - long)}"


MAX_FILE_LINES = 800


def test_no_module_is_longer_than_the_file_limit() -> None:
    """Issue 32: a module over MAX_FILE_LINES holds more than one concern; split it by concern
    (as `batch/kube/session_gauges.py` left `service.py`)."""
    over = [
        f"  {path.relative_to(ROOT).as_posix()} ({n} lines)"
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if (n := len(path.read_text().splitlines())) > MAX_FILE_LINES
    ]
    assert not over, f"modules over {MAX_FILE_LINES} lines:\n" + "\n".join(over)
