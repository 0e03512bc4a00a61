"""`tephra job why` says first, in one sentence, what blocks a job (issue 31, item 3).

Each case is the objects a cluster would hold (the PodGroup with the Unschedulable condition the
scheduler writes, its events, the queue, the pods and nodes) behind a `WhyLookup`; the first
line must name the blocker in plain words, with the scheduler's figures below it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from batch.api.fairshare import FAIR_SHARE_ANNOTATION, fair_share_value
from batch.kube.why import dedup_events, explain, explain_workload, free_by_node, pod_facts

Obj = dict[str, Any]
GPU = "nvidia.com/gpu"


def _pg(
    phase: str = "Inqueue", why: str = "", min_resources: Obj | None = None, **meta: Any
) -> Obj:
    conds = []
    if why:
        conds.append(
            {
                "type": "Unschedulable",
                "status": "True",
                "reason": "NotEnoughResources",
                "lastTransitionTime": "2026-01-01T00:00:05Z",
                "message": f"2/2 tasks in gang unschedulable: {why}",
            }
        )
    return {
        "metadata": {"name": "train-u1", "namespace": "ml", "uid": "pg1", **meta},
        "spec": {"minMember": 2, "queue": "team", "minResources": min_resources or {GPU: "16"}},
        "status": {"phase": phase, "conditions": conds},
    }


def _pod(name: str, *, gpus: int = 8, node: str = "", phase: str = "Pending", **status: Any) -> Obj:
    return {
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "main", "resources": {"requests": {GPU: str(gpus)}}}],
        },
        "status": {"phase": phase, **status},
    }


def _node(name: str, gpus: int) -> Obj:
    return {
        "metadata": {"name": name},
        "status": {
            "allocatable": {GPU: str(gpus), "cpu": "64"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _queue(name: str = "team", **extra: Any) -> Obj:
    return {"metadata": {"name": name, "annotations": {}}, "spec": {"weight": 1}, **extra}


@dataclass
class Look:
    """A WhyLookup over fixed objects."""

    pg: Obj | None
    q: Obj | None = field(default_factory=_queue)
    raw_pods: list[Obj] = field(default_factory=list)
    nodes: list[Obj] = field(default_factory=list)
    said: list[Obj] = field(default_factory=list)
    evicted: list[Obj] = field(default_factory=list)

    def podgroup(self, namespace: str, name: str) -> Obj | None:
        return self.pg

    def queue(self, name: str) -> Obj | None:
        return self.q

    def events(self, namespace: str, involved: str) -> Sequence[Obj]:
        return self.said

    def podgroups(self) -> Sequence[Obj]:
        return [self.pg] if self.pg else []

    def priorities(self) -> Mapping[str, int]:
        return {}

    def queues(self) -> Sequence[Obj]:
        return [self.q] if self.q else []

    def capacity(self) -> Mapping[str, int]:
        return {GPU: 32_000}

    def pods(self, namespace: str, group: str) -> Sequence[Obj]:
        return [pod_facts(p) for p in self.raw_pods]

    def free_by_node(self) -> Mapping[str, Mapping[str, int]]:
        return free_by_node(self.nodes, self.raw_pods)

    def evictions(self) -> Sequence[Obj]:
        return self.evicted


def _job(phase: str = "Pending", **status: Any) -> Obj:
    return {
        "metadata": {"name": "train", "namespace": "ml", "uid": "u1"},
        "spec": {"queue": "team"},
        "status": {"state": {"phase": phase}, **status},
    }


def test_fragmented_gpus_are_named_instead_of_insufficient() -> None:
    """8 GPUs are free (6 + 2) but no node holds one 8-GPU pod: not "Insufficient"."""
    why = "0/4 nodes are unavailable: 4 Insufficient nvidia.com/gpu."
    busy = [
        _pod("other-0", gpus=2, node="n0", phase="Running"),
        _pod("other-1", gpus=6, node="n1", phase="Running"),
        _pod("other-2", gpus=8, node="n2", phase="Running"),
        _pod("other-3", gpus=8, node="n3", phase="Running"),
    ]
    look = Look(
        _pg(why=why, min_resources={GPU: "8"}),
        raw_pods=[_pod("train-w-0"), *busy],
        nodes=[_node(f"n{i}", 8) for i in range(4)],
    )
    lines = explain(_job(), look)
    assert lines[0] == (
        "Job ml/train waits for room on one node: 8 GPUs are free but at most 6 on one node; "
        "each pod needs 8."
    ), lines
    assert any("Insufficient nvidia.com/gpu" in line for line in lines[1:])


def test_no_free_gpus_is_not_called_fragmentation() -> None:
    why = "0/2 nodes are unavailable: 2 Insufficient nvidia.com/gpu."
    look = Look(
        _pg(why=why),
        raw_pods=[_pod("train-w-0"), _pod("x", gpus=6, node="n0", phase="Running")],
        nodes=[_node("n0", 8)],
    )
    head = explain(_job(), look)[0]
    assert (
        head == "Job ml/train waits for nvidia.com/gpu to be freed: 2 GPUs free, its pods need 8."
    )


def test_a_gang_that_can_never_fit_says_what_and_why() -> None:
    why = (
        "can never fit: 5 pods of 8 nvidia.com/gpu each are needed at once, the nodes hold at "
        "most 4 of them"
    )
    lines = explain(_job(), Look(_pg(phase="Pending", why=why)))
    assert lines[0] == (
        "Job ml/train can never run on this cluster as it stands: 5 pods of 8 nvidia.com/gpu "
        "each are needed at once, the nodes hold at most 4 of them."
    ), lines


def test_waiting_for_the_queue_names_it_with_share_and_use_in_plain_words() -> None:
    share = fair_share_value(
        deserved={GPU: 22_000}, allocated={GPU: 24_000}, request={GPU: 40_000}, session="s"
    )
    q = _queue()
    q["metadata"]["annotations"] = {FAIR_SHARE_ANNOTATION: share}
    why = (
        "queue 'team' would pass its fair share: it holds or was admitted to 24 nvidia.com/gpu "
        "of 22 nvidia.com/gpu deserved, and queue 'prod' waits below its own share"
    )
    lines = explain(_job(), Look(_pg(phase="Pending", why=why), q=q))
    assert lines[0] == (
        "Job ml/train waits for queue team: it uses 24 GPUs of its fair share of 22, and queue "
        "prod, below its own share, goes first."
    ), lines


def test_overcommit_jargon_stays_below_the_sentence() -> None:
    why = (
        "resource in cluster is overused: needs 16 nvidia.com/gpu with 8 admitted to other "
        "jobs; cluster has 32, 38.4 with overcommit factor 1.2; 30 in use"
    )
    lines = explain(_job(), Look(_pg(phase="Pending", why=why)))
    assert lines[0] == (
        "Job ml/train waits for free GPUs: it needs 16, the cluster has 32, 30 in use or "
        "promised to admitted jobs."
    ), lines
    assert "overcommit" not in lines[0] and any("overcommit factor" in x for x in lines)


def test_quota_names_the_queue_capability() -> None:
    q = _queue(status={"allocated": {GPU: "12"}})
    q["spec"]["capability"] = {GPU: "16"}
    why = "queue resource quota insufficient: queue 'team' cannot hold the job's minResources"
    head = explain(_job(), Look(_pg(phase="Pending", why=why, min_resources={GPU: "8"}), q=q))[0]
    assert (
        head == "Job ml/train waits for queue team's quota: it may hold 16 GPUs and holds 12; "
        "the gang needs 8."
    )


def test_preemption_in_progress_names_the_victim_jobs() -> None:
    owner = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "name": "train",
        "uid": "u1",
        "controller": True,
    }
    pg = _pg(why="waiting for resources being released by preemption", ownerReferences=[owner])
    evicted = [
        {
            "reason": "Preempted",
            "message": f"pod ml/low-{i} of PyTorchJob ml/low evicted (preempt) for job ml/train",
        }
        for i in range(3)
    ] + [
        {"reason": "Preempted", "message": "pod ml/x-0 of job ml/x evicted (preempt) for job ml/y"}
    ]
    head = explain(_job(), Look(pg, evicted=evicted))[0]
    assert head == (
        "Job ml/train waits for preemption in progress: pods of PyTorchJob ml/low are being "
        "evicted for it."
    )


def test_a_failed_job_names_the_pod_node_exit_code_and_reason() -> None:
    ended = {"name": "main", "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}
    pods = [
        _pod(
            "train-w-0",
            node="n1",
            phase="Succeeded",
            containerStatuses=[{"name": "main", "state": {"terminated": {"exitCode": 0}}}],
        ),
        _pod("train-w-1", node="n3", phase="Failed", containerStatuses=[ended]),
    ]
    lines = explain(_job("Failed", failed=1), Look(_pg(phase="Completed"), raw_pods=pods))
    assert lines[0] == (
        "Job ml/train failed: pod train-w-1 on node n3 exited with code 137 (OOMKilled)."
    ), lines
    assert "  pod train-w-1 on node n3 exited with code 137 (OOMKilled), container main" in lines


def test_events_are_grouped_by_reason_and_message_with_a_count() -> None:
    said = [{"reason": "Unschedulable", "message": "0/2 tasks in gang unschedulable: x"}] * 7
    said += [{"reason": "Evict", "message": "Pod ml/a evicted: preempt", "count": 2}]
    assert dedup_events(said) == [
        "  event Unschedulable: 0/2 tasks in gang unschedulable: x (x7)",
        "  event Evict: Pod ml/a evicted: preempt (x2)",
    ]


def test_a_framework_job_is_explained_by_its_podgroup_under_its_own_name() -> None:
    owner = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "name": "pt-big",
        "uid": "p",
        "controller": True,
    }
    why = "can never fit: the gang asks for 64 nvidia.com/gpu, the cluster has 32"
    pg = _pg(phase="Pending", why=why, ownerReferences=[owner])
    lines = explain_workload(pg, Look(pg))
    assert lines[0].startswith("PyTorchJob ml/pt-big can never run on this cluster"), lines
    assert lines[1] == "PyTorchJob ml/pt-big: phase Pending, queue team"


def test_a_failed_job_whose_podgroup_is_gone_is_told_from_its_pods() -> None:
    ended = {"name": "main", "state": {"terminated": {"exitCode": 3, "reason": "Error"}}}
    pods = [_pod("train-w-0", node="n1", phase="Failed", containerStatuses=[ended])]
    lines = explain(_job("Failed"), Look(None, raw_pods=pods))
    assert lines[0] == "Job ml/train failed: pod train-w-0 on node n1 exited with code 3 (Error)."
