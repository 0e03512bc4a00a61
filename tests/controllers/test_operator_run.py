"""The lifecycle steps of ControllerManager.run: waiting for the Lease, serving, shutting down.

Fakes stand in for kopf, the Lease and the API client, so each step is seen on its own
(tests/controllers/test_leader.py runs the whole of it against a sandbox)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from batch.controllers.operator import ControllerManager
from batch.controllers.runtime.kopfwiring import kopf_settings
from batch.controllers.runtime.leadership import acquire


class FakeElector:
    def __init__(self, *, wins: bool) -> None:
        self.wins = wins
        self.lost = asyncio.Event()
        self.released = False

    async def acquire(self) -> None:
        if not self.wins:
            await asyncio.Event().wait()  # another replica holds the Lease

    async def release(self) -> None:
        self.released = True


class FakeClient:
    closed = False

    async def close(self) -> None:
        self.closed = True


class FakeScheduler:
    stopped = False

    def shutdown(self, wait: bool) -> None:
        self.stopped = True


def _manager() -> ControllerManager:
    manager = ControllerManager(None, adapters=[])
    manager.client = FakeClient()  # type: ignore[assignment]
    manager.keys.timers = FakeScheduler()
    return manager


def test_acquire_waits_as_a_standby_until_stopped() -> None:
    async def scenario() -> tuple[bool, bool]:
        standby, stop = threading.Event(), asyncio.Event()
        asyncio.get_running_loop().call_later(0.2, stop.set)
        got = await acquire(FakeElector(wins=False), stop=stop, standby=standby)  # type: ignore[arg-type]
        return got, standby.is_set()

    assert asyncio.run(scenario()) == (False, True)


def test_acquire_returns_once_the_lease_is_held() -> None:
    elector: Any = FakeElector(wins=True)
    assert asyncio.run(acquire(elector, stop=None, standby=None)) is True


def _serve(
    manager: ControllerManager, *, elector: Any, stop: Any, operator: Any, later: Any = None
) -> bool:
    """Serve with a fake kopf (`operator`), calling `later` in the loop 0.2 s in."""

    async def synced() -> None:
        manager.synced = True  # type: ignore[attr-defined]

    manager._initial_sync = synced  # type: ignore[method-assign]

    async def scenario() -> bool:
        ready, kopf_ready = threading.Event(), asyncio.Event()
        kopf_ready.set()
        if later is not None:
            asyncio.get_running_loop().call_later(0.2, later)
        task = asyncio.create_task(operator())
        try:
            lost = await manager._serve(task, kopf_ready, ready=ready, stop=stop, elector=elector)
        finally:
            task.cancel()
        assert ready.is_set() and manager.synced  # type: ignore[attr-defined]
        return lost

    return asyncio.run(scenario())


async def _forever() -> None:
    await asyncio.Event().wait()


def test_serve_works_until_stopped() -> None:
    stop = threading.Event()
    assert _serve(_manager(), elector=None, stop=stop, operator=_forever, later=stop.set) is False


def test_serve_says_when_the_lease_is_lost() -> None:
    elector = FakeElector(wins=True)
    lost = _serve(_manager(), elector=elector, stop=None, operator=_forever, later=elector.lost.set)
    assert lost is True


def test_serve_ends_with_kopf() -> None:
    async def brief() -> None:
        await asyncio.sleep(0.2)

    assert _serve(_manager(), elector=None, stop=None, operator=brief) is False


def test_serve_raises_what_kopf_failed_with_before_it_was_ready() -> None:
    manager = _manager()

    async def broken() -> None:
        raise RuntimeError("no API server")

    async def scenario() -> None:
        task = asyncio.create_task(broken())
        await manager._serve(task, asyncio.Event(), ready=None, stop=None, elector=None)

    with pytest.raises(RuntimeError, match="no API server"):
        asyncio.run(scenario())


def test_shut_down_stops_everything_and_gives_the_lease_back() -> None:
    manager = _manager()
    elector = FakeElector(wins=True)

    async def scenario() -> tuple[bool, bool]:
        operator = asyncio.create_task(asyncio.sleep(0))
        workers = [asyncio.create_task(_forever()) for _ in range(2)]
        hold = asyncio.create_task(_forever())
        await manager._shut_down(operator, workers, hold, release=elector)  # type: ignore[arg-type]
        return all(w.cancelled() for w in workers), hold.cancelled()

    assert asyncio.run(scenario()) == (True, True)
    assert elector.released and manager.client.closed  # type: ignore[union-attr]
    assert manager.keys.timers.stopped


def test_shut_down_keeps_a_lost_lease() -> None:
    manager = _manager()

    async def scenario() -> None:
        operator = asyncio.create_task(asyncio.sleep(0))
        await manager._shut_down(operator, [], None, release=None)

    asyncio.run(scenario())
    assert manager.client.closed  # type: ignore[union-attr]


def test_kopf_settings_post_no_events_and_renew_watches_each_minute() -> None:
    settings = kopf_settings()
    assert settings.posting.enabled is False and settings.scanning.disabled is True
    assert settings.watching.server_timeout == 60
    assert settings.networking.error_backoffs == [0.5, 1, 2, 5]
