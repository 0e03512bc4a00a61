"""batch.gcpause: the cyclic collector off inside the block, as it was after it."""

from __future__ import annotations

import gc

import pytest

from batch.gcpause import gc_paused
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
