"""Progress of a multi-policy replay on stderr: "policy i of n", jobs done and a total ETA.

Why this exists: a whole-trace comparison runs for minutes, one policy after another, and a
bar per policy says nothing about when the whole run ends. On a terminal one line is rewritten
in place; elsewhere (CI logs, pipes) a line is written when each policy ends, so logs stay short.

The ETA assumes every remaining policy costs what the ones so far cost per job (the current one
extrapolated from its jobs done).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TextIO

from batch.sim.engine import ProgressFn
from batch.sim.report_svg import duration

__all__ = ["RunProgress"]


class RunProgress:
    """``for_policy(name)`` gives the engine's progress callback for the next policy; ``close()``
    after the last one."""

    def __init__(
        self,
        stream: TextIO,
        policies: Sequence[str],
        jobs: int,
        *,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        every_s: float = 0.5,
    ) -> None:
        self.stream = stream
        self.policies = list(policies)
        self.jobs = max(jobs, 1)
        self.tty = stream.isatty() if tty is None else tty
        self.clock = clock
        self.every_s = every_s
        self._done_s: list[float] = []  # wall seconds of each finished policy
        self._started = 0.0
        self._last_draw = -1e9
        self._current: tuple[int, str] | None = None
        self._done = (0, self.jobs)

    def for_policy(self, name: str) -> ProgressFn:
        self.close()  # the previous policy ended, even with jobs left unfinished at its horizon
        index = len(self._done_s)
        self._current = (index, name)
        self._started = self.clock()
        self._last_draw = -1e9
        self._done = (0, self.jobs)

        def update(done: int, total: int, _now: float) -> None:
            if self._current != (index, name):
                return
            self._done = (done, total)
            t = self.clock()
            if done >= total:
                self.close()
            elif self.tty and t - self._last_draw >= self.every_s:
                self._last_draw = t
                self._draw(index, name, done, total, t - self._started)

        return update

    def close(self) -> None:
        """Write the line of the policy in progress, if any (call once after the last one)."""
        if self._current is None:
            return
        index, name = self._current
        self._current = None
        self._policy_done(index, name, self._done, self.clock() - self._started)

    def _eta(self, index: int, fraction: float, elapsed: float) -> float | None:
        """Seconds left for the whole run, or None before anything can be extrapolated."""
        left_after = len(self.policies) - index - 1
        past = self._done_s
        if fraction > 0.01:
            current_total = elapsed / fraction
        elif past:
            current_total = sum(past) / len(past)
        else:
            return None
        per_policy = (sum(past) + current_total) / (len(past) + 1)
        return max(current_total - elapsed, 0.0) + left_after * per_policy

    def _head(self, index: int, name: str) -> str:
        return f"policy {index + 1} of {len(self.policies)} ({name})"

    def _draw(self, index: int, name: str, done: int, total: int, elapsed: float) -> None:
        eta = self._eta(index, done / max(total, 1), elapsed)
        line = (
            f"{self._head(index, name)}: {done}/{total} jobs done, {duration(elapsed)} elapsed, "
            f"total ETA {duration(eta) if eta is not None else '?'}"
        )
        self.stream.write("\r" + line.ljust(100)[:100])
        self.stream.flush()

    def _policy_done(self, index: int, name: str, done: tuple[int, int], elapsed: float) -> None:
        left = len(self.policies) - index - 1
        eta = self._eta(index, 1.0, elapsed) if left else 0.0
        self._done_s.append(elapsed)
        tail = f", total ETA {duration(eta)}" if left and eta is not None else ", all done"
        jobs = f"{done[0]} jobs" if done[0] >= done[1] else f"{done[0]}/{done[1]} jobs finished"
        line = f"{self._head(index, name)}: {jobs} in {duration(elapsed)}{tail}"
        self.stream.write(("\r" + line.ljust(100) if self.tty else line) + "\n")
        self.stream.flush()
