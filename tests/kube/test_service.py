"""The scheduler service against the sandbox over HTTP: gangs are bound whole or not at all."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from batch.kube.service import SchedulerComponent, SchedulerOptions
from batch.sandbox.nodes import make_nodes
from batch.sandbox.testing import SandboxHandle, run_sandbox
from tests.waiting import wait_for

pytestmark = pytest.mark.xdist_group("kube-service")

GROUP = "scheduling.volcano.sh"


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxHandle]:
    scheduler = SchedulerComponent(SchedulerOptions(schedule_period=0.2))
    with run_sandbox(
        nodes=make_nodes(count=2, gpus=8, cpu="32", memory="256Gi"), components=[scheduler]
    ) as sb:
        yield sb


def podgroup(name: str, min_member: int, queue: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": min_member, "queue": queue},
    }


def pod(name: str, group: str, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {"scheduling.k8s.io/group-name": group},
        },
        "spec": {
            "schedulerName": "volcano",
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {
                        "requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)},
                        "limits": {"nvidia.com/gpu": str(gpus)},
                    },
                }
            ],
        },
    }


def submit(sb: SandboxHandle, name: str, size: int, gpus: int, queue: str = "default") -> None:
    api = sb.api_client()
    custom = client.CustomObjectsApi(api)
    core = client.CoreV1Api(api)
    custom.create_namespaced_custom_object(
        GROUP, "v1beta1", "default", "podgroups", podgroup(name, size, queue)
    )
    for i in range(size):
        core.create_namespaced_pod("default", pod(f"{name}-{i}", name, gpus))


def nodes_of(sb: SandboxHandle, prefix: str) -> list[str | None]:
    core = client.CoreV1Api(sb.api_client())
    pods = core.list_namespaced_pod("default").items
    return [p.spec.node_name for p in pods if p.metadata.name.startswith(prefix + "-")]


def pg_status(sb: SandboxHandle, name: str) -> dict[str, Any]:
    custom = client.CustomObjectsApi(sb.api_client())
    obj = custom.get_namespaced_custom_object(GROUP, "v1beta1", "default", "podgroups", name)
    return dict(obj.get("status") or {})


def scheduler_state(sb: SandboxHandle, group: str) -> dict[str, Any]:
    """What a timed-out wait reports: the PodGroup's status and the scheduler's view."""
    scheduler = sb.components[0]
    assert isinstance(scheduler, SchedulerComponent) and scheduler.service is not None
    service = scheduler.service
    decisions = service._last_decisions
    return {
        "podgroup": pg_status(sb, group),
        "sessions": service.sessions,
        "memo_hits": service.scheduler.memo_hits,
        "since_last_session_s": round(time.time() - service.last_session_at, 1),
        "pending_reason": decisions.pending_reasons.get(f"default/{group}") if decisions else None,
        "crashed": repr(scheduler.error),
        "pods": {
            p.metadata.name: (p.status.phase, p.spec.node_name, p.status.nominated_node_name)
            for p in client.CoreV1Api(sb.api_client()).list_namespaced_pod("default").items
        },
    }


def test_gang_that_fits_is_bound_whole(sandbox: SandboxHandle) -> None:
    submit(sandbox, "fits", 4, 2)
    bound = wait_for(
        lambda: all(nodes_of(sandbox, "fits")) and nodes_of(sandbox, "fits"),
        what="all 4 pods bound",
    )
    assert len(bound) == 4
    wait_for(
        lambda: pg_status(sandbox, "fits").get("phase") in ("Running", "Inqueue"),
        what="PodGroup status written",
    )


def test_gang_that_cannot_fit_binds_nothing(sandbox: SandboxHandle) -> None:
    # 2 nodes x 8 GPUs, 8 already used by "fits": a 3 x 8-GPU gang can never fit.
    submit(sandbox, "toobig", 3, 8)
    wait_for(
        lambda: pg_status(sandbox, "toobig").get("conditions"), what="an Unschedulable condition"
    )
    time.sleep(1.0)  # several sessions
    assert nodes_of(sandbox, "toobig") == [None, None, None]
    conditions = pg_status(sandbox, "toobig")["conditions"]
    assert any(c["type"] == "Unschedulable" for c in conditions), conditions
    events = client.CoreV1Api(sandbox.api_client()).list_namespaced_event("default").items
    assert any(e.involved_object.name == "toobig" and e.reason == "Unschedulable" for e in events)
    # One event on the gang's first pending pod, with the reason text, named as kube-scheduler
    # names it (FailedScheduling).
    pod_events = [
        e for e in events if e.involved_object.kind == "Pod" and e.reason == "FailedScheduling"
    ]
    assert len(pod_events) == 1, pod_events
    assert pod_events[0].involved_object.name.startswith("toobig-")
    assert pod_events[0].message


def events_about(sb: SandboxHandle, obj: Any) -> list[Any]:
    """The events `kubectl describe` shows for `obj`: it selects them by kind, name and uid."""
    meta = obj["metadata"]
    selector = ",".join(
        [
            f"involvedObject.kind={obj['kind']}",
            f"involvedObject.name={meta['name']}",
            f"involvedObject.namespace={meta['namespace']}",
            f"involvedObject.uid={meta['uid']}",
        ]
    )
    core = client.CoreV1Api(sb.api_client())
    return list(core.list_namespaced_event(meta["namespace"], field_selector=selector).items)


def test_unschedulable_events_name_their_object_as_kubectl_looks_for_it(
    sandbox: SandboxHandle,
) -> None:
    """Issue 15, item 2: `kubectl describe pg` showed `Events: <none>`, the scheduler's events
    carrying no involvedObject.uid; apiVersion and resourceVersion are filled as kube-scheduler
    fills them."""
    submit(sandbox, "evt-toobig", 1, 16)
    api = sandbox.api_client()
    pg = client.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, "v1beta1", "default", "podgroups", "evt-toobig"
    )
    pod = api.sanitize_for_serialization(
        client.CoreV1Api(api).read_namespaced_pod("evt-toobig-0", "default")
    )
    for obj, api_version in ((pg, f"{GROUP}/v1beta1"), (pod, "v1")):
        events = wait_for(
            lambda obj=obj: events_about(sandbox, obj),
            what=f"the {obj['kind']}'s unschedulable event",
            timeout=20,
            explain=lambda: [
                e.involved_object
                for e in client.CoreV1Api(api).list_namespaced_event("default").items
            ],
        )
        want = "Unschedulable" if obj["kind"] == "PodGroup" else "FailedScheduling"
        assert {e.reason for e in events} == {want}
        involved = events[0].involved_object
        assert involved.api_version == api_version
        assert involved.resource_version, involved


def pod_scheduled(sb: SandboxHandle, name: str) -> dict[str, Any] | None:
    core = client.CoreV1Api(sb.api_client())
    got = sb.api_client().sanitize_for_serialization(core.read_namespaced_pod(name, "default"))
    for cond in got.get("status", {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled":
            return dict(cond)
    return None


def test_pending_pods_carry_cluster_autoscalers_condition(sandbox: SandboxHandle) -> None:
    """Issue 34.2: cluster-autoscaler scales up for a pod whose PodScheduled condition is False
    with reason Unschedulable (its `IsPodUnschedulable`); every pod of a gang that cannot be
    placed gets it, with the scheduler's reason as its message."""
    submit(sandbox, "ca-toobig", 2, 16)
    for i in range(2):
        cond = wait_for(
            lambda i=i: pod_scheduled(sandbox, f"ca-toobig-{i}"),
            what="a PodScheduled condition",
            explain=lambda: scheduler_state(sandbox, "ca-toobig"),
        )
        assert (cond["status"], cond["reason"]) == ("False", "Unschedulable"), cond
        assert cond["message"], cond


