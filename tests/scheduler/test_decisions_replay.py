"""The scheduling cycle's and the simulator's decisions still hash to the recorded digests
(see replay.py). One test per scenario: the simulated ones take 10-40 s each, and as one test
they came near pytest's 300 s timeout on a loaded machine and kept one worker busy alone."""

from __future__ import annotations

import json

import pytest

from .replay import GOLDEN, cycle_scenarios, sim_scenarios

RECORDED: dict[str, str] = json.loads(GOLDEN.read_text())
CYCLES = dict(cycle_scenarios())
SIMS = dict(sim_scenarios())


def test_every_scenario_has_a_recorded_digest() -> None:
    assert len(CYCLES) >= 20
    assert len(SIMS) >= 10
    assert sorted(RECORDED) == sorted([*CYCLES, *SIMS])


@pytest.mark.parametrize("name", sorted(CYCLES))
def test_cycle_decisions_are_unchanged(name: str) -> None:
    assert CYCLES[name]() == RECORDED[name], f"{name} decides differently"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SIMS))
def test_simulated_decisions_are_unchanged(name: str) -> None:
    assert SIMS[name]() == RECORDED[name], f"{name} decides differently"
