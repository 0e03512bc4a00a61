"""Polling for tests that watch a live sandbox: wait until a condition holds, or fail saying why.

One helper for every integration test. The default timeout is generous on purpose: CI shares its
two cores with other work (load averages above 10 have been seen), and a scheduler or controller
that is merely slowed must not read as broken. A stalled component still fails the test.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

DEFAULT_TIMEOUT = 60.0


def wait_for(
    predicate: Callable[[], Any],
    what: str = "condition",
    *,
    timeout: float = DEFAULT_TIMEOUT,
    step: float = 0.05,
    tolerate: tuple[type[BaseException], ...] = (),
    explain: Callable[[], Any] | None = None,
) -> Any:
    """Return the first truthy value of ``predicate()``; raise AssertionError after ``timeout``.

    Exceptions of the ``tolerate`` types count as "not yet" (e.g. injected API faults). On a
    timeout the message names ``what``, the last value seen and, when given, ``explain()`` (say
    the object's status) so that a failure in CI can be diagnosed from its log alone.
    """
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = predicate()
        except tolerate as exc:
            last = exc
        else:
            if last:
                return last
        if time.monotonic() > deadline:
            break
        time.sleep(step)
    message = f"timed out after {timeout:g}s waiting for {what}; last value: {last!r:.500}"
    if explain is not None:
        try:
            detail = explain()
        except Exception as exc:  # the explanation must not hide the timeout
            detail = f"(explain failed: {exc!r})"
        message += f"; state: {detail!r:.2000}"
    raise AssertionError(message)
