"""Guard (issue 31 item 6): no test asserts how many seconds something took.

A loaded machine is slow for no fault of the code (a dashboard page bound of 1 s failed a clean
CI run at 1.35 s), so a test bounds work (requests, rows, lines run, sessions) or checks what
the code recorded (cancellations, the grace it applied), and timings go to benchmarks/ with the
figure in docs. This scans tests/ for `assert`s comparing a clock reading: a call of
time.monotonic/perf_counter/time/process_time, a name assigned from one (or from arithmetic on
one), or a name unpacked from a tests/ function that returns one.

A liveness timeout is not a speed claim: `assert time.monotonic() < deadline` inside a `while`
polling loop (fail if something never happens) is allowed; so is tests/waiting.py's wait_for.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
CLOCKS = frozenset(
    {"monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "time", "time_ns"}
    | {"process_time", "process_time_ns"}
)

# (path, function) of assertions that must stay, each with its reason. Reviewed; keep it empty.
ALLOWED: dict[tuple[str, str], str] = {}


def _is_clock_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    if isinstance(f, ast.Attribute):
        return f.attr in CLOCKS and isinstance(f.value, ast.Name) and f.value.id == "time"
    return isinstance(f, ast.Name) and f.id in CLOCKS - {"time"}


def _call_name(node: ast.AST) -> str | None:
    if not isinstance(node, ast.Call):
        return None
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


_WRAPPERS = frozenset({"abs", "float", "int", "max", "min", "round"})


def _reads_clock(node: ast.AST, tainted: set[str]) -> bool:
    """Whether the expression's value is a clock reading: a clock call, a name holding one, or
    arithmetic on one (not a call that merely takes one as an argument, as a deadline)."""
    if _is_clock_call(node) or (isinstance(node, ast.Name) and node.id in tainted):
        return True
    if isinstance(node, ast.BinOp):
        return _reads_clock(node.left, tainted) or _reads_clock(node.right, tainted)
    if isinstance(node, ast.UnaryOp):
        return _reads_clock(node.operand, tainted)
    if isinstance(node, ast.IfExp):
        return _reads_clock(node.body, tainted) or _reads_clock(node.orelse, tainted)
    if isinstance(node, ast.Call) and _call_name(node) in _WRAPPERS:
        return any(_reads_clock(a, tainted) for a in node.args)
    return False


def _compares_clock(test: ast.Compare, tainted: set[str]) -> bool:
    return any(_reads_clock(side, tainted) for side in (test.left, *test.comparators))


def _clock_returns(trees: list[ast.Module]) -> dict[str, set[int] | None]:
    """Functions of tests/ that return a clock reading: name -> the tuple positions holding one
    (None: the whole value)."""
    found: dict[str, set[int] | None] = {}
    for tree in trees:
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            tainted = _tainted(fn, {})
            for ret in ast.walk(fn):
                if not isinstance(ret, ast.Return) or ret.value is None:
                    continue
                if isinstance(ret.value, ast.Tuple):
                    hits = {i for i, e in enumerate(ret.value.elts) if _reads_clock(e, tainted)}
                    if hits:
                        found[fn.name] = hits
                elif _reads_clock(ret.value, tainted):
                    found[fn.name] = None
    return found


def _tainted(fn: ast.AST, returns: dict[str, set[int] | None]) -> set[str]:
    """Names in `fn` that hold a clock reading, to a fixed point."""
    assigns = [
        (target, node.value)
        for node in ast.walk(fn)
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
    ]
    tainted: set[str] = set()
    while True:
        before = len(tainted)
        for target, value in assigns:
            tainted |= _tainted_targets(target, value, tainted, returns)
        if len(tainted) == before:
            return tainted


def _tainted_targets(
    target: ast.AST, value: ast.AST, tainted: set[str], returns: dict[str, set[int] | None]
) -> set[str]:
    positions = returns.get(_call_name(value) or "", set())
    if isinstance(target, ast.Tuple):
        return {
            e.id
            for i, e in enumerate(target.elts)
            if isinstance(e, ast.Name) and positions is not None and i in positions
        }
    if isinstance(target, ast.Name) and (_reads_clock(value, tainted) or positions is None):
        return {target.id}
    return set()


def _is_liveness(test: ast.Compare, in_while: bool) -> bool:
    """`clock() < deadline` (or `deadline > clock()`) polled inside a while loop."""
    if not (in_while and len(test.comparators) == 1):
        return False
    sides = [test.left, test.comparators[0]]
    named = [s for s in sides if "deadline" in ast.unparse(s)]
    return len(named) == 1 and any(_is_clock_call(s) for s in sides)


def _asserts(node: ast.AST, in_while: bool = False) -> Iterator[tuple[ast.Assert, bool]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Assert):
            yield child, in_while
        yield from _asserts(child, in_while or isinstance(child, ast.While))


def clock_asserts(path: Path, tree: ast.Module, returns: dict[str, set[int] | None]) -> list[str]:
    """`path:line function: assertion` of each assert in `tree` that compares a clock reading."""
    found = []
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    for fn in functions:
        tainted = _tainted(fn, returns)
        for node, in_while in _asserts(fn):
            compares = [n for n in ast.walk(node.test) if isinstance(n, ast.Compare)]
            timed = [c for c in compares if _compares_clock(c, tainted)]
            if timed and not all(_is_liveness(c, in_while) for c in timed):
                rel = path.relative_to(ROOT).as_posix()
                found.append(f"{rel}:{node.lineno} {fn.name}: {ast.unparse(node.test)}")
    return found


def scan(paths: list[Path]) -> list[str]:
    """Every clock assertion in `paths` (only files that read a clock, or call a function that
    returns a reading, are parsed: the rest cannot hold one)."""
    texts = {p: p.read_text() for p in paths}
    clocked = {p: ast.parse(t, filename=str(p)) for p, t in texts.items() if _mentions_clock(t)}
    returns = _clock_returns(list(clocked.values()))
    callers = {
        p: ast.parse(t, filename=str(p))
        for p, t in texts.items()
        if p not in clocked and any(f"{name}(" in t for name in returns)
    }
    trees = {**clocked, **callers}
    return [hit for p in sorted(trees) for hit in clock_asserts(p, trees[p], returns)]


def _mentions_clock(text: str) -> bool:
    return "from time import" in text or any(f"time.{name}(" in text for name in CLOCKS)


@functools.cache
def _scan_tests() -> tuple[str, ...]:
    return tuple(scan(sorted(TESTS.rglob("*.py"))))


def _key(hit: str) -> tuple[str, str]:
    where, rest = hit.split(" ", 1)
    return where.split(":")[0], rest.split(":")[0]


def test_no_test_asserts_elapsed_time() -> None:
    hits = [h for h in _scan_tests() if _key(h) not in ALLOWED]
    listed = "\n".join(f"  {h}" for h in hits)
    assert not hits, (
        "tests asserting elapsed time (bound work or check a record instead; timings go to "
        f"benchmarks/ with the figure in docs):\n{listed}"
    )


def test_the_allow_list_names_only_timed_asserts() -> None:
    found = {_key(h) for h in _scan_tests()}
    assert found >= set(ALLOWED), f"allowed but no longer timed: {sorted(set(ALLOWED) - found)}"


def test_the_scan_catches_the_timings_it_forbids() -> None:
    """Positive controls: each shape of clock assertion removed in issue 31 is found, and a
    polling loop's liveness check is not."""
    sample = TESTS / "sample_wall_clock.py"
    source = """
import time
from time import perf_counter

def _up():
    began = time.monotonic()
    return "proc", time.monotonic() - began

def test_direct():
    began = time.monotonic()
    assert time.monotonic() - began < 15

def test_named():
    t0 = perf_counter()
    took = perf_counter() - t0
    assert ok and took < 1.0, took

def test_unpacked():
    proc, elapsed = _up()
    assert 0.4 <= elapsed < 5

def test_liveness_is_fine():
    proc, _ = _up()
    deadline = time.monotonic() + 30
    while not proc:
        assert time.monotonic() < deadline, "never appeared"
    assert proc == "proc"
"""
    hits = clock_asserts(sample, ast.parse(source), _clock_returns([ast.parse(source)]))
    assert [h.split(" ")[1] for h in hits] == ["test_direct:", "test_named:", "test_unpacked:"]
