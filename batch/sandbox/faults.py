"""Deterministic fault injection (errors, throttling, latency, dropped watches).

One `random.Random(seed)` draws the faults in request order, so the same sequence of requests
meets the same faults on every run.
"""

from __future__ import annotations

import random

from batch.sandbox.errors import ApiError
from batch.sandbox.options import FaultOptions

_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class Faults:
    def __init__(self, options: FaultOptions) -> None:
        self.options = options
        self.rand = random.Random(options.seed)
        self.injected = 0
        self.delayed = 0.0  # seconds of latency requests waited so far (the server adds them)

    def delay(self) -> float:
        o = self.options
        if not (o.latency or o.jitter):
            return 0.0
        return o.latency + (self.rand.random() * o.jitter if o.jitter else 0.0)

    def check(self, method: str) -> None:
        """Raise the injected error for this request, if any."""
        o = self.options
        if method not in _WRITES or not (o.error_rate or o.throttle_rate):
            return
        draw = self.rand.random()
        if draw < o.error_rate:
            self.injected += 1
            raise ApiError(500, "injected fault: internal error (sandbox fault injection)")
        if draw < o.error_rate + o.throttle_rate:
            self.injected += 1
            raise ApiError(
                429,
                "injected fault: too many requests (sandbox fault injection), please try again "
                "later",
                details={"retryAfterSeconds": 1},
            )
