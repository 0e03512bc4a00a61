"""The controller shell (`operator.ControllerManager`) when the API server answers with errors.

The reconcilers are pure; what the shell does around them (reading objects, applying actions,
remembering deleted pods, counting metrics, timed requeues) is tested here against `FakeApi`.
"""

from __future__ import annotations

import asyncio
import copy
import threading
from datetime import UTC, datetime
from typing import Any

from batch.api.integration import GangSpec, WorkloadKind, WorkloadRef
from batch.controllers import constants as c
from batch.controllers.operator import ControllerManager
from batch.controllers.runtime.keys import Key, WorkQueue

from .conftest import make_job, task
from .fakeapi import FakeApi


def _manager(api: FakeApi) -> tuple[ControllerManager, list[tuple[Key, float]]]:
    mgr = ControllerManager(None, adapters=[])
    mgr.client = api  # type: ignore[assignment]
    mgr.keys.queue = WorkQueue()
    later: list[tuple[Key, float]] = []
    mgr.keys.enqueue_later = lambda key, seconds: later.append((key, seconds))  # type: ignore[method-assign]
    return mgr, later


# ---- the PodGroup controller: owners that cannot be read --------------------------------------


def _rs_pod(name: str) -> dict[str, Any]:
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "rs",
        "uid": "rs-uid",
        "controller": True,
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "ownerReferences": [owner],
        },
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "m", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
        },
    }


def test_owner_read_error_never_shrinks_the_gang() -> None:
    async def scenario() -> None:
        api = FakeApi()
        api.put(
            "ReplicaSet",
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": "rs",
                    "namespace": "ns",
                    "uid": "rs-uid",
                    "annotations": {c.GROUP_MIN_MEMBER: "4"},
                },
                "spec": {"replicas": 4},
            },
        )
        for i in range(4):
            api.put("Pod", _rs_pod(f"p{i}"))
        mgr, later = _manager(api)
        for i in range(3):
            await mgr.grouping.process_pod("ns", f"p{i}")
        pg = api.get_obj("PodGroup", "ns", "podgroup-rs-uid")
        assert pg is not None and pg["spec"]["minMember"] == 4
        for status in (503, 429, 403):
            api.fail = lambda m, kind, _n, _s, st=status: (  # type: ignore[misc]
                st if (m, kind) == ("GET", "ReplicaSet") else None
            )
            await mgr.grouping.process_pod("ns", "p3")
            pg = api.get_obj("PodGroup", "ns", "podgroup-rs-uid")
            assert pg is not None
            assert pg["spec"]["minMember"] == 4, status
            assert pg["spec"]["minResources"] == {"cpu": "4"}, status
            p3 = api.get_obj("Pod", "ns", "p3")
            assert p3 is not None
            assert c.GROUP_NAME_ANNOTATION not in (p3["metadata"].get("annotations") or {})
            assert later and later[-1][0] == ("pod", "ns", "p3")  # retried later
        # the owner is readable again: the pod joins the unchanged gang
        api.fail = lambda *_: None
        await mgr.grouping.process_pod("ns", "p3")
        p3 = api.get_obj("Pod", "ns", "p3")
        assert p3 is not None
        assert p3["metadata"]["annotations"][c.GROUP_NAME_ANNOTATION] == "podgroup-rs-uid"
        pg = api.get_obj("PodGroup", "ns", "podgroup-rs-uid")
        assert pg is not None and pg["spec"]["minMember"] == 4

    asyncio.run(scenario())


def test_owner_gone_still_groups_the_pod() -> None:
    async def scenario() -> None:
        api = FakeApi()
        api.put("Pod", _rs_pod("p0"))  # its ReplicaSet is gone (404): a group of one
        mgr, _later = _manager(api)
        await mgr.grouping.process_pod("ns", "p0")
        pg = api.get_obj("PodGroup", "ns", "podgroup-rs-uid")
        assert pg is not None and pg["spec"]["minMember"] == 1

    asyncio.run(scenario())


