"""A bind that fails transiently is re-sent at once, while the cache still holds its room.

The sandbox's chaos tier saw a gang partly bound for about five sessions while binds met
injected 500s: a failed bind returned its task to Pending, the room it had was free for the
next session to give to another job, and the gang's bound members waited until room came back.
`Binder.bind_one` now re-sends a bind that met a 5xx, a 429 or a dropped connection a few times
before it reports a failure; what the API server refused (403, 422...) is not re-sent, nor is
anything once the leadership guard fails.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from batch.kube.binder import Binder, BindOutcome, BindRequest
from batch.kube.client import ApiError
from batch.kube.dispatch import Dropped

REQ = BindRequest("default", "g-0", "uid-0", "node-1", "default/g")


class _Api:
    """Answers the Binding POSTs with `failures` in turn (an int: that HTTP status; an
    exception: raised), then success."""

    def __init__(self, *failures: int | Exception) -> None:
        self.failures = list(failures)
        self.posts = 0

    async def request(self, method: str, path: str, **_: Any) -> None:
        assert method == "POST" and path.endswith("/pods/g-0/binding")
        self.posts += 1
        if self.failures:
            failure = self.failures.pop(0)
            if isinstance(failure, Exception):
                raise failure
            raise ApiError(failure, {"reason": "Injected"}, "bind")


def _bind(api: _Api, guard: Any = None) -> tuple[BindRequest, BindOutcome, str]:
    binder = Binder(api)  # type: ignore[arg-type]
    binder.retry_delays = (0.0, 0.0, 0.0)
    return asyncio.run(binder.bind_one(REQ, guard=guard))


@pytest.mark.parametrize("failure", [500, 503, 429, ConnectionResetError("cut")])
def test_a_transient_failure_is_re_sent_and_the_pod_bound(failure: int | Exception) -> None:
    api = _Api(failure, failure)
    _, outcome, _ = _bind(api)
    assert outcome is BindOutcome.BOUND
    assert api.posts == 3


def test_a_refusal_is_not_re_sent() -> None:
    api = _Api(403)
    _, outcome, message = _bind(api)
    assert outcome is BindOutcome.FAILED and "403" in message
    assert api.posts == 1


def test_a_bind_failing_every_time_is_reported_failed_after_the_re_sends() -> None:
    api = _Api(*[500] * 10)
    _, outcome, _ = _bind(api)
    assert outcome is BindOutcome.FAILED
    assert api.posts == 1 + len(Binder.retry_delays)


def test_no_re_send_once_the_leadership_guard_fails() -> None:
    api = _Api(500)
    with pytest.raises(Dropped):
        _bind(api, guard=lambda: False)
    assert api.posts == 1


def test_a_conflict_is_not_re_sent() -> None:
    api = _Api(409)
    _, outcome, _ = _bind(api)
    assert outcome is BindOutcome.CONFLICT and api.posts == 1
