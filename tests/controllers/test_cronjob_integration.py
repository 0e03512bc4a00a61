"""The CronJob controller against the sandbox over HTTP, on a clock the test moves.

The controller's CronJob sync reads an injected clock; the test moves it past a minute boundary
and touches the CronJob (any watch event makes the controller sync it), so an every-minute
schedule runs in seconds and no start time depends on the real one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

pytest.importorskip("batch.sandbox.testing")

from kubernetes import client

from batch.controllers.cronjob import job_name
from batch.controllers.operator import ControllerManager
from batch.controllers.runner import ControllerComponent
from batch.sandbox.nodes import make_nodes
from batch.sandbox.testing import run_sandbox
from tests.waiting import wait_for

from .minisched import MiniScheduler
from .test_integration import vcjob

pytestmark = pytest.mark.xdist_group("controllers-sandbox")

B = ("batch.volcano.sh", "v1alpha1")
NS = "default"


class FakeClock:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._now = datetime.now(UTC)

    def __call__(self) -> datetime:
        with self._lock:
            return self._now

    def set(self, when: datetime) -> None:
        with self._lock:
            self._now = when


class Env:
    def __init__(self, sb: Any, clock: FakeClock, manager: ControllerManager) -> None:
        api = sb.api_client()
        self.manager = manager
        self.co = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.clock = clock
        self._nudges = 0

    def create(self, name: str, **spec: Any) -> dict[str, Any]:
        template = vcjob("x", replicas=1, **spec.pop("job", {}))
        body = {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "CronJob",
            "metadata": {"name": name},
            "spec": {
                "schedule": "* * * * *",
                "jobTemplate": {
                    "metadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}},
                    "spec": template["spec"],
                },
                **spec,
            },
        }
        created: dict[str, Any] = self.co.create_namespaced_custom_object(*B, NS, "cronjobs", body)
        return created

    def cronjob(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.co.get_namespaced_custom_object(*B, NS, "cronjobs", name)
        return found

    def status(self, name: str) -> dict[str, Any]:
        return dict(self.cronjob(name).get("status") or {})

    def patch(self, name: str, body: dict[str, Any]) -> None:
        self.co.patch_namespaced_custom_object(*B, NS, "cronjobs", name, body)

    def tick_to(self, when: datetime, name: str) -> None:
        """Move the clock, then touch the CronJob so the controller syncs it."""
        self.clock.set(when)
        self._nudges += 1
        self.patch(name, {"metadata": {"annotations": {"test/nudge": str(self._nudges)}}})

    def settle(self, change: Callable[[], None]) -> None:
        """Make a change, then wait until the controllers synced since and are idle (no sync
        that read the CronJob before the change is still running)."""
        before = self.manager.reconciles
        change()
        wait_for(lambda: self.manager.reconciles > before and self.manager.idle(), what="a sync")

    def jobs(self, cronjob: str) -> dict[str, dict[str, Any]]:
        page: dict[str, Any] = self.co.list_namespaced_custom_object(*B, NS, "jobs")
        items = page["items"]
        return {
            j["metadata"]["name"]: j
            for j in items
            if any(o.get("name") == cronjob for o in j["metadata"].get("ownerReferences") or [])
        }

    def phase(self, job: str) -> str:
        j: dict[str, Any] = self.co.get_namespaced_custom_object(*B, NS, "jobs", job)
        return str(((j.get("status") or {}).get("state") or {}).get("phase") or "")

    def reasons(self, name: str) -> set[str]:
        return {
            str(e.reason)
            for e in self.core.list_namespaced_event(NS).items
            if e.involved_object.kind == "CronJob" and e.involved_object.name == name
        }


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    nodes = make_nodes(count=1, cpu="16", memory="64Gi")
    comp = ControllerComponent()
    with run_sandbox(
        nodes=nodes, components=[comp], max_grace_seconds=0.5, ready_timeout=120
    ) as sb:
        assert comp.manager is not None
        clock = FakeClock()
        comp.manager.cronjobs.clock = clock
        sched = MiniScheduler(sb.api_client(), nodes=[n["metadata"]["name"] for n in nodes])
        sched.start()
        try:
            yield Env(sb, clock, comp.manager)
        finally:
            sched.stop()


def _boundary_after(t: datetime) -> datetime:
    return t.replace(second=0, microsecond=0) + timedelta(minutes=1)


def test_every_minute_creates_runs_and_prunes_jobs(env: Env) -> None:
    created = env.create("minutely", successfulJobsHistoryLimit=1, job={"run": 0.3})
    uid = created["metadata"]["uid"]
    first = _boundary_after(datetime.fromisoformat(created["metadata"]["creationTimestamp"]))
    env.tick_to(first + timedelta(seconds=1), "minutely")
    name1 = job_name("minutely", first)
    job = wait_for(lambda: env.jobs("minutely").get(name1), what=f"job {name1}")
    m = job["metadata"]
    assert m["labels"]["team"] == "a"
    assert m["annotations"]["note"] == "x"
    assert m["annotations"]["volcano.sh/cronjob-scheduled-timestamp"] == first.strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    assert [(o["kind"], o["name"], o["uid"], o["controller"]) for o in m["ownerReferences"]] == [
        ("CronJob", "minutely", uid, True)
    ]
    st = wait_for(lambda: env.status("minutely").get("active") and env.status("minutely"))
    assert st["lastScheduleTime"] == first.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert [(a["kind"], a["namespace"], a["name"], a["uid"]) for a in st["active"]] == [
        ("Job", NS, name1, m["uid"])
    ]
    wait_for(lambda: env.phase(name1) == "Completed", what=f"{name1} Completed", timeout=90)
    st = wait_for(
        lambda: "active" not in env.status("minutely") and env.status("minutely"),
        what="active emptied",
        explain=lambda: env.status("minutely"),
    )
    assert st["lastSuccessfulTime"]
    second = first + timedelta(minutes=1)
    env.tick_to(second + timedelta(seconds=1), "minutely")
    name2 = job_name("minutely", second)
    wait_for(lambda: env.jobs("minutely").get(name2), what=f"job {name2}")
    wait_for(lambda: env.phase(name2) == "Completed", what=f"{name2} Completed", timeout=90)
    wait_for(
        lambda: sorted(env.jobs("minutely")) == [name2],
        what="the older completed job pruned (history limit 1)",
        explain=lambda: sorted(env.jobs("minutely")),
    )
    # The event follows the delete it reports, so it may land after the job is gone.
    wait_for(
        lambda: (
            {"SuccessfulCreate", "SawCompletedJob", "SuccessfulDelete"} <= env.reasons("minutely")
        ),
        what="the create, completion and delete events",
        explain=lambda: sorted(env.reasons("minutely")),
    )


def test_forbid_then_replace_a_running_job(env: Env) -> None:
    created = env.create("guarded", concurrencyPolicy="Forbid", job={"run": 3600})
    first = _boundary_after(datetime.fromisoformat(created["metadata"]["creationTimestamp"]))
    env.tick_to(first + timedelta(seconds=1), "guarded")
    name1 = job_name("guarded", first)
    wait_for(lambda: env.status("guarded").get("active"), what="first job active")
    second = first + timedelta(minutes=1)
    env.tick_to(second + timedelta(seconds=1), "guarded")
    wait_for(lambda: "ForbidConcurrent" in env.reasons("guarded"), what="ForbidConcurrent")
    assert sorted(env.jobs("guarded")) == [name1]
    env.clock.set(second + timedelta(seconds=2))
    env.patch("guarded", {"spec": {"concurrencyPolicy": "Replace"}})
    name2 = job_name("guarded", second)
    wait_for(
        lambda: sorted(env.jobs("guarded")) == [name2],
        what="the running job replaced",
        explain=lambda: sorted(env.jobs("guarded")),
    )
    wait_for(
        lambda: [a["name"] for a in env.status("guarded").get("active") or []] == [name2],
        what="the new job listed",
    )
    env.settle(lambda: env.patch("guarded", {"spec": {"suspend": True}}))
    later = second + timedelta(minutes=5)
    env.settle(lambda: env.tick_to(later + timedelta(seconds=1), "guarded"))
    assert sorted(env.jobs("guarded")) == [name2], "suspended: nothing starts"
    env.patch("guarded", {"spec": {"suspend": False}})
    wait_for(
        lambda: job_name("guarded", later) in env.jobs("guarded"),
        what="resumed: the due start runs",
        explain=lambda: sorted(env.jobs("guarded")),
    )


def test_a_job_the_api_server_refuses_is_told_once_on_the_cronjob(env: Env) -> None:
    # issue 30 item 9: the template passes CronJob admission, but the Job made from it names a
    # queue that does not exist; the refusal was retried with backoff and told nobody
    created = env.create("refused", job={"queue": "no-such-queue"})
    first = _boundary_after(datetime.fromisoformat(created["metadata"]["creationTimestamp"]))

    def failed() -> list[str]:
        return [
            str(e.message)
            for e in env.core.list_namespaced_event(NS).items
            if e.involved_object.name == "refused" and e.reason == "FailedCreate"
        ]

    env.tick_to(first + timedelta(seconds=1), "refused")
    (message,) = wait_for(failed, what="a FailedCreate event on the CronJob")
    assert job_name("refused", first) in message and "no-such-queue" in message
    # the retries (each nudge is one more) tell nothing new
    for _ in range(3):
        env.settle(lambda: env.tick_to(first + timedelta(seconds=2), "refused"))
    assert len(failed()) == 1 and env.jobs("refused") == {}
