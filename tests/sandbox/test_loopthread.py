"""LoopThread: the one start/ready/error/stop life of the sandbox, emulator and dashboard
threads."""

from __future__ import annotations

import asyncio
import threading

import pytest

from batch.sandbox.loopthread import LoopThread


class _Probe(LoopThread):
    what = "the probe"

    def __init__(self, fail: BaseException | None = None, hang: bool = False) -> None:
        super().__init__("probe")
        self.fail, self.hang = fail, hang
        self.log: list[str] = []
        self.left: asyncio.Task[None] | None = None

    async def setup(self) -> None:
        self.log.append(f"setup on {threading.current_thread().name}")
        if self.hang:
            await asyncio.sleep(10)
        if self.fail is not None:
            raise self.fail
        self.left = asyncio.get_running_loop().create_task(asyncio.sleep(3600))

    async def teardown(self) -> None:
        self.log.append("teardown")


def test_setup_runs_on_the_loop_thread_and_teardown_on_stop() -> None:
    probe = _Probe().start()
    assert probe.log == ["setup on probe"]
    assert probe.call(lambda: threading.current_thread().name) == "probe"

    async def answer() -> int:
        return 42

    assert probe.run(answer) == 42
    probe.stop()
    assert probe.log == ["setup on probe", "teardown"]
    assert probe.loop.is_closed()
    assert probe.left is not None and probe.left.cancelled()
    probe.stop()  # a second stop does nothing


def test_a_failed_setup_is_raised_by_start() -> None:
    with pytest.raises(RuntimeError, match="the probe failed to start: boom") as info:
        _Probe(fail=ValueError("boom")).start()
    assert isinstance(info.value.__cause__, ValueError)


def test_a_slow_setup_times_out() -> None:
    with pytest.raises(RuntimeError, match="the probe did not start in time"):
        _Probe(hang=True).start(timeout=0.1)


def test_a_subclass_may_raise_the_setup_error_itself() -> None:
    class Raw(_Probe):
        def _failure(self, problem: str, cause: BaseException | None) -> BaseException:
            return cause if cause is not None else TimeoutError(problem)

    with pytest.raises(KeyError):
        Raw(fail=KeyError("k")).start()
