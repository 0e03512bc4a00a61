"""`tephra scheduler` exits non-zero once it has lost its Lease (issue 30, the real chaos tier).

A replica whose leadership is lost stops its scheduling loop and must be restarted with fresh
state; it used to exit 0, which a supervisor restarting on failure only (systemd
`Restart=on-failure`, a pod with `restartPolicy: OnFailure`) takes for a clean stop, leaving one
replica fewer for good. kube-scheduler exits 1 too. The real control plane's chaos test pauses
a leader past its lease and checks the exit code of the process; this is the quick check.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry

import batch.kube.service as service_module
from batch.cli.scheduler import scheduler


class _Service:
    """A scheduler service whose run ends as a lost (or not lost) leadership ends it."""

    lose = True

    def __init__(self, options: Any) -> None:
        self.options = options
        self.metrics = type("M", (), {"registry": CollectorRegistry()})()
        self.lost_leadership = False

    async def run(self, stop: asyncio.Event) -> None:
        self.lost_leadership = type(self).lose


@pytest.mark.parametrize(("lose", "code"), [(True, 1), (False, 0)])
def test_the_scheduler_exits_1_after_losing_its_lease(
    monkeypatch: pytest.MonkeyPatch, lose: bool, code: int
) -> None:
    monkeypatch.setattr(service_module, "SchedulerService", _Service)
    monkeypatch.setattr(_Service, "lose", lose)
    args = ["--leader-elect", "--metrics-bind-address", "0", "--healthz-port", "0"]
    result = CliRunner().invoke(scheduler, args)
    assert result.exit_code == code, result.output
    assert ("lost the leader lease" in result.output) is lose