def test_a_bound_pod_is_scheduled_with_kube_schedulers_event(sandbox: SandboxHandle) -> None:
    """Issue 34.3: a bound pod's PodScheduled turns True (the binding does it), it gets the
    Normal event `Scheduled` "Successfully assigned ns/pod to node", and its PodGroup, once
    its gang is ready, Volcano's Normal event `Scheduled` "pod group is ready"."""
    submit(sandbox, "sch-ok", 1, 1)
    [node] = wait_for(lambda: [n for n in nodes_of(sandbox, "sch-ok") if n], what="bound")
    assert (pod_scheduled(sandbox, "sch-ok-0") or {}).get("status") == "True"
    api = sandbox.api_client()
    pod_obj = api.sanitize_for_serialization(
        client.CoreV1Api(api).read_namespaced_pod("sch-ok-0", "default")
    )
    [event] = wait_for(
        lambda: [e for e in events_about(sandbox, pod_obj) if e.reason == "Scheduled"],
        what="the pod's Scheduled event",
    )
    assert event.type == "Normal"
    assert event.message == f"Successfully assigned default/sch-ok-0 to {node}"
    pg = client.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, "v1beta1", "default", "podgroups", "sch-ok"
    )
    [ready] = wait_for(
        lambda: [e for e in events_about(sandbox, pg) if e.reason == "Scheduled"],
        what="the PodGroup's ready event",
        explain=lambda: pg_status(sandbox, "sch-ok"),
    )
    assert (ready.type, ready.message) == ("Normal", "pod group is ready")


