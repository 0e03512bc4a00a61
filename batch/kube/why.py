"""Why a job is (or was) pending, as lines of text, from the API objects that say so: first one
sentence naming the blocker or how the job ended (`batch.kube.headline`), then the details.

Why this exists: `tephra job why` and the dashboard's job page give the same explanation, so it
lives once, below both. The reasoning is a pure function of the job and the objects a `WhyLookup`
hands it (the PodGroup, its queue, its events, the waiting PodGroups, PriorityClasses, queues and
the cluster's capacity); the CLI looks them up with the API client, the dashboard in its
watch-fed cache. Lookups are made lazily, in the order the explanation needs them, so a job that
is not pending costs no list of every PodGroup, and only a gang the scheduler found no node for
costs the nodes' free room. A workload that is not a VCJob (a PyTorchJob, RayCluster...) is
explained from the PodGroup it owns (`explain_workload`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from batch.api.fairshare import read_fair_share
from batch.api.owners import VCJOB_KIND, workload_label, workload_of
from batch.api.pods import pod_requests
from batch.api.resources import CPU, GPU, describe_amount, parse_resource_list
from batch.api.views import PodGroupView, podgroup_view
from batch.kube.headline import Blocker, blocker

__all__ = [
    "GROUP_ANNOTATION",
    "WhyLookup",
    "cluster_capacity",
    "dedup_events",
    "explain",
    "explain_workload",
    "free_by_node",
    "pod_facts",
    "queue_parent",
    "queue_position",
    "queue_share",
    "queue_weight",
    "terminated_container",
]

Obj = Mapping[str, Any]

#: minResources keys that are quota names (requests.cpu, count/pods), not resources
_QUOTA_KEYS = ("requests.", "limits.", "count/")
_FINISHED = ("Completed", "Failed", "Terminated", "Aborted")
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
#: the most distinct events shown (each with its count)
_EVENT_LINES = 5


class WhyLookup(Protocol):
    """Where `explain` finds the objects around a job (None: the object does not exist)."""

    def podgroup(self, namespace: str, name: str) -> Obj | None: ...

    def queue(self, name: str) -> Obj | None: ...

    def events(self, namespace: str, involved: str) -> Sequence[Obj]:
        """Events about the object named `involved`, oldest first (reason, message)."""

    def podgroups(self) -> Sequence[Obj]: ...

    def priorities(self) -> Mapping[str, int]:
        """PriorityClass name -> value."""

    def queues(self) -> Sequence[Obj]: ...

    def capacity(self) -> Mapping[str, int]:
        """The nodes' allocatable resources, summed (internal amounts)."""

    def pods(self, namespace: str, group: str) -> Sequence[Obj]:
        """The pods of PodGroup `group`, as `pod_facts` describes them."""

    def free_by_node(self) -> Mapping[str, Mapping[str, int]]:
        """Per schedulable node, its allocatable less what its unfinished pods request."""

    def evictions(self) -> Sequence[Obj]:
        """The scheduler's Preempted/Reclaimed events in every namespace (reason, message)."""


def cluster_capacity(allocatables: Iterable[Mapping[str, Any] | None]) -> dict[str, int]:
    """Sum the nodes' `status.allocatable` maps into internal amounts per resource."""
    total: dict[str, int] = {}
    for allocatable in allocatables:
        for res, amount in parse_resource_list(allocatable or {}).items():
            total[res] = total.get(res, 0) + amount
    return total


def _tolerant(rl: Any, _where: str) -> Mapping[str, int]:
    try:
        return parse_resource_list(rl if isinstance(rl, Mapping) else {})
    except ValueError:
        return {}


def terminated_container(status: Obj) -> dict[str, Any] | None:
    """The first container that ended with a non-zero code (else the first that ended)."""
    ended = []
    for cs in [
        *(status.get("initContainerStatuses") or []),
        *(status.get("containerStatuses") or []),
    ]:
        state = cs.get("state") or {}
        done = state.get("terminated") or (cs.get("lastState") or {}).get("terminated")
        if done:
            ended.append({"container": cs.get("name"), **done})
    ended.sort(key=lambda t: t.get("exitCode") in (0, None))
    if not ended:
        return None
    t = ended[0]
    return {"container": t["container"], "exitCode": t.get("exitCode"), "reason": t.get("reason")}


