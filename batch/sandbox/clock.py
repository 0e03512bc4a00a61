"""The sandbox's wall clock: RFC 3339 timestamps at second precision, as the API server writes."""

from __future__ import annotations

import time
from datetime import UTC, datetime


class Clock:
    """Wall clock with cached RFC 3339 second-precision formatting."""

    def __init__(self) -> None:
        self._sec = -1
        self._text = ""

    def now(self) -> float:
        return time.time()

    def stamp(self, at: float | None = None) -> str:
        t = self.now() if at is None else at
        sec = int(t)
        if at is not None:
            return datetime.fromtimestamp(sec, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if sec != self._sec:
            self._sec = sec
            self._text = datetime.fromtimestamp(sec, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return self._text