def test_an_operators_gang_that_runs_is_not_left_unschedulable(sandbox: SandboxHandle) -> None:
    """Issue 34.4: an operator creates the PodGroup first (Unschedulable True while no pod
    exists), its pods later; once they are bound the PodGroup says Scheduled True and
    Unschedulable False, not both True."""
    api = sandbox.api_client()
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, "v1beta1", "default", "podgroups", podgroup("op-gang", 2)
    )

    def conditions() -> dict[str, str]:
        return {c["type"]: c["status"] for c in pg_status(sandbox, "op-gang").get("conditions", [])}

    wait_for(lambda: conditions().get("Unschedulable") == "True", what="op-gang unschedulable")
    for i in range(2):
        client.CoreV1Api(api).create_namespaced_pod("default", pod(f"op-gang-{i}", "op-gang", 1))
    wait_for(
        lambda: conditions().get("Scheduled") == "True",
        what="op-gang scheduled",
        explain=lambda: scheduler_state(sandbox, "op-gang"),
    )
    assert conditions() == {"Scheduled": "True", "Unschedulable": "False"}


def test_default_queues_exist_and_metrics(sandbox: SandboxHandle) -> None:
    # Self-contained: under xdist the module's other tests may run on another worker.
    submit(sandbox, "m-fits", 1, 1)
    submit(sandbox, "m-toobig", 1, 16)
    wait_for(
        lambda: all(nodes_of(sandbox, "m-fits")),
        what="m-fits bound",
        explain=lambda: scheduler_state(sandbox, "m-fits"),
    )
    wait_for(lambda: pg_status(sandbox, "m-toobig").get("conditions"), what="m-toobig reason")
    custom = client.CustomObjectsApi(sandbox.api_client())
    names = {
        q["metadata"]["name"]
        for q in custom.list_cluster_custom_object(GROUP, "v1beta1", "queues")["items"]
    }
    assert {"root", "default"} <= names
    scheduler = sandbox.components[0]
    assert isinstance(scheduler, SchedulerComponent)
    assert scheduler.service is not None
    text = scheduler.service.metrics.render().decode()
    assert 'tephra_binds_total{result="bound"}' in text
    gpu = 'volcano_queue_allocated_scalar_resources{queue_name="default",resource="nvidia.com/gpu"}'
    assert gpu in text
    unschedulable = [
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("volcano_unschedule_job_count ")
    ]
    assert unschedulable and unschedulable[0] >= 1.0, text
    assert 'volcano_task_scheduling_latency_milliseconds_count{stage="Bound"}' in text
    # The fair-share figures of the session and per-plugin timings, as Volcano exports them.
    deserved = (
        'volcano_queue_deserved_scalar_resources{queue_name="default",resource="nvidia.com/gpu"}'
    )
    assert deserved in text
    assert 'volcano_queue_request_milli_cpu{queue_name="default"}' in text
    assert 'volcano_queue_share{queue_name="default"}' in text
    assert 'volcano_queue_overused{queue_name="default"}' in text
    plugin = (
        'volcano_plugin_scheduling_latency_milliseconds_count{OnSession="OnSessionOpen",'
        'plugin="proportion"}'
    )
    assert plugin in text


def queue_allocated(sb: SandboxHandle, name: str) -> dict[str, str]:
    custom = client.CustomObjectsApi(sb.api_client())
    obj = custom.get_cluster_custom_object(GROUP, "v1beta1", "queues", name)
    return dict((obj.get("status") or {}).get("allocated") or {})


