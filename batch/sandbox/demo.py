"""`tephra demo`: the story Tephra exists for, played on the embedded sandbox in about a minute.

Why this exists: a newcomer should see, not read, what gang scheduling changes. The demo starts
a sandbox (4 emulated nodes of 8 GPUs in 2 racks, the controllers, the scheduler and a SQLite
ledger), then plays six acts against it over the ordinary Kubernetes API, printing a table of
queues, jobs and GPUs per node as it goes and checking each claim it makes:

1. team B's small jobs hold 20 GPUs;
2. team A's 16-GPU training gang arrives: none of its pods is bound and no GPU is held while it
   cannot run, and B's jobs keep running;
3. when a rack frees up, the 16 pods start together inside that rack;
4. a high-priority job of team B preempts B's own low-priority job;
5. with weights 3:1 the two teams' GPU allocation converges to 3:1;
6. a PyTorchJob-style workload (the test plays the Kubeflow operator) gets its gang PodGroup
   without any Volcano-specific YAML;
and finally prints the ledger's reports (wait times, GPU-hours per queue, preemptions).
Everything is stopped at the end.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from batch.api.topology import RACK_LABEL
from batch.sandbox.components import default_components
from batch.sandbox.nodes import make_nodes
from batch.sandbox.options import SandboxOptions
from batch.sandbox.testing import run_sandbox

__all__ = ["DemoFailed", "run_demo"]

GPU = "nvidia.com/gpu"
RUN = "sandbox.tephra.io/run-seconds"
PYTORCHJOB_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "pytorchjobs.kubeflow.org"},
    "spec": {
        "group": "kubeflow.org",
        "names": {"kind": "PyTorchJob", "plural": "pytorchjobs", "singular": "pytorchjob"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
                "subresources": {"status": {}},
            }
        ],
    },
}


class DemoFailed(AssertionError):
    """A claim the demo makes did not hold."""


@dataclass
class _Snapshot:
    queues: dict[str, dict[str, Any]] = field(default_factory=dict)
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    pods: list[dict[str, Any]] = field(default_factory=list)
    racks: dict[str, str] = field(default_factory=dict)
    group_queue: dict[str, str] = field(default_factory=dict)  # PodGroup name -> queue

    def pods_of(self, prefix: str) -> list[dict[str, Any]]:
        return [p for p in self.pods if p["metadata"]["name"].startswith(prefix + "-")]

    def bound(self, prefix: str) -> list[dict[str, Any]]:
        return [p for p in self.pods_of(prefix) if (p.get("spec") or {}).get("nodeName")]

    def running(self, prefix: str) -> list[dict[str, Any]]:
        return [p for p in self.bound(prefix) if (p.get("status") or {}).get("phase") == "Running"]

    def running_or_done(self, job: str) -> bool:
        """Is VCJob ``job`` running, or has it completed (a short job may finish meanwhile)?"""
        state = ((self.jobs.get(job) or {}).get("status") or {}).get("state") or {}
        return bool(self.running(job)) or state.get("phase") == "Completed"


def _gpus(pod: dict[str, Any]) -> int:
    total = 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        total += int(((c.get("resources") or {}).get("requests") or {}).get(GPU, 0))
    return total


class _Story:
    def __init__(self, api: Any, out: TextIO, *, live: bool, patience: float = 1.0) -> None:
        from kubernetes import client

        # The client's generated annotations want model objects; we pass plain dicts.
        self.core: Any = client.CoreV1Api(api)
        self.custom: Any = client.CustomObjectsApi(api)
        self.sched: Any = client.SchedulingV1Api(api)
        self.ext: Any = client.ApiextensionsV1Api(api)
        self.out = out
        self.live = live
        #: how many times each act's time limit the story waits (a loaded machine needs more)
        self.patience = patience
        self.t0 = time.monotonic()
        self.checks: list[tuple[bool, str]] = []

    # -- output ---------------------------------------------------------------------------
    def say(self, text: str) -> None:
        self.out.write(f"[{time.monotonic() - self.t0:5.1f}s] {text}\n")
        self.out.flush()

    def check(self, ok: bool, claim: str) -> None:
        self.checks.append((ok, claim))
        self.say(f"  {'PASS' if ok else 'FAIL'}  {claim}")

    def snapshot(self) -> _Snapshot:
        snap = _Snapshot()
        for q in self.custom.list_cluster_custom_object(
            "scheduling.volcano.sh", "v1beta1", "queues"
        )["items"]:
            snap.queues[q["metadata"]["name"]] = q
        for j in self.custom.list_namespaced_custom_object(
            "batch.volcano.sh", "v1alpha1", "default", "jobs"
        )["items"]:
            snap.jobs[j["metadata"]["name"]] = j
        for pg in self.custom.list_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", "default", "podgroups"
        )["items"]:
            snap.group_queue[pg["metadata"]["name"]] = (pg.get("spec") or {}).get("queue", "")
        api = self.core.api_client
        snap.pods = api.sanitize_for_serialization(self.core.list_namespaced_pod("default").items)
        for n in self.core.list_node().items:
            snap.racks[n.metadata.name] = (n.metadata.labels or {}).get(RACK_LABEL, "-")
        return snap

    def table(self, snap: _Snapshot) -> str:
        lines = []
        used: dict[str, int] = dict.fromkeys(snap.racks, 0)
        for p in snap.pods:
            node = (p.get("spec") or {}).get("nodeName")
            phase = (p.get("status") or {}).get("phase")
            if node in used and phase not in ("Succeeded", "Failed"):
                used[node] += _gpus(p)
        lines.append(
            "  nodes   "
            + "  ".join(
                f"{n}({snap.racks[n]}) {'#' * used[n]}{'.' * (8 - used[n])} {used[n]}/8"
                for n in sorted(used)
            )
        )
        per_queue: dict[str, int] = {}
        for p in snap.pods:
            phase = (p.get("status") or {}).get("phase")
            if not (p.get("spec") or {}).get("nodeName") or phase in ("Succeeded", "Failed"):
                continue
            group = ((p.get("metadata") or {}).get("annotations") or {}).get(
                "scheduling.k8s.io/group-name", ""
            )
            queue = snap.group_queue.get(group, "")
            per_queue[queue] = per_queue.get(queue, 0) + _gpus(p)
        for name in ("team-a", "team-b"):
            q = snap.queues.get(name)
            if q is None:
                continue
            gpus = per_queue.get(name, 0)
            lines.append(
                f"  queue {name} weight {q['spec'].get('weight', 1)}: {gpus:2d} of 32 GPUs"
            )
        groups: dict[str, dict[str, int]] = {}
        for name, j in sorted(snap.jobs.items()):
            phase = ((j.get("status") or {}).get("state") or {}).get("phase", "") or "New"
            if phase in ("Completed", "Terminated", "Aborted", "Failed"):
                continue
            head, _, tail = name.rpartition("-")
            group = f"{head}-*" if tail.isdigit() and head.endswith("many") else name
            counts = groups.setdefault(group, {})
            if group == name:
                counts[f"{phase} {len(snap.bound(name))}/{len(snap.pods_of(name))} bound"] = 1
            else:
                counts[phase] = counts.get(phase, 0) + 1
        parts = []
        for group, counts in groups.items():
            if group.endswith("*"):
                detail = ", ".join(f"{n} {ph.lower()}" for ph, n in sorted(counts.items()))
                parts.append(f"{group}[{detail}]")
            else:
                parts.append(f"{group}[{next(iter(counts))}]")
        lines.append("  jobs    " + (" ".join(parts) or "-"))
        return "\n".join(lines)

    def show(self, snap: _Snapshot | None = None) -> _Snapshot:
        snap = snap or self.snapshot()
        self.out.write(self.table(snap) + "\n")
        self.out.flush()
        return snap

    def wait(self, what: str, predicate: Callable[[_Snapshot], bool], timeout: float) -> _Snapshot:
        timeout *= self.patience
        deadline = time.monotonic() + timeout
        last_show = 0.0
        while True:
            snap = self.snapshot()
            if predicate(snap):
                return snap
            if time.monotonic() > deadline:
                self.show(snap)
                raise DemoFailed(f"timed out after {timeout:.0f}s waiting for {what}")
            if self.live and time.monotonic() - last_show > 3.0:
                self.show(snap)
                last_show = time.monotonic()
            time.sleep(0.3)

    # -- objects --------------------------------------------------------------------------
    def queue(self, name: str, weight: int) -> None:
        self.custom.create_cluster_custom_object(
            "scheduling.volcano.sh",
            "v1beta1",
            "queues",
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {
                    "name": name,
                    # Tephra protects pods for 5 minutes by default; the demo is shorter.
                    "annotations": {
                        "tephra.io/preempt-min-runtime": "0s",
                        "tephra.io/reclaim-min-runtime": "0s",
                    },
                },
                "spec": {"weight": weight, "reclaimable": True},
            },
        )

    def priority_class(self, name: str, value: int) -> None:
        self.sched.create_priority_class(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
            }
        )

    def vcjob(
        self,
        name: str,
        *,
        queue: str,
        replicas: int,
        gpus: int,
        seconds: int,
        priority: str | None = None,
        rack_only: bool = False,
        min_available: int | None = None,
        node: str | None = None,
    ) -> None:
        spec: dict[str, Any] = {
            "queue": queue,
            "minAvailable": replicas if min_available is None else min_available,
            "schedulerName": "volcano",
            "tasks": [
                {
                    "name": "worker",
                    "replicas": replicas,
                    "template": {
                        "metadata": {"annotations": {RUN: str(seconds)}},
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "busybox",
                                    "resources": {
                                        "requests": {"cpu": "1", "memory": "1Gi", GPU: str(gpus)},
                                        "limits": {GPU: str(gpus)},
                                    },
                                }
                            ],
                        },
                    },
                }
            ],
        }
        if priority:
            spec["priorityClassName"] = priority
        if node:
            pod_spec = spec["tasks"][0]["template"]["spec"]
            pod_spec["nodeSelector"] = {"kubernetes.io/hostname": node}
        if rack_only:
            spec["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
        self.custom.create_namespaced_custom_object(
            "batch.volcano.sh",
            "v1alpha1",
            "default",
            "jobs",
            {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "metadata": {"name": name},
                "spec": spec,
            },
        )

    def pytorchjob(self, name: str, workers: int, seconds: int) -> list[str]:
        """Create a PyTorchJob and play the Kubeflow operator: create its pods, labelled."""
        self.ext.create_custom_resource_definition(PYTORCHJOB_CRD)
        time.sleep(0.3)
        template: dict[str, Any] = {
            "metadata": {"annotations": {RUN: str(seconds)}},
            "spec": {
                "schedulerName": "volcano",
                "restartPolicy": "OnFailure",
                "containers": [
                    {
                        "name": "pytorch",
                        "image": "pytorch",
                        "resources": {"requests": {"cpu": "1", GPU: "1"}, "limits": {GPU: "1"}},
                    }
                ],
            },
        }
        job = self.custom.create_namespaced_custom_object(
            "kubeflow.org",
            "v1",
            "default",
            "pytorchjobs",
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "metadata": {"name": name},
                "spec": {
                    "runPolicy": {"schedulingPolicy": {"queue": "team-a"}},
                    "pytorchReplicaSpecs": {
                        "Master": {"replicas": 1, "template": template},
                        "Worker": {"replicas": workers, "template": template},
                    },
                },
            },
        )
        owner = {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "name": name,
            "uid": job["metadata"]["uid"],
            "controller": True,
        }
        kf = "training.kubeflow.org/"
        names = []
        for role, count in (("master", 1), ("worker", workers)):
            for i in range(count):
                pod_name = f"{name}-{role}-{i}"
                self.core.create_namespaced_pod(
                    "default",
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {
                            "name": pod_name,
                            "labels": {
                                kf + "operator-name": "pytorchjob-controller",
                                kf + "job-name": name,
                                kf + "replica-type": role,
                                kf + "replica-index": str(i),
                            },
                            "annotations": dict(template["metadata"]["annotations"]),
                            "ownerReferences": [owner],
                        },
                        "spec": template["spec"],
                    },
                )
                names.append(pod_name)
        return names

    def events(self, reason: str, prefix: str) -> list[str]:
        items = self.core.list_namespaced_event("default").items
        return [
            str(e.message)
            for e in items
            if e.reason == reason and str(e.involved_object.name).startswith(prefix)
        ]

    def delete_vcjob(self, name: str) -> None:
        self.custom.delete_namespaced_custom_object(
            "batch.volcano.sh", "v1alpha1", "default", "jobs", name
        )

    def podgroup(self, name: str) -> dict[str, Any] | None:
        with contextlib.suppress(Exception):
            obj: dict[str, Any] = self.custom.get_namespaced_custom_object(
                "scheduling.volcano.sh", "v1beta1", "default", "podgroups", name
            )
            return obj
        return None

    def pending_reason(self, job: str) -> str:
        for pg in self.custom.list_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", "default", "podgroups"
        )["items"]:
            if pg["metadata"]["name"].startswith(job + "-"):
                for cond in (pg.get("status") or {}).get("conditions") or []:
                    if cond.get("type") == "Unschedulable" and cond.get("status") == "True":
                        return str(cond.get("message", ""))
        return ""


def _start_times(pods: list[dict[str, Any]]) -> list[float]:
    out = []
    for p in pods:
        started = (p.get("status") or {}).get("startTime")
        if started:
            out.append(dt.datetime.fromisoformat(started.replace("Z", "+00:00")).timestamp())
    return out


def _play(story: _Story) -> None:
    _setup(story)
    b_jobs = _act1(story)
    _act2(story, b_jobs)
    for act in (_act3, _act4, _act5, _act6):
        act(story)


def _setup(story: _Story) -> None:
    story.priority_class("batch-low", 100)
    story.priority_class("urgent", 100000)
    story.queue("team-a", 3)
    story.queue("team-b", 1)
    story.say("queues team-a (weight 3) and team-b (weight 1) created (no minimum runtime)")


def _act1(story: _Story) -> list[str]:
    """Act 1: team B fills 20 of the 32 GPUs."""
    say = story.say
    say("Act 1: team B starts five 4-GPU jobs (20 of the 32 GPUs)")
    for i, seconds in enumerate((8, 8, 8, 8)):
        story.vcjob(
            f"b-small-{i}",
            queue="team-b",
            replicas=1,
            gpus=4,
            seconds=seconds,
            priority="batch-low",
        )
    # b-long is elastic (2 pods, minAvailable 1) and pinned to node-0, in rack-0.
    story.vcjob(
        "b-long",
        queue="team-b",
        replicas=2,
        gpus=2,
        seconds=300,
        priority="batch-low",
        min_available=1,
        node="node-0",
    )
    b_jobs = [f"b-small-{i}" for i in range(4)] + ["b-long"]
    story.wait(
        "team B's jobs to run",
        lambda s: all(s.running(j) for j in b_jobs) and len(s.running("b-long")) == 2,
        30,
    )
    story.show()
    return b_jobs


def _act2(story: _Story, b_jobs: list[str]) -> None:
    """Act 2: a 16-GPU gang waits without holding GPUs."""
    say, check = story.say, story.check
    say("Act 2: team A's 16-GPU training gang arrives (16 pods x 1 GPU, one rack only)")
    story.vcjob("a-train", queue="team-a", replicas=16, gpus=1, seconds=20, rack_only=True)
    snap = story.wait("a-train's pods to exist", lambda s: len(s.pods_of("a-train")) == 16, 30)
    time.sleep(1.5)
    snap = story.show()
    held = sum(_gpus(p) for p in snap.bound("a-train"))
    check(not snap.bound("a-train"), "none of a-train's 16 pods is bound while it cannot run")
    check(held == 0, f"a-train holds {held} GPUs while it waits (kube-scheduler would hold 12)")
    check(
        all(snap.running_or_done(j) for j in b_jobs),
        "team B's small jobs keep running (or have completed)",
    )
    reason = story.pending_reason("a-train")
    if reason:
        say(f"  why is a-train pending? {reason}")


def _act3(story: _Story) -> None:
    """Act 3: the gang starts together, inside one rack."""
    say, check = story.say, story.check
    say("Act 3: B's short jobs finish; a rack frees up")
    snap = story.wait("a-train to start", lambda s: len(s.running("a-train")) == 16, 45)
    story.show(snap)
    starts = _start_times(snap.running("a-train"))
    spread = max(starts) - min(starts) if starts else 0.0
    check(spread <= 2.0, f"the 16 pods started together (within {spread:.1f}s)")
    racks = {snap.racks[p["spec"]["nodeName"]] for p in snap.bound("a-train")}
    check(len(racks) == 1, f"the gang sits inside one rack ({', '.join(sorted(racks))})")


def _act4(story: _Story) -> None:
    """Act 4: an urgent job preempts inside its queue."""
    say, check = story.say, story.check
    # Team B's fair share is 16 GPUs (team A's gang holds the other 16): b-urgent's 14 plus
    # b-long's minimum of 2 fit in it, so one of b-long's two pods has to make room.
    say("Act 4: an urgent 14-GPU job of team B arrives; only 12 GPUs are free")
    story.vcjob("b-urgent", queue="team-b", replicas=7, gpus=2, seconds=6, priority="urgent")
    snap = story.wait("b-urgent to run", lambda s: len(s.running("b-urgent")) == 7, 15)
    story.show(snap)
    preempted = story.events("Preempted", "b-long")
    check(bool(preempted), "b-urgent preempted a pod of low-priority b-long inside team-b")
    if preempted:
        say(f"  {preempted[0]}")
    check(len(snap.running("b-long")) >= 1, "b-long keeps its minimum (1 pod) running")


def _act5(story: _Story) -> None:
    """Act 5: a PyTorchJob gets its gang PodGroup."""
    say, check = story.say, story.check
    say("Act 5: a PyTorchJob (the demo plays the Kubeflow operator) needs 4 GPUs; none free")
    pods = story.pytorchjob("torch", workers=3, seconds=5)
    story.wait("its gang PodGroup", lambda s: story.podgroup("torch") is not None, 20)
    group = story.podgroup("torch") or {}
    min_member = (group.get("spec") or {}).get("minMember")
    check(min_member == 4, f"PodGroup 'torch' created automatically with minMember {min_member}")
    snap = story.wait("torch to run", lambda s: len(s.running("torch")) == 4, 40)
    starts = _start_times(snap.running("torch"))
    check(len(pods) == 4 and max(starts) - min(starts) <= 2.0, "its 4 pods started together")
    story.show(snap)


def _act6(story: _Story) -> None:
    """Act 6: reclaim brings the queues to their weights."""
    say, check = story.say, story.check
    story.wait(
        "a-train, b-urgent and torch to finish",
        lambda s: not (s.running("a-train") or s.running("b-urgent") or s.running("torch")),
        40,
    )
    story.delete_vcjob("b-long")
    say("Act 6: b-long is done; both teams submit more work than fits; weights are 3:1")
    # Team A: 2-pod training gangs. Team B: elastic jobs (4 pods, minAvailable 1). When B
    # holds more than its share, reclaim takes pods above B's jobs' minimum for A's waiting
    # gangs, never breaking a gang below its minimum.
    for i in range(14):
        story.vcjob(f"a-many-{i}", queue="team-a", replicas=2, gpus=1, seconds=120)
        if i < 7:
            story.vcjob(
                f"b-many-{i}", queue="team-b", replicas=4, gpus=1, seconds=120, min_available=1
            )

    def gpus_running(s: _Snapshot, prefix: str) -> int:
        return sum(
            _gpus(p)
            for p in s.pods
            if p["metadata"]["name"].startswith(prefix)
            and (p.get("status") or {}).get("phase") == "Running"
        )

    began = time.monotonic()
    # Team B's jobs may take free GPUs first; reclaim then moves pods above their jobs'
    # minimum back to team A. The fair share is 24:8; the check asks for at least 2:1 once the
    # cluster is full, which reclaim reaches within seconds (see docs/preemption.md).
    snap = story.wait(
        "team A to hold twice team B's GPUs",
        lambda s: (
            gpus_running(s, "a-many") >= 2 * gpus_running(s, "b-many")
            and gpus_running(s, "a-many") + gpus_running(s, "b-many") >= 28
        ),
        40,
    )
    time.sleep(2.0)
    snap = story.show()
    a, b = gpus_running(snap, "a-many"), gpus_running(snap, "b-many")
    check(
        a >= 2 * b,
        f"team A runs {a} GPUs and team B {b}: the 3:1 weights at work (fair share 24:8, "
        f"{time.monotonic() - began:.0f}s after submission)",
    )


def _report(db_url: str, out: TextIO) -> None:
    from batch.ledger.db import make_engine
    from batch.ledger.reports import Filters, preemptions, render, usage, wait_times

    now = dt.datetime.now(dt.UTC)
    filters = Filters(since=now - dt.timedelta(hours=1), until=now + dt.timedelta(minutes=1))
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            for report in (
                wait_times(conn, filters),
                usage(conn, filters, by=("queue",)),
                preemptions(conn, filters),
            ):
                text = render(report.title, report.columns, report.rows, at_least=report.at_least)
                out.write("\n" + text + "\n")
    finally:
        engine.dispose()


@contextlib.contextmanager
def _cluster(db_url: str) -> Iterator[Any]:
    options = SandboxOptions(schedule_period=0.5, db_url=db_url, max_grace_seconds=1)
    nodes = make_nodes(count=4, gpus=8, cpu="64", memory="512Gi", racks=2)
    with run_sandbox(nodes=nodes, options=options, components=default_components(options)) as sb:
        yield sb


#: something to run beside the demo's sandbox (the CLI's dashboard): given the sandbox's
#: kubeconfig and the ledger URL, a context manager that yields the URL to print
Beside = Callable[[Path, str], contextlib.AbstractContextManager[str]]


def _hold(out: TextIO) -> None:
    """Keep everything running until Ctrl-C (`--keep`), so a person can look around."""
    out.write("\nThe sandbox keeps running (--keep); Ctrl-C stops it.\n")
    out.flush()
    with contextlib.suppress(KeyboardInterrupt):
        while True:
            time.sleep(3600)


def run_demo(
    *,
    out: TextIO | None = None,
    workdir: Path | None = None,
    keep: bool = False,
    beside: Beside | None = None,
    patience: float = 1.0,
) -> int:
    """Play the demo; returns 0 when every claim held, 1 otherwise.

    `beside` runs alongside the sandbox (its URL is printed first); with `keep` the sandbox
    stays up after the story and the report until Ctrl-C. `patience` multiplies every act's
    time limit (the limits are for people watching; a test on a loaded machine waits longer)."""
    out = out or sys.stdout
    live = out.isatty() if hasattr(out, "isatty") else False
    with tempfile.TemporaryDirectory(prefix="tephra-demo-") as tmp:
        base = workdir or Path(tmp)
        db_url = f"sqlite:///{base / 'ledger.db'}"
        started = time.monotonic()
        out.write(
            "Starting the sandbox: 4 nodes x 8 GPUs in 2 racks, controllers, scheduler, "
            "ledger ...\n"
        )
        with contextlib.ExitStack() as stack:
            sb = stack.enter_context(_cluster(db_url))
            if beside is not None:
                url = stack.enter_context(beside(sb.kubeconfig_path, db_url))
                out.write(f"Dashboard: {url}\n")
            story = _Story(sb.api_client(), out, live=live, patience=patience)
            try:
                _play(story)
            except DemoFailed as exc:
                story.check(False, str(exc))
            except Exception as exc:  # an API error mid-story: report it, still clean up
                story.check(False, f"the demo stopped on an error: {exc!r}")
            for component in sb.components:
                recorder = getattr(component, "recorder", None)
                if recorder is not None:
                    recorder.flush()
                service = getattr(component, "service", None)
                if service is not None and service.ledger is not None:
                    service.ledger.recorder.flush()
            if keep:
                _report(db_url, out)
                _hold(out)
        if not keep:
            _report(db_url, out)
        passed = sum(1 for ok, _ in story.checks if ok)
        out.write(
            f"\n{passed}/{len(story.checks)} claims held; demo took "
            f"{time.monotonic() - started:.0f}s; everything stopped.\n"
        )
        return 0 if story.checks and passed == len(story.checks) else 1