def pod_facts(pod: Obj) -> dict[str, Any]:
    """What `explain` reads of a pod: name, node, phase, requests (internal amounts), the
    container that ended (`terminated`: container, exitCode, reason) and whether it is going."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    return {
        "name": str(meta.get("name") or ""),
        "namespace": str(meta.get("namespace") or ""),
        "node": str(spec.get("nodeName") or ""),
        "phase": str(status.get("phase") or "Pending"),
        "requests": dict(pod_requests(spec, _tolerant)) if spec else {},
        "terminated": terminated_container(status),
        "message": str(status.get("reason") or status.get("message") or ""),
    }


def free_by_node(nodes: Iterable[Obj], pods: Iterable[Obj]) -> dict[str, dict[str, int]]:
    """Per schedulable, Ready node: allocatable less the requests of its unfinished pods."""
    free: dict[str, dict[str, int]] = {}
    for node in nodes:
        status, spec = node.get("status") or {}, node.get("spec") or {}
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or []
        )
        if ready and not spec.get("unschedulable"):
            name = str((node.get("metadata") or {}).get("name"))
            free[name] = dict(_tolerant(status.get("allocatable"), "allocatable"))
    for pod in pods:
        facts = pod_facts(pod)
        left = free.get(facts["node"])
        if left is None or facts["phase"] in ("Succeeded", "Failed"):
            continue
        for res, amount in facts["requests"].items():
            left[res] = left.get(res, 0) - amount
    return free


def dedup_events(events: Iterable[Obj]) -> list[str]:
    """Events as lines, one per (reason, message) with how many times it was said, in the order
    each was last said (the newest `_EVENT_LINES`)."""
    seen: dict[tuple[str, str], int] = {}
    for ev in events:
        key = (str(ev.get("reason") or ""), " ".join(str(ev.get("message") or "").split()))
        seen[key] = seen.pop(key, 0) + max(int(ev.get("count") or 1), 1)
    lines = [
        f"  event {reason}: {message}{f' (x{n})' if n > 1 else ''}"
        for (reason, message), n in seen.items()
    ]
    return lines[-_EVENT_LINES:]


def queue_position(
    podgroup: Obj, others: Sequence[Obj], priorities: Mapping[str, int]
) -> tuple[int, int]:
    """(1-based position, count) of a waiting PodGroup among its queue's waiting PodGroups,
    ordered as the scheduler's job order does: priority (high first), then creation time."""
    me = podgroup_view(podgroup)
    queue = me.queue_or_default

    def waiting(pg: PodGroupView) -> bool:
        return pg.phase in ("Pending", "Inqueue") and pg.queue_or_default == queue

    def order(pg: PodGroupView) -> tuple[int, str, str]:
        return (-priorities.get(pg.priority_class_name, 0), pg.created, pg.name)

    line = sorted((v for v in map(podgroup_view, others) if waiting(v)), key=order)
    for i, pg in enumerate(line):
        if pg.uid == me.uid:
            return i + 1, len(line)
    return 0, len(line)


def queue_parent(queue: Obj) -> str:
    """A queue's parent: spec.parent, else root (root itself has none)."""
    name = (queue.get("metadata") or {}).get("name")
    return str((queue.get("spec") or {}).get("parent") or ("" if name == "root" else "root"))


def queue_weight(queue: Obj) -> int:
    """A queue's weight as the scheduler reads it (1 when unset or not positive)."""
    weight = (queue.get("spec") or {}).get("weight")
    return weight if isinstance(weight, int) and weight > 0 else 1