def test_a_queue_whose_jobs_ended_shows_no_allocation(sandbox: SandboxHandle) -> None:
    """Issue 15, item 1: `allocated: nvidia.com/gpu: 2` stayed on the Queue (and in its
    metric) after every job of the queue ended, because the merge patch left the key out."""
    custom = client.CustomObjectsApi(sandbox.api_client())
    queue = {
        "apiVersion": f"{GROUP}/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "stale-q"},
        "spec": {"weight": 1},
    }
    custom.create_cluster_custom_object(GROUP, "v1beta1", "queues", queue)
    submit(sandbox, "stale-alloc", 1, 2, queue="stale-q")
    wait_for(
        lambda: queue_allocated(sandbox, "stale-q").get("nvidia.com/gpu") == "2",
        what="the queue's allocation written",
        explain=lambda: scheduler_state(sandbox, "stale-alloc"),
    )
    core = client.CoreV1Api(sandbox.api_client())
    core.delete_namespaced_pod("stale-alloc-0", "default", grace_period_seconds=0)
    custom.delete_namespaced_custom_object(GROUP, "v1beta1", "default", "podgroups", "stale-alloc")
    wait_for(
        lambda: "nvidia.com/gpu" not in queue_allocated(sandbox, "stale-q"),
        what="the GPU allocation removed from the queue",
        timeout=20,
        explain=lambda: queue_allocated(sandbox, "stale-q"),
    )
    scheduler = sandbox.components[0]
    assert isinstance(scheduler, SchedulerComponent) and scheduler.service is not None
    gpu = 'volcano_queue_allocated_scalar_resources{queue_name="stale-q",resource="nvidia.com/gpu"}'
    assert f"{gpu} 0.0" in scheduler.service.metrics.render().decode()


def test_ledger_hook_records_usage_samples(tmp_path: Any) -> None:
    """A scheduler with --db leaves queue usage samples in the ledger."""
    from sqlalchemy import create_engine, text

    db = f"sqlite:///{tmp_path / 'ledger.db'}"
    scheduler = SchedulerComponent(SchedulerOptions(schedule_period=0.2, db_url=db))
    with run_sandbox(nodes=make_nodes(count=1, gpus=8), components=[scheduler]) as sb:
        submit(sb, "ledgered", 2, 1)
        wait_for(lambda: all(nodes_of(sb, "ledgered")), what="pods bound")
        assert scheduler.service is not None and scheduler.service.ledger is not None
        ledger = scheduler.service.ledger
        assert ledger._sampler.sample_now() > 0
        ledger.recorder.flush()
        engine = create_engine(db)
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT queue, resource, allocated FROM queue_usage_samples")
            ).fetchall()
        engine.dispose()
    by_key = {(q, r): a for q, r, a in rows}
    assert by_key[("default", "nvidia.com/gpu")] == 2000, rows


def test_the_scheduler_runs_with_its_ledger_unreachable(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 30.2: a ledger database that does not answer delays records, never scheduling;
    /healthz and `tephra_ledger_up` say it is down."""
    import socket
    import urllib.request

    ports = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    closed, healthz = ports
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    db = f"postgresql://postgres@127.0.0.1:{closed}/tephra"
    options = SchedulerOptions(schedule_period=0.2, db_url=db, healthz_port=healthz)
    scheduler = SchedulerComponent(options)
    with run_sandbox(nodes=make_nodes(count=1, gpus=8), components=[scheduler]) as sb:
        submit(sb, "unledgered", 2, 1)
        wait_for(lambda: all(nodes_of(sb, "unledgered")), what="pods bound")
        assert scheduler.service is not None
        metrics = scheduler.service.metrics.render().decode()
        assert 'tephra_ledger_up{component="scheduler"} 0.0' in metrics
        with urllib.request.urlopen(f"http://127.0.0.1:{healthz}/healthz", timeout=5) as r:
            body = r.read().decode()
        assert body.startswith("ok\n") and "ledger down" in body, body


def test_a_stale_nomination_is_cleared_and_frees_its_node() -> None:
    """A Pending pod left with status.nominatedNodeName (a preemptor whose gang no longer fits)
    must not keep that node's resources from every other job: a session that does not pipeline
    it again clears the nomination."""
    scheduler = SchedulerComponent(SchedulerOptions(schedule_period=0.2))
    with run_sandbox(nodes=make_nodes(count=1, gpus=8), components=[scheduler]) as sb:
        core = client.CoreV1Api(sb.api_client())
        submit(sb, "stale", 2, 8)  # 2 x 8 GPUs on one 8-GPU node: never fits, never pipelined
        core.patch_namespaced_pod_status(
            "stale-0", "default", {"status": {"nominatedNodeName": "node-0"}}
        )
        submit(sb, "small", 1, 1)
        wait_for(
            lambda: all(nodes_of(sb, "small")),
            what="small bound",
            explain=lambda: scheduler_state(sb, "small"),
        )
        wait_for(
            lambda: not core.read_namespaced_pod("stale-0", "default").status.nominated_node_name,
            what="the stale nomination cleared",
        )
        assert nodes_of(sb, "stale") == [None, None]
