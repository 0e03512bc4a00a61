"""An asyncio event loop in a daemon thread, for synchronous callers.

`LoopThread` owns the loop's life: `start()` runs the subclass's `setup()` on the loop and
returns once it finished (raising what it raised), `stop()` ends the loop, runs `teardown()`
and the cancellation of what is left on it, and closes it. `run()` and `call()` hand work to the
loop from other threads. The sandbox, its node emulator and the dashboard run this way.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Self, TypeVar

T = TypeVar("T")

__all__ = ["LoopThread"]


class LoopThread:
    """Subclasses give `what` (for messages) and override `setup` and `teardown`."""

    what = "the event loop"
    stop_timeout = 10.0

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    async def setup(self) -> None:
        """Runs on the loop before start() returns."""

    async def teardown(self) -> None:
        """Runs on the loop once stop() ended it."""

    def _failure(self, problem: str, cause: BaseException | None) -> BaseException:
        """What start() raises when setup did not finish in time (cause None) or failed."""
        return RuntimeError(f"{self.what} {problem}" + (f": {cause}" if cause else ""))

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self.setup())
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            self._close()  # what a half-done setup started is cancelled, not left pending
            return
        self._ready.set()
        self.loop.run_forever()
        try:
            self.loop.run_until_complete(self.teardown())
        finally:
            self._close()

    def _close(self) -> None:
        try:
            pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
            for t in pending:
                t.cancel()
            if pending:
                self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        finally:
            self.loop.close()

    def start(self, timeout: float = 30.0) -> Self:
        self._thread.start()
        if not self._ready.wait(timeout):
            raise self._failure("did not start in time", None)
        if self._error is not None:
            failure = self._failure("failed to start", self._error)
            if failure is self._error:
                raise failure
            raise failure from self._error
        return self

    def run(self, fn: Callable[[], Coroutine[Any, Any, T]], timeout: float = 60.0) -> T:
        """Run a coroutine made by fn on the loop and return its result."""
        fut: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(fn(), self.loop)
        return fut.result(timeout)

    def call(self, fn: Callable[[], T], timeout: float = 30.0) -> T:
        """Run fn on the loop and return its result."""
        fut: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                fut.set_result(fn())
            except BaseException as exc:
                fut.set_exception(exc)

        self.loop.call_soon_threadsafe(run)
        return fut.result(timeout)

    def stop(self, timeout: float | None = None) -> None:
        """End the loop and wait (stop_timeout by default) for its teardown."""
        if self._thread.is_alive() and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(self.stop_timeout if timeout is None else timeout)