class _NoGangAdapter:
    """Claims pods owned by a Pod (as the Spark adapter claims executors through their driver)
    but has no gang for that pod (a notebook running the Spark driver in client mode)."""

    name = "no-gang"
    kinds = (WorkloadKind("v1", "Pod", "pods"),)

    def gang_for_workload(self, workload: Any) -> GangSpec | None:
        return None

    def workload_ref_for_pod(self, pod: Any) -> WorkloadRef | None:
        for ref in pod["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "Pod":
                return WorkloadRef("v1", "Pod", "ns", ref["name"], None, ref["uid"])
        return None

    def existing_podgroup_name(self, workload: Any) -> str | None:
        return None

    def role_of_pod(self, pod: Any) -> str | None:
        return "executor"


def test_adapter_without_a_gang_leaves_the_pod_to_the_default_path() -> None:
    async def scenario() -> None:
        api = FakeApi()
        notebook = api.put(
            "Pod",
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "nb", "namespace": "ns"}},
        )
        owner = {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "nb",
            "uid": notebook["metadata"]["uid"],
            "controller": True,
        }
        for i in (1, 2):
            executor = _rs_pod(f"exec-{i}")
            executor["metadata"]["ownerReferences"] = [owner]
            api.put("Pod", executor)
        mgr, _later = _manager(api)
        mgr.settings.adapters = [_NoGangAdapter()]
        for i in (1, 2):
            await mgr.grouping.process_pod("ns", f"exec-{i}")
        # Volcano's default: one group per controller owner, the pods annotated with it.
        name = f"podgroup-{notebook['metadata']['uid']}"
        pg = api.get_obj("PodGroup", "ns", name)
        assert pg is not None and pg["spec"]["minMember"] == 1
        for i in (1, 2):
            p = api.get_obj("Pod", "ns", f"exec-{i}")
            assert p is not None
            assert p["metadata"]["annotations"][c.GROUP_NAME_ANNOTATION] == name

    asyncio.run(scenario())


# ---- the job controller: failed writes --------------------------------------------------------

RUNNING = {
    "phase": "Running",
    "containerStatuses": [
        {"name": "main", "ready": True, "restartCount": 0, "state": {"running": {}}}
    ],
}
SUCCEEDED = {
    "phase": "Succeeded",
    "containerStatuses": [
        {
            "name": "main",
            "ready": False,
            "restartCount": 0,
            "state": {"terminated": {"exitCode": 0}},
        }
    ],
}


async def _running_job(api: FakeApi, mgr: ControllerManager) -> None:
    """Create, admit and run the job `ns/job` through the shell."""
    for _ in range(3):
        await mgr.jobs.process("ns", "job")
    (pg,) = api.of_kind("PodGroup")
    pg["status"] = {"phase": "Running"}
    for _ in range(3):
        await mgr.jobs.process("ns", "job")
    for pod in api.of_kind("Pod"):
        pod["status"] = copy.deepcopy(RUNNING)
    for _ in range(2):
        await mgr.jobs.process("ns", "job")
    job = api.get_obj("Job", "ns", "job")
    assert job is not None and job["status"]["state"]["phase"] == c.RUNNING


def _fail_status_writes(api: FakeApi, times: int, status: int = 503) -> None:
    left = {"n": times}

    def fail(method: str, kind: str, _name: str | None, sub: str | None) -> int | None:
        if (method, kind, sub) == ("PATCH", "Job", "status") and left["n"] > 0:
            left["n"] -= 1
            return status
        return None

    api.fail = fail


def test_deleted_pod_is_kept_until_a_reconcile_is_applied() -> None:
    async def scenario() -> None:
        api = FakeApi()
        api.put(
            "Job",
            make_job(
                tasks=[task("worker", 2)],
                policies=[{"event": "PodEvicted", "action": "RestartPod"}],
            ),
        )
        mgr, _later = _manager(api)
        await _running_job(api, mgr)
        # someone force-deletes worker-0; the watch says DELETED
        gone = api.objects.pop(("Pod", "ns", "job-worker-0"))
        mgr.watched.on_pod_event("DELETED", gone)
        _fail_status_writes(api, 1)
        await mgr.jobs.process("ns", "job")  # the status write fails
        assert mgr.watched.deleted_pods  # the named eviction is not lost
        for _ in range(3):
            await mgr.jobs.process("ns", "job")
        st = api.objects[("Job", "ns", "job")]["status"]
        assert st["retryCount"] == 1
        assert st["controlledResources"]["tephra.io/kill-target"] == "pod:job-worker-0:1"
        assert mgr.watched.deleted_pods == {}

    asyncio.run(scenario())


def _sample(mgr: ControllerManager, name: str, labels: dict[str, str] | None = None) -> float:
    return mgr.metrics.registry.get_sample_value(name, labels or {}) or 0.0