def queue_share(
    queue: Obj, queues: Sequence[Obj], capacity: Mapping[str, int], resources: Sequence[str]
) -> str:
    """A queue's weight among the queues of its parent, and what it holds (status.allocated)
    of the cluster's `capacity` (internal amounts) in each of `resources`."""
    name = str((queue.get("metadata") or {}).get("name"))
    parent = queue_parent(queue)
    siblings = sum(queue_weight(q) for q in queues if queue_parent(q) == parent and queue_parent(q))
    allocated = parse_resource_list((queue.get("status") or {}).get("allocated") or {})
    held = []
    for res in resources:
        amount, total = allocated.get(res, 0), capacity.get(res, 0)
        of = f" of {describe_amount(res, total)}" if total else ""
        pct = f" ({100 * amount / total:.0f}%)" if total else ""
        held.append(f"{describe_amount(res, amount)}{of} {res}{pct}")
    return (
        f"queue {name}: weight {queue_weight(queue)} of {max(siblings, queue_weight(queue))} "
        f"among the queues under {parent or '(none)'}; holds {', '.join(held)}"
    )


def _queue_lines(queue_name: str, queue: Obj | None) -> list[str]:
    if queue is None:
        return [f"  queue {queue_name} does not exist: the scheduler ignores this job"]
    state = (queue.get("status") or {}).get("state") or "Open"
    closed = [f"  queue {queue_name} is {state}: nothing new is admitted from it"]
    return [*(closed if state != "Open" else []), *_deserved_line(queue_name, queue)]


def _deserved_line(queue_name: str, queue: Obj) -> list[str]:
    """What the queue holds of what the scheduler says it deserves (the figures it published
    on the Queue, `batch.api.fairshare`), in GPUs, or cpu on a cluster without GPUs."""
    published = read_fair_share(queue)
    if published is None:
        return []
    res = GPU if GPU in published.deserved or GPU in published.allocated else CPU
    held = describe_amount(res, published.allocated.get(res, 0))
    deserved = describe_amount(res, published.deserved.get(res, 0))
    return [
        f"  queue {queue_name}: allocated {held} of deserved {deserved} {res} "
        f"(weight {queue_weight(queue)})"
    ]


@dataclass(frozen=True, slots=True)
class _Subject:
    """The workload `explain` speaks about, whatever its kind."""

    who: str  # "Job default/train", "PyTorchJob kf/pt-big"
    namespace: str
    phase: str
    queue: str
    podgroup: str
    reason: str = ""  # the job controller's, while the job is Pending
    message: str = ""
    counts: Mapping[str, Any] = field(default_factory=dict)


#: phases in which a workload still waits for the scheduler
_WAITING = ("Pending", "Restarting", "(new)", "Inqueue", "Unknown")
_UNSCHEDULABLE_SAYS = "unschedulable: "
_VICTIM = re.compile(r"^pod \S+ of (.+?) evicted \(")


def explain(job: Obj, look: WhyLookup) -> list[str]:
    """The lines of `tephra job why` for `job` (a VCJob object as the API serves it): one
    sentence saying what blocks it (or how it ended), then the details."""
    meta, spec = job.get("metadata") or {}, job.get("spec") or {}
    namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name"))
    st = job.get("status") or {}
    state = st.get("state") or {}
    phase = str(state.get("phase") or "") or "(new)"
    pending = phase == "Pending" and bool(state.get("reason"))
    subject = _Subject(
        who=f"Job {namespace}/{name}",
        namespace=namespace,
        phase=phase,
        queue=str(spec.get("queue") or "default"),
        podgroup=f"{name}-{meta.get('uid')}",
        reason=str(state.get("reason") or "") if pending else "",
        message=str(state.get("message") or "") if pending else "",
        counts=st,
    )
    return _explain(subject, look, look.podgroup(namespace, subject.podgroup))


def explain_workload(podgroup: Obj, look: WhyLookup) -> list[str]:
    """`explain` for the gang of a workload that is not a VCJob (a PyTorchJob, RayCluster...):
    what Tephra knows of it is its PodGroup, named after the workload that owns it."""
    meta = podgroup.get("metadata") or {}
    namespace = str(meta.get("namespace") or "default")
    kind, name = workload_of(podgroup)
    subject = _Subject(
        who=f"{'Job' if kind == VCJOB_KIND else kind} {namespace}/{name}",
        namespace=namespace,
        phase=str((podgroup.get("status") or {}).get("phase") or "Pending"),
        queue=str((podgroup.get("spec") or {}).get("queue") or "default"),
        podgroup=str(meta.get("name")),
        counts=podgroup.get("status") or {},
    )
    return _explain(subject, look, podgroup)


