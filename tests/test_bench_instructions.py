"""benchmarks/instructions.py: instructions of one session, from two cachegrind counts."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from tests.scripts import load_script

REPO = Path(__file__).resolve().parents[1]


def _script() -> ModuleType:
    return load_script(REPO / "benchmarks" / "instructions.py", "bench_instructions")


def test_the_measured_program_runs_the_cycle_benchmarks_cluster() -> None:
    _script().run_sessions(nodes=4, pods=8, gang=1, sessions=2, budget=False)
    _script().run_sessions(nodes=4, pods=8, gang=1, sessions=1, budget=True)
    _script().run_sessions(nodes=4, pods=8, gang=1, sessions=1, budget=False, preset="helm")


def test_every_time_budget_of_the_measured_configuration_is_found() -> None:
    """Counts without budgets depend on the code only: the pattern must find every budget the
    configuration sets (a renamed key would bring the load-dependent counts back)."""
    from batch.scheduler import TEPHRA_DEFAULT_CONFIG, load_config

    found = _script().TIME_BUDGET.findall(TEPHRA_DEFAULT_CONFIG)
    assert len(found) == TEPHRA_DEFAULT_CONFIG.count("timeBudgetSeconds") >= 1
    cfg = load_config(_script().TIME_BUDGET.sub("timeBudgetSeconds: 0", TEPHRA_DEFAULT_CONFIG))
    budgets = [args.get("timeBudgetSeconds") for args in cfg.configurations.values()]
    assert len(budgets) == 3 and all(b == 0 for b in budgets)


def test_cachegrinds_summary_is_read() -> None:
    summary = "==1== \n==1== I   refs:      3,681,312,554\n"
    found = _script().I_REFS.search(summary)
    assert found is not None and found.group(1) == "3,681,312,554"