def test_failed_status_writes_are_counted() -> None:
    async def scenario() -> None:
        api = FakeApi()
        api.put("Job", make_job(tasks=[task("worker", 1)]))
        mgr, _later = _manager(api)
        _fail_status_writes(api, 2)
        for _ in range(3):
            await mgr.jobs.process("ns", "job")
        failures = "tephra_status_write_failures_total"
        assert _sample(mgr, failures, {"kind": "Job"}) == 2
        assert api.get_obj("Job", "ns", "job")["status"]  # written once the server took it

    asyncio.run(scenario())


def test_metrics_count_only_what_was_written() -> None:
    async def scenario() -> None:
        api = FakeApi()
        api.put("Job", make_job(tasks=[task("worker", 1)]))
        mgr, _later = _manager(api)
        left = {"n": 2}

        def fail(method: str, kind: str, _name: str | None, _sub: str | None) -> int | None:
            if (method, kind) == ("CREATE", "Pod") and left["n"] > 0:
                left["n"] -= 1
                return 500
            return None

        api.fail = fail
        await _running_job(api, mgr)
        created = [call for call in api.calls if call[:2] == ("CREATE", "Pod")]
        assert len(created) == 3  # two failed, one taken
        assert (
            _sample(mgr, "volcano_controller_job_to_pod_creation_latency_milliseconds_count") == 1
        )
        for pod in api.of_kind("Pod"):
            pod["status"] = copy.deepcopy(SUCCEEDED)
        _fail_status_writes(api, 2, status=500)
        for _ in range(4):
            await mgr.jobs.process("ns", "job")
        job = api.get_obj("Job", "ns", "job")
        assert job is not None and job["status"]["state"]["phase"] == c.COMPLETED
        labels = {"job_name": "job", "queue_name": "default"}
        assert _sample(mgr, "volcano_job_completed_phase_count", labels) == 1

    asyncio.run(scenario())


# ---- timed requeues ---------------------------------------------------------------------------


def test_timed_requeue_runs_on_the_event_loop() -> None:
    async def scenario() -> None:
        from apscheduler.schedulers.asyncio import AsyncIOScheduler

        mgr = ControllerManager(None, adapters=[])
        mgr.keys.queue = WorkQueue()
        seen: list[str] = []
        add = mgr.keys.queue.add

        def spy(key: Key) -> None:
            seen.append(threading.current_thread().name)
            add(key)

        mgr.keys.queue.add = spy  # type: ignore[method-assign]
        mgr.keys.timers = AsyncIOScheduler(timezone=UTC)
        mgr.keys.timers.start()
        try:
            waiter = asyncio.create_task(mgr.keys.queue.get())
            mgr.keys.enqueue_later(("job", "ns", "j"), 0.05)
            key = await asyncio.wait_for(waiter, timeout=5)
        finally:
            mgr.keys.timers.shutdown(wait=False)
        assert key == ("job", "ns", "j")
        assert seen == [threading.current_thread().name]

    asyncio.run(scenario())


# ---- the ledger reconcile at start (issue 20.1) ------------------------------------------------


class _Ledger:
    """The recorder's reconcile surface: candidates from the ledger, events recorded."""

    def __init__(self) -> None:
        self.live: tuple[set[str], set[str]] | None = None
        self.recorded: list[Any] = []
        self.down = False  # the database cannot be read, or has not caught up

    def flush(self, timeout: float) -> bool:
        return not self.down

    def lost_candidates(self, *, live_jobs: set[str], live_pods: set[str]) -> list[Any] | None:
        from batch.ledger import events as ev

        if self.down:
            return None
        self.live = (set(live_jobs), set(live_pods))
        at = datetime(2026, 12, 3, tzinfo=UTC)
        return [
            ev.JobPhaseChanged(
                job_uid="uid-gone", namespace="ns", name="gone", to_phase="Deleted", at=at
            ),
            # listed too late: created between the list and the lookup, it is not lost
            ev.JobPhaseChanged(
                job_uid="uid-late", namespace="ns", name="late", to_phase="Deleted", at=at
            ),
            ev.PodAttempt(pod_uid="uid-pod-gone", namespace="ns", name="p", outcome="Deleted"),
        ]

    def record(self, events: list[Any]) -> None:
        self.recorded.extend(events)