def _explain(subject: _Subject, look: WhyLookup, pg: Obj | None) -> list[str]:
    queue = look.queue(subject.queue)
    details = [f"{subject.who}: phase {subject.phase}, queue {subject.queue}"]
    if subject.reason:  # the job controller's own reason first
        details.append(f"  {subject.reason}: {subject.message}")
    details += _queue_lines(subject.queue, queue)
    if pg is None and subject.phase in _FINISHED:  # its pods may outlive its PodGroup
        pods = look.pods(subject.namespace, subject.podgroup)
        head = _settled(subject, pods)
        return [head, *details, *_no_podgroup_lines(subject), *_failed_lines(pods)]
    if pg is None:
        return [_without_podgroup(subject), *details, *_no_podgroup_lines(subject)]
    v = podgroup_view(pg)
    pg_phase = v.phase
    details.append(f"  PodGroup {subject.podgroup}: phase {pg_phase}, minMember {v.min_member}")
    events = dedup_events(look.events(subject.namespace, subject.podgroup))
    pods = look.pods(subject.namespace, subject.podgroup)
    if pg_phase in ("Running", "Completed") or subject.phase not in _WAITING:
        head = _settled(subject, pods)
        return [head, *details, _counts_line(subject), *_failed_lines(pods), *events]
    if pg_phase == "Pending":
        details.append(
            "  waiting for the scheduler to admit the gang (enqueue): pods are not created yet"
        )
    head = _pending(subject, look, pg, queue, pods)
    details += [*_verdict(pg), *events]
    details += _waiting_lines(look, pg, queue, subject.queue)
    if not _verdict(pg) and not events:
        details.append("  no reason recorded yet (the scheduler has not examined this gang)")
    return [head, *details]


def _without_podgroup(subject: _Subject) -> str:
    if subject.reason:
        return f"{subject.who} is held by the job controller: {subject.reason}: {subject.message}"
    return f"{subject.who} waits for the job controller to create its PodGroup (gang)."


def _no_podgroup_lines(subject: _Subject) -> list[str]:
    if subject.phase in _FINISHED:
        return [f"  the job is {subject.phase}; its PodGroup was removed"]
    return ["  no PodGroup yet: the job controller has not initialised the job"]


def _counts_line(subject: _Subject) -> str:
    st = subject.counts
    return (
        f"  not pending: job {subject.phase} (running {st.get('running', 0)}, "
        f"succeeded {st.get('succeeded', 0)}, failed {st.get('failed', 0)})"
    )


def _failed(pods: Sequence[Obj]) -> list[Obj]:
    """Pods that failed or whose container ended with a non-zero code, failed first."""
    out = [
        p
        for p in pods
        if p.get("phase") == "Failed" or ((p.get("terminated") or {}).get("exitCode") or 0) != 0
    ]
    return sorted(out, key=lambda p: (p.get("phase") != "Failed", str(p.get("name"))))


def _ended(pod: Obj) -> str:
    """`pod P on node N exited with code C (Reason)`, as far as the pod says."""
    where = f"on node {pod['node']}" if pod.get("node") else "on no node"
    done = pod.get("terminated") or {}
    if done.get("exitCode") is None:
        why = pod.get("message") or "no exit code recorded"
        return f"pod {pod.get('name')} {where} failed ({why})"
    reason = f" ({done['reason']})" if done.get("reason") else ""
    return f"pod {pod.get('name')} {where} exited with code {done['exitCode']}{reason}"


def _failed_lines(pods: Sequence[Obj]) -> list[str]:
    lines = []
    for pod in _failed(pods)[:_EVENT_LINES]:
        container = (pod.get("terminated") or {}).get("container")
        lines.append(f"  {_ended(pod)}{f', container {container}' if container else ''}")
    return lines


