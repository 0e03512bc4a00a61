"""The scheduler cache: cluster state kept up to date incrementally from watch events.

``ClusterCache.apply(kind, event, obj)`` takes raw Kubernetes JSON exactly as a watch delivers it
(ADDED / MODIFIED / DELETED). Pods of every scheduler that sit on a node consume its capacity;
only pods whose ``spec.schedulerName`` is one of ``scheduler_names`` become schedulable tasks, and
they join a job only through the ``scheduling.k8s.io/group-name`` annotation (job id
``<namespace>/<podgroup>``). Between sessions, ``assume_bind`` / ``bind_failed`` / ``assume_evict``
keep the bookkeeping of dispatched decisions until the watch confirms them.

A session never copies this object graph: it copies only the node resource matrices (a few MB at
10,000 nodes) and journals every in-session status change so it can undo them on close.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from batch.api.quantity import QuantityError
from batch.api.views import as_mapping, podgroup_view
from batch.model.changes import ChangeLog
from batch.model.info import JobInfo, QueueInfo, TaskInfo, TaskTemplate
from batch.model.nodes import NodeArrays
from batch.model.parse import (
    DEFAULT_QUEUE,
    ROOT_QUEUE,
    PodFacts,
    meta_of,
    node_facts,
    parse_time,
    pod_uid,
    podgroup_id,
    queue_facts,
    same_json,
    scheduling_resources,
    spec_key,
)
from batch.model.resources import IntVec, ResourceIndex, add_column, pad
from batch.model.status import ON_NODE_STATUS, TaskStatus, pod_task_status
from batch.model.usage import QueueUsage

log = logging.getLogger(__name__)

#: a Pod or PodGroup update that changes only what a binding or a status update writes keeps
#: what was read from the previous object instead of parsing it again (``PodFacts.restatus``,
#: ``ClusterCache._podgroup_status``; off: always parse, which tests/model/test_updates.py
#: compares with)
REUSE_FACTS = True
#: the PodGroup metadata the cache reads
_PODGROUP_META = ("namespace", "name", "creationTimestamp", "annotations")
#: what the cache reads from a PodGroup's spec (``ClusterCache._podgroup_specs``): queue,
#: minimum members, minTaskMember, minResources as a vector (None when unset), priority class
_PodGroupSpec = tuple[str, int, dict[str, int], "IntVec | None", str]
_PODGROUP_SPECS = 4096

KINDS = frozenset({"Node", "Pod", "PodGroup", "Queue", "PriorityClass", "HyperNode", "Namespace"})
EVENTS = frozenset({"ADDED", "MODIFIED", "DELETED"})


class CacheError(ValueError):
    """An event the cache cannot take (unknown kind or event, invalid quantity in the object)."""


class ClusterCache:
    """Incrementally maintained cluster model (see module docstring)."""

    def __init__(
        self,
        *,
        scheduler_names: Iterable[str] = ("volcano",),
        default_queue: str = DEFAULT_QUEUE,
        node_selector: Mapping[str, str] | None = None,
    ) -> None:
        self.scheduler_names = frozenset(scheduler_names)
        self.default_queue = default_queue
        self.node_selector = dict(node_selector or {})
        self.resources = ResourceIndex()
        self.nodes = NodeArrays(self.resources.capacity)
        self.tasks: dict[str, TaskInfo] = {}
        #: the facts each task was made from (the facts of its ``raw`` object)
        self._pod_facts: dict[str, PodFacts] = {}
        #: what was read from PodGroup specs, by their marshal bytes (``parse.spec_key``)
        self._podgroup_specs: dict[bytes, _PodGroupSpec] = {}
        self.jobs: dict[str, JobInfo] = {}
        self.queues: dict[str, QueueInfo] = {}
        self.priority_classes: dict[str, tuple[int, bool]] = {}
        self.hypernodes: dict[str, Mapping[str, Any]] = {}
        self.namespaces: dict[str, Mapping[str, Any]] = {}
        self.templates: dict[tuple[Any, ...], TaskTemplate] = {}
        self.assumed: dict[str, str] = {}
        self.assumed_evict: set[str] = set()
        self.node_tasks: list[set[str]] = [set() for _ in range(self.nodes.cap)]
        self._waiting_node: dict[str, set[str]] = {}  # pods on nodes not seen yet
        self.generation = 0
        #: jobs in the order of their last change (batch.model.changes)
        self.changes = ChangeLog()
        self._ordinals = itertools.count(1)
        #: aggregates the scheduler keeps across sessions (keyed by their owner), each valid
        #: for the ``JobInfo.version`` it was computed at (see batch.scheduler.framework.aggregate)
        self.derived: dict[str, Any] = {}
        #: uids of tasks with required pod anti-affinity (checked symmetrically by predicates)
        self.anti_affinity_tasks: set[str] = set()
        #: uids of tasks whose pod carries status.nominatedNodeName
        self.nominated_tasks: set[str] = set()
        #: each queue's decayed usage, read from the ledger or the simulated run (None: unknown;
        #: batch.model.usage); only proportion's ``usageHalfLife`` reads it
        self.queue_usage: QueueUsage | None = None

    # -- public API ----------------------------------------------------------------------
    def set_queue_usage(self, usage: QueueUsage | None) -> None:
        """Replace the queues' decayed usage (a new generation when it changed: the next
        session recomputes the shares)."""
        if usage != self.queue_usage:
            self.queue_usage = usage
            self.generation += 1

    def apply(self, kind: str, event: str, obj: Mapping[str, Any]) -> None:
        """Apply one watch event (raw JSON object) to the model."""
        if kind not in KINDS:
            raise CacheError(f"unknown kind {kind!r}; expected one of {sorted(KINDS)}")
        if event not in EVENTS:
            raise CacheError(f"unknown event {event!r} for {kind}; expected ADDED/MODIFIED/DELETED")
        self.generation += 1
        try:
            self._apply(kind, event == "DELETED", obj)
        except QuantityError as exc:
            meta = meta_of(obj)
            where = "/".join(str(x) for x in (meta.get("namespace"), meta.get("name")) if x)
            raise CacheError(f"{kind} {where}: {exc}") from None

    def _apply(self, kind: str, deleted: bool, obj: Mapping[str, Any]) -> None:
        if kind == "Pod":
            self._pod(obj, deleted)
        elif kind == "Node":
            self._node(obj, deleted)
        elif kind == "PodGroup":
            self._podgroup(obj, deleted)
        elif kind == "Queue":
            self._queue(obj, deleted)
        elif kind == "PriorityClass":
            self.changes.reset()  # every job's priority may change
            name = str(meta_of(obj).get("name") or "")
            if deleted:
                self.priority_classes.pop(name, None)
            else:
                value = obj.get("value")
                self.priority_classes[name] = (
                    int(value) if isinstance(value, int) else 0,
                    bool(obj.get("globalDefault")),
                )
        elif kind == "HyperNode":
            name = str(meta_of(obj).get("name") or "")
            if deleted:
                self.hypernodes.pop(name, None)
            else:
                self.hypernodes[name] = obj
        else:  # Namespace
            name = str(meta_of(obj).get("name") or "")
            if deleted:
                self.namespaces.pop(name, None)
            else:
                self.namespaces[name] = obj

    def assume_bind(self, pod_uid: str, node_name: str) -> None:
        """A bind was dispatched: the pod is Binding on ``node_name`` until the watch shows it."""
        task = self.tasks.get(pod_uid)
        if task is None or task.status is not TaskStatus.PENDING:
            return
        self.generation += 1
        self.assumed[pod_uid] = node_name
        self._set_task(task, TaskStatus.BINDING, node_name)

    def assume_phase(self, job_id: str, phase: str) -> None:
        """A session decided the PodGroup's phase and it is on its way to the API server (or
        held back while its binds are): later sessions read it as if the watch had shown it,
        as the simulator's engine, which writes every phase at once, and Volcano, which writes
        them before its next session, have them. The PodGroup's next watch event replaces it."""
        job = self.jobs.get(job_id)
        if job is None or job.podgroup is None or job.phase == phase:
            return
        self.generation += 1
        job.phase = phase
        job.touch()

    def bind_failed(self, pod_uid: str) -> None:
        """The dispatched bind failed: the pod is Pending again."""
        node = self.assumed.pop(pod_uid, None)
        task = self.tasks.get(pod_uid)
        if node is None or task is None or task.status is not TaskStatus.BINDING:
            return
        self.generation += 1
        self._set_task(task, TaskStatus.PENDING, "")

    def assume_evict(self, pod_uid: str) -> None:
        """An eviction was dispatched: the pod is Releasing until the watch shows its deletion."""
        task = self.tasks.get(pod_uid)
        if task is None or task.status not in (TaskStatus.RUNNING, TaskStatus.BOUND):
            return
        self.generation += 1
        self.assumed_evict.add(pod_uid)
        self._set_task(task, TaskStatus.RELEASING, task.node_name)

    def evict_failed(self, pod_uid: str) -> None:
        """The dispatched eviction failed: the pod is what its last watched object says again
        (so a later session may choose it, or another victim, once more)."""
        if pod_uid not in self.assumed_evict:
            return
        self.assumed_evict.discard(pod_uid)
        task = self.tasks.get(pod_uid)
        if task is not None and task.raw is not None:
            self.apply("Pod", "MODIFIED", task.raw)

    def job_priority(self, job: JobInfo) -> int:
        """PriorityClass value of the PodGroup's priorityClassName, else the global default."""
        pc = self.priority_classes.get(job.priority_class_name)
        if pc is not None:
            return pc[0]
        for value, default in self.priority_classes.values():
            if default:
                return value
        return 0

    # -- internals: tasks on nodes -------------------------------------------------------
    def _check_dims(self) -> None:
        cap = self.resources.capacity
        if cap == self.nodes.dims:
            return
        self.nodes.grow_dims(cap)
        for t in self.tasks.values():
            t.req = pad(t.req, cap)
            t.init_req = pad(t.init_req, cap)
        for tmpl in self.templates.values():
            tmpl.fit = pad(tmpl.fit, cap)
            tmpl.req = pad(tmpl.req, cap)
            tmpl.req_list = [int(x) for x in tmpl.req]
        for job in self.jobs.values():
            job.regrow(cap)

    def _place(self, task: TaskInfo) -> None:
        """Add ``task``'s resources to its node (if it holds any)."""
        task.node_idx = -1
        if not task.node_name or task.status not in ON_NODE_STATUS:
            return
        idx = self.nodes.by_name.get(task.node_name)
        if idx is None:
            self._waiting_node.setdefault(task.node_name, set()).add(task.uid)
            return
        task.node_idx = idx
        n = self.nodes
        add_column(n.used, idx, task.req)
        if task.status is TaskStatus.RELEASING:
            add_column(n.releasing, idx, task.req)
            n.future_gen += 1
        n.touch(idx)
        if task.template.host_ports:
            n.add_ports(idx, task.template.host_ports, 1)
        if idx >= len(self.node_tasks):
            self.node_tasks.extend(set() for _ in range(n.cap - len(self.node_tasks)))
        self.node_tasks[idx].add(task.uid)

    def _unplace(self, task: TaskInfo) -> None:
        idx = task.node_idx
        if idx < 0:
            if task.node_name:
                waiting = self._waiting_node.get(task.node_name)
                if waiting is not None:
                    waiting.discard(task.uid)
            return
        n = self.nodes
        add_column(n.used, idx, task.req, -1)
        if task.status is TaskStatus.RELEASING:
            add_column(n.releasing, idx, task.req, -1)
            n.future_gen += 1
        n.touch(idx)
        if task.template.host_ports:
            n.add_ports(idx, task.template.host_ports, -1)
        self.node_tasks[idx].discard(task.uid)
        task.node_idx = -1

    def _set_task(self, task: TaskInfo, status: TaskStatus, node_name: str) -> None:
        self._unplace(task)
        job = self.jobs.get(task.job_id) if task.job_id else None
        if job is not None and task.uid in job.tasks:
            job.set_status(task, status)
        else:
            task.status = status
        task.node_name = node_name
        self._place(task)

    def _template(self, f: PodFacts) -> TaskTemplate:
        tmpl = self.templates.get(f.template_key)
        if tmpl is None:
            idx = self.resources
            req = idx.vector(f.req)
            fit = idx.vector(f.init_req)
            self._check_dims()
            req = pad(req, idx.capacity)
            fit = pad(fit, idx.capacity)
            req[0] = 1
            fit[0] = 1
            tmpl = TaskTemplate(
                key=f.template_key,
                fit=fit,
                req=req,
                node_selector=f.selector,
                required_terms=f.required_terms,
                preferred_terms=f.preferred_terms,
                tolerations=f.tolerations,
                host_ports=f.host_ports,
                pod_affinity=f.pod_affinity,
                pod_anti_affinity=f.pod_anti_affinity,
                namespace=f.namespace,
                tid=len(self.templates),
            )
            self.templates[f.template_key] = tmpl
        return tmpl

    # -- kinds ---------------------------------------------------------------------------
    def _pod(self, obj: Mapping[str, Any], deleted: bool) -> None:
        if deleted:
            uid = pod_uid(meta_of(obj))
            old = self.tasks.get(uid)
            if old is not None:
                self._remove_task(old)
            self.assumed.pop(uid, None)
            self.assumed_evict.discard(uid)
            return
        f = self._facts(obj)
        old = self.tasks.get(f.uid)
        if old is not None and self._pod_facts.get(f.uid) is f and self._restatus_task(old, f, obj):
            return
        schedulable = f.scheduler_name in self.scheduler_names
        job_id = f"{f.namespace}/{f.group}" if (schedulable and f.group) else None
        if old is not None:  # the job's minimum is figured again once the task is back in it
            self._remove_task(old, refigure=old.job_id != job_id)
        if f.node_name:
            self.assumed.pop(f.uid, None)
        assumed = self.assumed.get(f.uid)
        status = pod_task_status(
            f.phase,
            node_name=f.node_name,
            deleting=f.deleting or f.uid in self.assumed_evict,
            assumed_node=assumed,
        )
        tmpl = self._template(f)
        task = TaskInfo(
            uid=f.uid,
            namespace=f.namespace,
            name=f.name,
            job_id=job_id,
            status=status,
            node_name=f.node_name or (assumed or ""),
            req=tmpl.req,
            init_req=tmpl.fit,
            template=tmpl,
            best_effort=f.best_effort,
            priority=f.priority,
            preemptable=f.preemptable,
            role=f.role,
            gated=f.gated,
            schedulable=schedulable,
            creation=f.creation,
            task_index=f.task_index,
            nominated_node=f.nominated_node,
            preemption_policy=f.preemption_policy,
            priority_class_name=f.priority_class_name,
            labels=f.labels,
            raw=obj,
        )
        self.tasks[task.uid] = task
        self._pod_facts[task.uid] = f
        if tmpl.pod_anti_affinity:
            self.anti_affinity_tasks.add(task.uid)
        if task.nominated_node:
            self.nominated_tasks.add(task.uid)
        if job_id is not None:
            job = self.jobs.get(job_id) or self._new_job(job_id, f.namespace, f.group)
            job.add_task(task)
            job.min_resources = job.effective_min_resources()
        self._place(task)

    def _facts(self, obj: Mapping[str, Any]) -> PodFacts:
        """``PodFacts(obj)``, from the facts of the pod's previous object when they tell."""
        if REUSE_FACTS:
            uid = pod_uid(meta_of(obj))
            old = self.tasks.get(uid)
            facts = self._pod_facts.get(uid)
            if (
                old is not None
                and old.raw is not None
                and facts is not None
                and facts.restatus(old.raw, obj)
            ):
                return facts
        return PodFacts(obj)

    def _restatus_task(self, task: TaskInfo, f: PodFacts, obj: Mapping[str, Any]) -> bool:
        """Update ``task`` in place to pod ``obj``, whose facts ``f`` are the task's own facts
        moved on by ``PodFacts.restatus`` (so only its status, node, nomination and labels may
        differ), leaving the cache exactly as taking the task out and adding it anew would:
        the same container orders (the task goes to the end of ``tasks``, its job's tasks and
        the facts), node sums, counters and ``alloc_version``; only the vector round trips
        that cancel are left out (and the gang's minimum, which depends on the requests
        alone). False, and nothing done, where that is not known to be exact (no job, a job
        the removal would drop, host ports)."""
        uid = task.uid
        job = self.jobs.get(task.job_id) if task.job_id else None
        tmpl = task.template
        if (
            job is None
            or job.tasks.get(uid) is not task
            or (job.podgroup is None and len(job.tasks) == 1)
            or tmpl.host_ports
        ):
            return False
        if f.node_name:
            self.assumed.pop(uid, None)
        assumed = self.assumed.get(uid)
        status = pod_task_status(
            f.phase,
            node_name=f.node_name,
            deleting=f.deleting or uid in self.assumed_evict,
            assumed_node=assumed,
        )
        node_name = f.node_name or (assumed or "")
        idx = task.node_idx
        stays = (
            idx >= 0
            and node_name == task.node_name
            and status in ON_NODE_STATUS
            and (status is TaskStatus.RELEASING) is (task.status is TaskStatus.RELEASING)
            and self.nodes.by_name.get(node_name) == idx
        )
        if stays:  # the node's sums lose and regain the same request
            on_node = self.node_tasks[idx]
            on_node.discard(uid)
        else:
            self._unplace(task)
        tasks, facts = self.tasks, self._pod_facts
        del tasks[uid], facts[uid]
        self.anti_affinity_tasks.discard(uid)
        self.nominated_tasks.discard(uid)
        task.req, task.init_req = tmpl.req, tmpl.fit  # the same figures (``_check_dims``)
        del job.tasks[uid]
        job.restatus_task(task, status)
        task.node_name = node_name
        task.nominated_node = f.nominated_node
        task.labels = f.labels
        task.raw = obj
        tasks[uid] = task
        facts[uid] = f
        if tmpl.pod_anti_affinity:
            self.anti_affinity_tasks.add(uid)
        if task.nominated_node:
            self.nominated_tasks.add(uid)
        job.tasks[uid] = task
        if stays:
            on_node.add(uid)
        else:
            self._place(task)
        return True

    def _remove_task(self, task: TaskInfo, *, refigure: bool = True) -> None:
        self._unplace(task)
        self.tasks.pop(task.uid, None)
        self._pod_facts.pop(task.uid, None)
        self.anti_affinity_tasks.discard(task.uid)
        self.nominated_tasks.discard(task.uid)
        if task.job_id:
            job = self.jobs.get(task.job_id)
            if job is not None:
                job.remove_task(task)
                if refigure:
                    job.min_resources = job.effective_min_resources()
                if not job.tasks and job.podgroup is None:
                    self._drop_job(job.uid)

    def _node(self, obj: Mapping[str, Any], deleted: bool) -> None:
        name = str(meta_of(obj).get("name") or "")
        n = self.nodes
        if deleted:
            idx = n.by_name.get(name)
            if idx is None:
                return
            for uid in list(self.node_tasks[idx]):
                task = self.tasks[uid]
                self._unplace(task)
                self._waiting_node.setdefault(name, set()).add(uid)
            n.remove(name)
            return
        meta, alloc = node_facts(obj, self.resources, self.node_selector)
        self._check_dims()
        idx = n.slot_for(name)
        if len(self.node_tasks) < n.cap:
            self.node_tasks.extend(set() for _ in range(n.cap - len(self.node_tasks)))
        n.set_meta(idx, meta, pad(alloc, self.resources.capacity))
        n.schedulable[idx] = meta.ready
        waiting = self._waiting_node.pop(name, None)
        if waiting:
            for uid in sorted(waiting):
                waiter = self.tasks.get(uid)
                if waiter is not None and waiter.node_name == name:
                    self._place(waiter)

    def _podgroup(self, obj: Mapping[str, Any], deleted: bool) -> None:
        if deleted:
            job_id = podgroup_id(meta_of(obj))
            job = self.jobs.get(job_id)
            if job is not None:
                job.podgroup = None
                job.touch()
                if not job.tasks:
                    self._drop_job(job_id)
            return
        key = None
        if REUSE_FACTS:
            if self._podgroup_status(obj):
                return
            key = spec_key(obj.get("spec"))
        kept = None if key is None else self._podgroup_specs.get(key)
        job = self._podgroup_job(meta_of(obj))
        if kept is not None:
            self._set_podgroup(job, obj, kept)
            return
        v = podgroup_view(obj)
        vec = None
        if v.min_resources is not None:
            vec = self.resources.vector(scheduling_resources(v.min_resources))
        read = (
            v.queue,
            1 if v.min_member is None else v.min_member,
            dict(v.min_task_member),
            vec,
            v.priority_class_name,
        )
        self._set_podgroup(job, obj, read)
        if key is not None:
            if len(self._podgroup_specs) >= _PODGROUP_SPECS:
                self._podgroup_specs.clear()
            self._podgroup_specs[key] = read

    def _podgroup_job(self, meta: Mapping[str, Any]) -> JobInfo:
        """The job of the PodGroup with metadata ``meta`` (a new one the first time)."""
        job_id = podgroup_id(meta)
        got = self.jobs.get(job_id)
        if got is not None:
            return got
        namespace = str(meta.get("namespace") or "default")
        return self._new_job(job_id, namespace, str(meta.get("name") or ""))

    def _set_podgroup(self, job: JobInfo, obj: Mapping[str, Any], read: _PodGroupSpec) -> None:
        """Make ``job`` the job of PodGroup ``obj``, whose spec gave ``read`` (parsed now, or
        kept from an earlier PodGroup with the same spec JSON: ``_podgroup_specs``, whose
        objects no job shares). The metadata and status are read as ``podgroup_view`` reads
        them (tests/model/test_updates.py compares both ways)."""
        meta = meta_of(obj)
        status = as_mapping(obj.get("status"))
        queue, min_available, min_task_member, spec_min, priority_class_name = read
        if spec_min is not None:
            self._check_dims()
            vec = pad(spec_min, self.resources.capacity)
            job.spec_min_resources = vec.copy() if vec is spec_min else vec
        else:
            job.spec_min_resources = None
        job.podgroup = obj
        job.queue = queue or self.default_queue
        job.min_available = min_available
        job.min_resources = job.effective_min_resources()
        job.min_task_member = dict(min_task_member)
        job.phase = str(status.get("phase") or "") or "Pending"
        job.priority_class_name = priority_class_name
        job.creation = parse_time(str(meta.get("creationTimestamp") or ""))
        job.annotations = {str(k): str(a) for k, a in as_mapping(meta.get("annotations")).items()}
        job.network_topology = as_mapping(obj.get("spec")).get("networkTopology")
        conditions = status.get("conditions")
        job.conditions = (
            [dict(c) for c in conditions if isinstance(c, Mapping)]
            if isinstance(conditions, list)
            else []
        )
        job.touch()

    def _podgroup_status(self, obj: Mapping[str, Any]) -> bool:
        """Apply PodGroup ``obj`` when it differs from the job's last PodGroup only in its
        status and in metadata the cache does not read (what the session's phases and the
        controllers' status writes change): everything read from the spec stays as it is.
        False (nothing done) otherwise."""
        meta = meta_of(obj)
        job = self.jobs.get(podgroup_id(meta))
        old = None if job is None else job.podgroup
        if job is None or old is None:
            return False
        old_meta = meta_of(old)
        if meta is not old_meta:
            for key in _PODGROUP_META:
                if not same_json(meta.get(key), old_meta.get(key)):
                    return False
        if not same_json(obj.get("spec"), old.get("spec")):
            return False
        status = as_mapping(obj.get("status"))
        conditions = status.get("conditions")
        job.podgroup = obj
        job.phase = str(status.get("phase") or "") or "Pending"
        job.network_topology = as_mapping(obj.get("spec")).get("networkTopology")
        job.conditions = (
            [dict(c) for c in conditions if isinstance(c, Mapping)]
            if isinstance(conditions, list)
            else []
        )
        job.touch()
        return True

    def _new_job(self, uid: str, namespace: str, name: str) -> JobInfo:
        job = self.jobs[uid] = JobInfo(
            uid=uid,
            namespace=namespace,
            name=name,
            dims=self.resources.capacity,
            changes=self.changes,
            ordinal=next(self._ordinals),
        )
        self.changes.mark(uid)
        return job

    def _drop_job(self, uid: str) -> None:
        del self.jobs[uid]
        changes = self.changes
        changes.mark(uid)
        if len(changes) > 4 * len(self.jobs) + 4096:  # departed jobs' entries
            changes.prune(2 * len(self.jobs) + 1024)

    def _queue(self, obj: Mapping[str, Any], deleted: bool) -> None:
        name = str(meta_of(obj).get("name") or "")
        if deleted != (name not in self.queues):
            self.changes.reset()  # which jobs take part in sessions changes
        if deleted:
            self.queues.pop(name, None)
            return
        self.queues[name] = queue_facts(obj)

    # -- conveniences for tests and the simulator ----------------------------------------
    def total_allocatable(self) -> np.ndarray[Any, np.dtype[np.int64]]:
        """Σ allocatable over schedulable (Ready, selected) nodes."""
        n = self.nodes
        return np.asarray(n.alloc[:, : n.count][:, n.schedulable[: n.count]].sum(axis=1))


__all__ = ["ROOT_QUEUE", "CacheError", "ClusterCache", "parse_time"]