def test_initial_sync_gives_what_is_gone_a_final_transition() -> None:
    async def scenario() -> None:
        api = FakeApi()
        mgr, _later = _manager(api)
        ledger = _Ledger()
        mgr.ledger.recorder = ledger
        api.put("Job", make_job("alive"))
        late = make_job("late")
        late["metadata"]["uid"] = "uid-late"
        orig_list = api.list

        async def list_then_create(res: Any, **kw: Any) -> dict[str, Any]:
            out = await orig_list(res, **kw)
            if res.kind == "Pod":  # the job appears after the jobs were listed
                api.put("Job", late)
            return out

        api.list = list_then_create  # type: ignore[method-assign]
        await mgr._initial_sync()
        assert ledger.live is not None and "uid-late" not in ledger.live[0]
        assert sorted(getattr(e, "pod_uid", None) or e.job_uid for e in ledger.recorded) == [
            "uid-gone",
            "uid-pod-gone",
        ]

    asyncio.run(scenario())


def test_a_reconcile_the_ledger_could_not_take_at_start_runs_once_it_has_caught_up() -> None:
    """Issue 30.2: a controller that starts while the ledger is down must not skip the
    reconcile for ever; it runs once the recorder has written what waited."""

    async def scenario() -> None:
        api = FakeApi()
        mgr, _later = _manager(api)
        ledger = _Ledger()
        ledger.down = True
        mgr.ledger.recorder = ledger
        api.put("Job", make_job("alive"))
        retries: list[float] = []
        mgr.ledger.reconcile_later = retries.append  # type: ignore[method-assign]
        await mgr._initial_sync()
        assert ledger.recorded == [] and len(retries) == 1
        await mgr.ledger.reconcile_again(retries[-1])  # still down: tried again later
        assert ledger.recorded == [] and len(retries) == 2 and retries[1] > retries[0]
        ledger.down = False
        await mgr.ledger.reconcile_again(retries[-1])
        assert len(retries) == 2
        assert sorted(getattr(e, "pod_uid", None) or e.job_uid for e in ledger.recorded) == [
            "uid-gone",
            "uid-late",
            "uid-pod-gone",
        ]

    asyncio.run(scenario())


def test_a_forbidden_write_is_a_warning_event_on_the_job() -> None:
    """An ssh/svc job outside the namespaces the controller may write Secrets and Services in
    (chart: controller.jobNamespaces) got a 403 the user never saw: only the log said so."""

    async def scenario() -> None:
        api = FakeApi()
        job = api.put("Job", make_job(plugins={"svc": []}))
        mgr, later = _manager(api)
        api.fail = lambda method, kind, _n, _s: (
            403 if (method, kind) == ("CREATE", "Service") else None
        )
        await mgr.jobs.process("ns", "job")
        [event] = [e for e in api.of_kind("Event") if e["reason"] == "Forbidden"]
        assert event["type"] == "Warning"
        assert event["involvedObject"]["uid"] == job["metadata"]["uid"]
        assert "controller.jobNamespaces" in event["message"] and "Service" in event["message"]
        assert later, "still retried with backoff"
        # a transient error is not reported as forbidden
        api.fail = lambda method, kind, _n, _s: (
            503 if (method, kind) == ("CREATE", "Service") else None
        )
        await mgr.jobs.process("ns", "job")
        assert len([e for e in api.of_kind("Event") if e["reason"] == "Forbidden"]) == 1

    asyncio.run(scenario())


def test_a_job_refused_its_plugin_objects_is_pending_and_warned_once() -> None:
    """Issue 30.9: a job whose svc Service the API server forbade kept an empty phase for 24
    minutes with 37 Forbidden events. It is Pending, its state naming the refusal, one event is
    posted per refusal, and it initialises as usual once the write is allowed."""

    async def scenario() -> None:
        api = FakeApi()
        api.put("Job", make_job(plugins={"svc": []}))
        mgr, _later = _manager(api)
        api.fail = lambda method, kind, _n, _s: (
            403 if (method, kind) == ("CREATE", "Service") else None
        )
        for _ in range(10):
            await mgr.jobs.process("ns", "job")
        assert len([e for e in api.of_kind("Event") if e["reason"] == "Forbidden"]) == 1
        state = api.get_obj("Job", "ns", "job")["status"]["state"]  # type: ignore[index]
        assert (state["phase"], state["reason"]) == (c.PENDING, "Forbidden")
        assert "Service" in state["message"] and "controller.jobNamespaces" in state["message"]
        api.fail = lambda *_a: None
        await mgr.jobs.process("ns", "job")
        job = api.get_obj("Job", "ns", "job")
        assert job is not None
        assert job["status"]["state"]["phase"] == c.PENDING
        assert "reason" not in job["status"]["state"], job["status"]["state"]
        assert job["status"]["controlledResources"]["plugin-svc"] == "svc"
        assert api.of_kind("Service") and api.of_kind("PodGroup")

    asyncio.run(scenario())