def _settled(subject: _Subject, pods: Sequence[Obj]) -> str:
    """How a workload the scheduler no longer holds back stands, in one sentence."""
    who, phase, st = subject.who, subject.phase, subject.counts
    failed = _failed(pods)
    if phase == "Failed" or (phase in _FINISHED and failed):
        if not failed:
            return f"{who} failed; no pod of it is left to tell its exit code."
        return f"{who} {'failed' if phase == 'Failed' else phase}: {_ended(failed[0])}."
    if phase == "Completed":
        return f"{who} completed: {st.get('succeeded', 0)} pod(s) succeeded."
    if phase == "Aborted":
        return f"{who} is Aborted (suspended): `tephra job resume` starts it again."
    if phase == "Running":
        return f"{who} is running ({st.get('running', 0)} pod(s)): nothing holds it back."
    return f"{who} is {phase}: it does not wait for the scheduler."


def _verdict_text(pg: Obj, look: WhyLookup, namespace: str) -> str:
    """The scheduler's latest reason for the gang: from its Unschedulable condition (the part
    after "N/M tasks in gang unschedulable: "), else from its latest Unschedulable event."""
    v = podgroup_view(pg)
    cond = v.condition("Unschedulable", "Scheduled")
    if cond is not None and cond.get("type") == "Unschedulable":
        message = str(cond.get("message") or "")
        return message.split(_UNSCHEDULABLE_SAYS, 1)[-1]
    said = [e for e in look.events(namespace, v.name) if e.get("reason") == "Unschedulable"]
    return str(said[-1].get("message") or "") if said else ""


def _victims(look: WhyLookup, pg: Obj) -> list[str]:
    """The workloads whose pods the scheduler evicted for `pg`'s gang (its events say so)."""
    meta = pg.get("metadata") or {}
    names = (workload_label(pg), f"PodGroup {meta.get('namespace')}/{meta.get('name')}")
    found: dict[str, None] = {}
    for ev in look.evictions():
        message = str(ev.get("message") or "")
        victim = _VICTIM.match(message)
        if victim is not None and message.endswith(names):
            found[victim.group(1)] = None
    return list(found)


def _pending(
    subject: _Subject, look: WhyLookup, pg: Obj, queue: Obj | None, pods: Sequence[Obj]
) -> str:
    """What keeps a waiting gang from running, in one sentence."""
    who, q = subject.who, subject.queue
    if queue is None:
        return f"{who} waits for queue {q}, which does not exist: create it or use another queue."
    state = (queue.get("status") or {}).get("state") or "Open"
    if state != "Open":
        return f"{who} waits for queue {q}, which is {state}: it admits nothing until opened."
    if subject.reason:
        return f"{who} is held by the job controller: {subject.reason}: {subject.message}"
    verdict = _verdict_text(pg, look, subject.namespace)
    asked = parse_resource_list_tolerant(podgroup_view(pg).min_resources)
    b = Blocker(
        who=who,
        queue_name=q,
        queue=queue,
        min_resources={r: v for r, v in asked.items() if not r.startswith(_QUOTA_KEYS)},
        unplaced=[p for p in pods if not p.get("node") and p.get("phase") == "Pending"],
    )
    free = look.free_by_node() if "Insufficient" in verdict else {}
    victims = _victims(look, pg) if "released" in verdict else []
    return blocker(b, verdict, free=free, victims=victims)


def parse_resource_list_tolerant(rl: Any) -> dict[str, int]:
    """A ResourceList in internal amounts; what does not parse is left out."""
    return dict(_tolerant(rl, "minResources"))


def _verdict(pg: Obj) -> list[str]:
    """The latest scheduling verdict of the PodGroup's conditions, if any."""
    cond = podgroup_view(pg).condition("Unschedulable", "Scheduled")
    if cond is None:
        return []
    text = f"{cond.get('reason') or ''} {cond.get('message') or ''}".strip()
    return [f"  {cond.get('type')}: {text}"]


def _waiting_lines(look: WhyLookup, pg: Obj, queue: Obj | None, queue_name: str) -> list[str]:
    lines: list[str] = []
    pos, total = queue_position(pg, look.podgroups(), look.priorities())
    if pos:
        lines.append(f"  queue position: {pos} of {total} waiting in queue {queue_name}")
    if queue is not None:
        asked = podgroup_view(pg).min_resources or {}
        resources = [r for r in sorted(asked) if r != "pods" and not r.startswith(_QUOTA_KEYS)]
        share = queue_share(queue, look.queues(), look.capacity(), resources or ["cpu"])
        lines.append(f"  {share}")
    return lines
