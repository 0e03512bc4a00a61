"""benchmarks/instructions.py: instructions of one session, from two cachegrind counts."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from tests.scripts import load_script

REPO = Path(__file__).resolve().parents[1]


def _script() -> ModuleType:
    return load_script(REPO / "benchmarks" / "instructions.py", "bench_instructions")


def test_the_measured_program_runs_the_cycle_benchmarks_cluster() -> None:
    _script().run_sessions(nodes=4, pods=8, gang=1, sessions=2)


def test_cachegrinds_summary_is_read() -> None:
    summary = "==1== \n==1== I   refs:      3,681,312,554\n"
    found = _script().I_REFS.search(summary)
    assert found is not None and found.group(1) == "3,681,312,554"
