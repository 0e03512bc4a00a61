"""batch.gcpause: the cyclic collector off (or its collections spaced out) inside the block, as
it was after it."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from batch.gcpause import SPACED, gc_paused, gc_spaced, space_collections
from batch.model.cache import ClusterCache
from batch.scheduler import HELM_DEFAULT_CONFIG, load_config, run_session


def test_paused_inside_and_back_on_after_even_after_an_error() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_session_pauses_the_collector_unless_told_not_to(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[bool] = []
    from batch.scheduler import cycle

    real = cycle.open_session

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(gc.isenabled())
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(cycle, "open_session", spy)
    config = load_config(HELM_DEFAULT_CONFIG)
    run_session(ClusterCache(), config, now=1.8e9)
    run_session(ClusterCache(), config, now=1.8e9, pause_gc=False)
    assert seen == [False, True]
    assert gc.isenabled()


def test_spaced_collections_inside_and_the_old_thresholds_after_even_after_an_error() -> None:
    before = gc.get_threshold()
    with gc_spaced((40_000, 30, 90)):
        assert gc.get_threshold() == (40_000, 30, 90)
        assert gc.isenabled()  # still collecting: a replay's cycles are found
    assert gc.get_threshold() == before
    with pytest.raises(RuntimeError), gc_spaced():
        raise RuntimeError("boom")
    assert gc.get_threshold() == before


def test_a_replay_runs_with_spaced_collections(monkeypatch: pytest.MonkeyPatch) -> None:
    from batch.sim.engine import Simulation
    from batch.sim.runner import run_policy
    from tests.sim.conftest import cluster, job, policy, workload

    seen: list[tuple[int, int, int]] = []
    real = Simulation.run

    def spy(self: Simulation) -> object:
        seen.append(gc.get_threshold())
        return real(self)

    monkeypatch.setattr(Simulation, "run", spy)
    before = gc.get_threshold()
    done = run_policy(workload([job("a", submit=0.0, run=60.0)], cluster(1)), policy("tephra"))
    assert [r.finish is not None for r in done.result.jobs] == [True]
    assert seen == [SPACED]
    assert gc.get_threshold() == before


@pytest.fixture
def thresholds() -> Iterator[tuple[int, int, int]]:
    """The process's thresholds, put back after the test."""
    before = gc.get_threshold()
    yield before
    gc.set_threshold(*before)


def test_a_service_spaces_collections_for_good_but_never_closer(
    thresholds: tuple[int, int, int],
) -> None:
    gc.set_threshold(700, 10, 10)
    space_collections()
    assert gc.get_threshold() == SPACED
    gc.set_threshold(100_000, 50, 200)  # further apart already: left alone
    space_collections()
    assert gc.get_threshold() == (100_000, 50, 200)


def test_the_scheduler_process_runs_with_spaced_collections(
    monkeypatch: pytest.MonkeyPatch, thresholds: tuple[int, int, int]
) -> None:
    import batch.kube.service as service_module
    from batch.cli.scheduler import scheduler
    from tests.cli.test_scheduler_lease_exit import _Service

    seen: list[tuple[int, int, int]] = []

    class Spy(_Service):
        lose = False

        async def run(self, stop: asyncio.Event) -> None:
            seen.append(gc.get_threshold())

    gc.set_threshold(700, 10, 10)
    monkeypatch.setattr(service_module, "SchedulerService", Spy)
    args = ["--metrics-bind-address", "0", "--healthz-port", "0"]
    assert CliRunner().invoke(scheduler, args).exit_code == 0
    assert seen == [SPACED]
