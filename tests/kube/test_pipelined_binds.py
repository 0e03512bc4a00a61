"""The scheduler service pipelines its binds: a session does not wait for the previous one's.

A bind is a round trip to the API server; kube-scheduler's binding cycle runs after its
scheduling cycle has assumed the pod, so the next pod is scheduled meanwhile. Tephra's cache
assumes a bind before it is sent, so the next session may run while binds are in flight. These
tests slow or fail binds with a fake binder and watch what the sessions do meanwhile.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator

import pytest

import batch.kube.service as service_module
from batch.kube.binder import Binder, BindOutcome, BindRequest
from batch.kube.service import SchedulerComponent, SchedulerOptions
from batch.sandbox.nodes import make_nodes
from batch.sandbox.testing import SandboxHandle, run_sandbox
from tests.kube.test_service import nodes_of, pg_status, scheduler_state, submit
from tests.waiting import wait_for

pytestmark = pytest.mark.xdist_group("kube-pipeline")


class FakeBinder(Binder):
    """A real binder whose binds of pods named ``slow_prefix``-* take ``delay`` seconds and whose
    first ``fail_first`` binds of pods named ``fail_prefix``-* fail after ``delay``."""

    slow_prefix = "slow-"
    fail_prefix = "flaky-"
    delay = 4.0
    fail_first = 0
    started: list[str]
    done: list[str]
    cancelled: list[str]  # binds cancelled while delayed, before anything was sent
    sent: list[str]  # binds passed on to the real binder (sent to the API server)
    lock = threading.Lock()

    async def bind_one(
        self, req: BindRequest, *, guard: Callable[[], bool] | None = None
    ) -> tuple[BindRequest, BindOutcome, str]:
        with self.lock:
            type(self).started.append(req.pod)
        try:
            if req.pod.startswith(self.fail_prefix) and type(self).fail_first > 0:
                type(self).fail_first -= 1
                await asyncio.sleep(self.delay)
                return req, BindOutcome.FAILED, "injected failure"
            if req.pod.startswith(self.slow_prefix):
                await asyncio.sleep(self.delay)
        except asyncio.CancelledError:
            with self.lock:
                type(self).cancelled.append(req.pod)
            raise
        else:
            with self.lock:
                type(self).sent.append(req.pod)
            return await super().bind_one(req, guard=guard)
        finally:
            with self.lock:
                type(self).done.append(req.pod)


@pytest.fixture
def fake_binder(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[FakeBinder]]:
    FakeBinder.started, FakeBinder.done, FakeBinder.cancelled, FakeBinder.sent = [], [], [], []
    FakeBinder.fail_first, FakeBinder.delay = 0, 4.0
    monkeypatch.setattr(service_module, "Binder", FakeBinder)
    yield FakeBinder


@pytest.fixture
def sandbox(fake_binder: type[FakeBinder]) -> Iterator[SandboxHandle]:
    scheduler = SchedulerComponent(SchedulerOptions(schedule_period=0.1))
    with run_sandbox(
        nodes=make_nodes(count=2, gpus=8, cpu="32", memory="256Gi"), components=[scheduler]
    ) as sb:
        yield sb


def test_a_session_places_a_job_while_the_previous_binds_are_in_flight(
    sandbox: SandboxHandle, fake_binder: type[FakeBinder]
) -> None:
    submit(sandbox, "slow", 2, 1)
    wait_for(lambda: len(fake_binder.started) == 2, what="the slow binds sent")
    sent_at = time.monotonic()
    submit(sandbox, "fast", 2, 1)
    wait_for(
        lambda: all(nodes_of(sandbox, "fast")),
        what="the second job bound",
        timeout=fake_binder.delay * 3,
        explain=lambda: scheduler_state(sandbox, "fast"),
    )
    took = time.monotonic() - sent_at
    assert not any(p.startswith("slow-") for p in fake_binder.done), (
        f"the second job was bound {took:.1f}s later, only after the first job's binds"
    )
    wait_for(lambda: all(nodes_of(sandbox, "slow")), what="the slow binds done")


def test_a_bind_that_fails_later_is_retried_and_its_gang_is_not_running_meanwhile(
    sandbox: SandboxHandle, fake_binder: type[FakeBinder]
) -> None:
    fake_binder.delay = 1.0
    fake_binder.fail_first = 1
    submit(sandbox, "flaky", 2, 1)
    deadline = time.monotonic() + 60
    while True:
        phase = pg_status(sandbox, "flaky").get("phase")
        bound = nodes_of(sandbox, "flaky")
        if phase == "Running":
            assert all(bound), f"PodGroup Running with pods {bound}"
            break
        assert time.monotonic() < deadline, scheduler_state(sandbox, "flaky")
        time.sleep(0.05)
    flaky_binds = [p for p in fake_binder.started if p.startswith("flaky-")]
    assert len(flaky_binds) == 3, flaky_binds  # the failed bind was sent again


def test_a_stop_during_binds_sends_nothing_more_and_the_next_scheduler_binds_without_conflict(
    sandbox: SandboxHandle, fake_binder: type[FakeBinder]
) -> None:
    first = sandbox.components[0]
    assert isinstance(first, SchedulerComponent) and first.service is not None
    submit(sandbox, "slow", 3, 1)
    wait_for(lambda: len(fake_binder.started) == 3, what="the slow binds sent")
    first.stop()
    assert first.error is None and first._thread is not None and not first._thread.is_alive()
    # the stop cut the binds at its grace instead of waiting for them: cancelled, never sent
    assert sorted(fake_binder.cancelled) == ["slow-0", "slow-1", "slow-2"], fake_binder.cancelled
    assert fake_binder.sent == [], fake_binder.sent
    time.sleep(fake_binder.delay)  # nothing left running would bind them now
    assert nodes_of(sandbox, "slow") == [None, None, None]
    assert first.service.cache.assumed == {}  # every bind not answered was undone
    fake_binder.delay = 0.0
    second = SchedulerComponent(SchedulerOptions(schedule_period=0.1))
    second.start(kubeconfig=sandbox.kubeconfig_path)
    try:
        wait_for(lambda: all(nodes_of(sandbox, "slow")), what="the next scheduler binds")
        assert second.service is not None
        text = second.service.metrics.render().decode()
        assert 'tephra_binds_total{result="bound"} 3.0' in text, text
        assert 'tephra_binds_total{result="conflict"}' not in text, text
    finally:
        second.stop()
