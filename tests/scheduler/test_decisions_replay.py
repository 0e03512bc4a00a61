"""The scheduling cycle's and the simulator's decisions still hash to the recorded digests
(see replay.py)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from .replay import GOLDEN, cycle_scenarios, sim_scenarios


def _changed(scenarios: list[tuple[str, Callable[[], str]]]) -> list[str]:
    recorded = json.loads(GOLDEN.read_text())
    return [name for name, run in scenarios if recorded.get(name) != run()]


def test_cycle_decisions_are_unchanged() -> None:
    scenarios = list(cycle_scenarios())
    assert len(scenarios) >= 20
    changed = _changed(scenarios)
    assert not changed, f"{len(changed)} scenarios decide differently: {changed}"


@pytest.mark.slow
def test_simulated_decisions_are_unchanged() -> None:
    scenarios = list(sim_scenarios())
    assert len(scenarios) >= 10
    changed = _changed(scenarios)
    assert not changed, f"{len(changed)} scenarios decide differently: {changed}"
