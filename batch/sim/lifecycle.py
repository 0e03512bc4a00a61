"""Job lifecycles for the simulator: the real VCJob reconciler, or a fast equivalent.

Why this exists: what happens around the scheduler (PodGroup before pods, pods only after
enqueue, restarts after eviction, completion) decides queueing delay and waste as much as the
scheduler does. Two implementations of the same `Lifecycle` protocol:

* `VolcanoLifecycle` (default) drives `batch.controllers.job.reconcile_job`, the pure reconciler
  the production controller runs, with each job submitted as a VCJob
  (`policies: [{event: PodEvicted, action: RestartJob}]`, `maxRetry` from the workload) and its
  actions (create/patch/delete of pods, PodGroups, job status) applied to the virtual cluster
  by the controllers' own interpreter (`batch.controllers.interpreter`) over a `RunStore`.
  It costs about 7 ms per job today (a job takes 5-6 reconciles; most of it is PodGroup
  minResources quantity formatting inside the reconciler).
* `FastLifecycle` does the same handshake directly (PodGroup Pending -> Inqueue gates pod
  creation; an eviction kills every pod, deletes the PodGroup, bumps the retry count and
  resubmits; Failed once retries reach maxRetry; completion deletes everything). It exists for
  very large replays where reconciles would dominate; `tests/sim` checks that both give the same
  job times on the same workload.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from batch.api.mergepatch import apply_merge_patch
from batch.controllers.constants import POD_BATCH, PODGROUP_RUNNING_ESTIMATE as RUNNING_ESTIMATE
from batch.controllers.effects import JSON, Action, EmitEvent, ObjectRef
from batch.controllers.interpreter import CONFLICT, MISSING, Answer, apply_sync
from batch.controllers.job import reconcile_job
from batch.sim.errors import SimInputError
from batch.sim.objects import (
    EPOCH,
    GROUP_ANNOTATION,
    KIND_WAKE,
    NAMESPACE,
    pod_requests,
    succeeded_status,
    timestamp,
)

if TYPE_CHECKING:
    from batch.sim.engine import JobRun, Simulation

__all__ = ["LIFECYCLES", "FastLifecycle", "Lifecycle", "VolcanoLifecycle", "make_lifecycle"]

log = logging.getLogger(__name__)

LIFECYCLES = ("volcano", "fast")
FINAL_PHASES = frozenset({"Completed", "Failed", "Terminated", "Aborted"})
MAX_ROUNDS = 12


class Lifecycle(Protocol):
    def submitted(self, run: JobRun, now: float) -> None: ...

    def podgroup_phase(self, run: JobRun, phase: str, now: float) -> None: ...

    def pods_bound(self, run: JobRun, now: float) -> None: ...

    def run_finished(self, run: JobRun, now: float) -> None: ...

    def pods_evicted(self, run: JobRun, names: Sequence[str], now: float) -> None: ...

    def wake(self, run: JobRun, now: float) -> None: ...


def make_lifecycle(name: str, sim: Simulation) -> Lifecycle:
    if name == "volcano":
        return VolcanoLifecycle(sim)
    if name == "fast":
        return FastLifecycle(sim)
    raise SimInputError(f"--lifecycle: must be one of {', '.join(LIFECYCLES)}, got {name!r}")


# -- fast -----------------------------------------------------------------------------------------


class FastLifecycle:
    """The enqueue handshake and RestartJob, done directly (see module docstring)."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim

    def _podgroup(self, run: JobRun) -> dict[str, Any]:

        job = run.job
        gang = self.sim.options.gang
        min_member = job.min_available if gang else 1
        cpu = mem = gpu = 0
        left = min_member
        for t in job.tasks:
            n = min(t.replicas, left)
            left -= n
            cpu += n * t.cpu_milli
            mem += n * t.memory_bytes
            gpu += n * t.gpu_milli
        spec: dict[str, Any] = {
            "minMember": min_member,
            "queue": self.sim.queue_of(run),
            "minResources": pod_requests(cpu, mem, gpu),
        }
        if gang and len(job.tasks) > 1:
            spec["minTaskMember"] = {t.name: t.replicas for t in job.tasks}
        metadata: dict[str, Any] = {
            "name": f"{job.name}-pg",
            "namespace": NAMESPACE,
            "uid": f"pg-{run.index:07d}-{run.record.restarts}",
            "creationTimestamp": timestamp(job.submit),
        }
        if self.sim.options.estimates:
            metadata["annotations"] = {RUNNING_ESTIMATE: f"{max(round(job.run_time), 1)}s"}
        return {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": metadata,
            "spec": spec,
            "status": {"phase": "Pending" if self.sim.options.gate_pods else "Inqueue"},
        }

    def _create_pods(self, run: JobRun, now: float) -> None:

        job = run.job
        ts = timestamp(now)
        queue = self.sim.queue_of(run)
        pg_name = f"{job.name}-pg"
        for task in job.tasks:
            requests = pod_requests(task.cpu_milli, task.memory_bytes, task.gpu_milli)
            for i in range(task.replicas):
                name = f"{job.name}-{task.name}-{i}"
                obj: dict[str, Any] = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": name,
                        "namespace": NAMESPACE,
                        "uid": f"pod-{run.index:07d}-{run.record.restarts}-{task.name}-{i}",
                        "creationTimestamp": ts,
                        "annotations": {
                            GROUP_ANNOTATION: pg_name,
                            "volcano.sh/task-spec": task.name,
                            "volcano.sh/job-name": job.name,
                            "volcano.sh/queue-name": queue,
                        },
                    },
                    "spec": {
                        "schedulerName": self.sim.options.scheduler_name,
                        "priority": job.priority,
                        "containers": [
                            {
                                "name": "main",
                                "resources": {"requests": requests, "limits": requests},
                            }
                        ],
                    },
                    "status": {"phase": "Pending"},
                }
                self.sim.add_pod(run, obj, task.gpu_milli)

    def submitted(self, run: JobRun, now: float) -> None:
        self.sim.put_podgroup(run, self._podgroup(run))
        if not self.sim.options.gate_pods:
            self._create_pods(run, now)

    def podgroup_phase(self, run: JobRun, phase: str, now: float) -> None:
        if phase != "Pending" and not run.pods and not run.started:
            self._create_pods(run, now)

    def pods_bound(self, run: JobRun, now: float) -> None:
        return None

    def run_finished(self, run: JobRun, now: float) -> None:
        self.sim.finish(run, now, phase="Completed")

    def pods_evicted(self, run: JobRun, names: Sequence[str], now: float) -> None:
        for name in list(run.pods):
            self.sim.remove_pod(run, name, now)
        self.sim.remove_podgroup(run)
        run.record.restarts += 1
        if run.record.restarts >= run.job.max_retry:
            self.sim.finish(run, now, phase="Failed")
            return
        self.submitted(run, now)

    def wake(self, run: JobRun, now: float) -> None:
        return None


# -- the real reconciler ------------------------------------------------------------------------


class VolcanoLifecycle:
    """Each job is a VCJob handled by `batch.controllers.job.reconcile_job`."""

    def __init__(self, sim: Simulation) -> None:

        self.sim = sim
        self.epoch = EPOCH
        self._gpu_by_task: dict[int, dict[str, int]] = {}
        self._warned = False

    def _vcjob(self, run: JobRun) -> dict[str, Any]:

        job = run.job
        tasks = []
        for t in job.tasks:
            requests = pod_requests(t.cpu_milli, t.memory_bytes, t.gpu_milli)
            tasks.append(
                {
                    "name": t.name,
                    "replicas": t.replicas,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "sim",
                                    "resources": {"requests": requests, "limits": requests},
                                }
                            ],
                            "restartPolicy": "Never",
                        }
                    },
                }
            )
        spec: dict[str, Any] = {
            "queue": self.sim.queue_of(run),
            "schedulerName": self.sim.options.scheduler_name,
            "minAvailable": job.min_available if self.sim.options.gang else 1,
            "maxRetry": job.max_retry,
            "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
            "tasks": tasks,
        }
        if self.sim.options.estimates:
            spec["runningEstimate"] = f"{max(round(job.run_time), 1)}s"
        return {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {
                "name": job.name,
                "namespace": NAMESPACE,
                "uid": f"job-{run.index:07d}",
                "creationTimestamp": timestamp(job.submit),
            },
            "spec": spec,
        }

    def _now(self, now: float) -> datetime:
        return datetime.fromtimestamp(self.epoch + now, UTC)

    def _reconcile(self, run: JobRun, now: float, deleted: Sequence[dict[str, Any]] = ()) -> bool:
        """Reconcile until the job asks for nothing more now; True if pods were created."""
        created = False
        dt = self._now(now)
        rounds = MAX_ROUNDS + sum(t.replicas for t in run.job.tasks) // POD_BATCH
        for _ in range(rounds):  # a job's pods come in batches of POD_BATCH, one round each
            result = reconcile_job(
                run.state,
                [p.obj for p in run.pods.values()],
                run.pg,
                now=dt,
                deleted_pods=deleted,
            )
            deleted = ()
            if result.requeue_after:
                self.sim.schedule(now + result.requeue_after, KIND_WAKE, run)
            if not result.actions:
                break
            created |= self._apply(run, result.actions, now)
            if run.finished:
                return created
        else:
            if not self._warned:
                self._warned = True
                log.warning("job %s did not settle in %d reconciles", run.job.name, rounds)
        status = run.state.get("status") or {}
        run.record.restarts = int(status.get("retryCount") or 0)
        phase = str((status.get("state") or {}).get("phase") or "")
        if phase in FINAL_PHASES:
            self.sim.finish(run, now, phase=phase)
        return created

    def gpu_of(self, run: JobRun, obj: dict[str, Any]) -> int:
        table = self._gpu_by_task.get(run.index)
        if table is None:
            table = self._gpu_by_task[run.index] = {t.name: t.gpu_milli for t in run.job.tasks}
        task = (obj["metadata"].get("annotations") or {}).get("volcano.sh/task-spec", "")
        return table.get(task, 0)

    def _apply(self, run: JobRun, actions: Sequence[Action], now: float) -> bool:
        """Apply the reconciler's actions to the virtual cluster; True if pods were created."""
        store = RunStore(self, run, now)
        apply_sync(store, actions)
        return store.created_pods

    # -- Lifecycle ----------------------------------------------------------------------------

    def submitted(self, run: JobRun, now: float) -> None:
        run.state = self._vcjob(run)
        self._reconcile(run, now)

    def podgroup_phase(self, run: JobRun, phase: str, now: float) -> None:
        self._reconcile(run, now)

    def pods_bound(self, run: JobRun, now: float) -> None:
        self._reconcile(run, now)

    def run_finished(self, run: JobRun, now: float) -> None:

        done = succeeded_status(now)
        for pod in list(run.pods.values()):
            if pod.node is not None and not pod.done:
                self.sim.finish_pod(run, pod, {**pod.obj, "status": done}, now)
        self._reconcile(run, now)
        if not run.finished:
            # Pods the reconciler keeps (none for a whole gang) go with the job (TTL 0).
            self.sim.finish(run, now, phase="Completed")

    def pods_evicted(self, run: JobRun, names: Sequence[str], now: float) -> None:
        gone = []
        for name in names:
            pod = run.pods.get(name)
            if pod is not None:
                gone.append(pod.obj)
                self.sim.remove_pod(run, name, now)
        self._reconcile(run, now, deleted=gone)

    def wake(self, run: JobRun, now: float) -> None:
        self._reconcile(run, now)


class RunStore:
    """One job's objects on the virtual cluster as a store of the one action interpreter
    (`batch.controllers.interpreter`, which the API shell and the in-memory runner apply actions
    through too): the Job is `run.state`, its PodGroup `run.pg`, its pods `run.pods`, each write
    told to the simulation. Kinds the virtual cluster keeps no copy of (a job plugin's objects)
    are taken and forgotten; events are dropped."""

    errors: tuple[type[Exception], ...] = ()

    def __init__(self, lifecycle: VolcanoLifecycle, run: JobRun, now: float) -> None:
        self.lifecycle = lifecycle
        self.sim = lifecycle.sim
        self.run = run
        self.now = now
        self.created_pods = False

    def create(self, ref: ObjectRef, body: JSON) -> Answer:
        run = self.run
        meta = body.setdefault("metadata", {})
        if ref.kind == "Pod":
            if ref.name in run.pods:
                return CONFLICT
            meta.setdefault("uid", f"pod-{run.index:07d}-{ref.name}-{run.record.restarts}")
            meta.setdefault("creationTimestamp", timestamp(self.now))
            body.setdefault("status", {"phase": "Pending"})
            self.sim.add_pod(run, body, self.lifecycle.gpu_of(run, body))
            self.created_pods = True
        elif ref.kind == "PodGroup":
            if run.pg is not None:
                return CONFLICT
            status = run.state.get("status") or {}
            meta.setdefault("uid", f"pg-{run.index:07d}-{status.get('version', 0)}")
            meta.setdefault("creationTimestamp", timestamp(run.job.submit))
            if not self.sim.options.gate_pods:
                body["status"] = {**(body.get("status") or {}), "phase": "Inqueue"}
            self.sim.put_podgroup(run, body)
        return None

    def patch(self, ref: ObjectRef, patch: JSON) -> Answer:
        run = self.run
        if ref.kind == "Job":
            run.state = apply_merge_patch(run.state, patch)
        elif ref.kind == "Pod":
            pod = run.pods.get(ref.name)
            if pod is None:
                return MISSING
            self.sim.update_pod(run, pod, apply_merge_patch(pod.obj, patch), notify=False)
        elif ref.kind == "PodGroup":
            if run.pg is None:
                return MISSING
            self.sim.put_podgroup(run, apply_merge_patch(run.pg, patch))
        return None

    def patch_status(self, ref: ObjectRef, status: JSON) -> Answer:
        run = self.run
        if ref.kind == "Job":
            run.state["status"] = apply_merge_patch(run.state.get("status") or {}, status)
        elif ref.kind == "PodGroup":
            pg = run.pg
            if pg is None:
                return MISSING
            self.sim.put_podgroup(run, {**pg, "status": apply_merge_patch(pg["status"], status)})
        elif ref.kind == "Pod":
            pod = run.pods.get(ref.name)
            if pod is None:
                return MISSING
            new = {**pod.obj, "status": apply_merge_patch(pod.obj.get("status"), status)}
            self.sim.update_pod(self.run, pod, new, notify=True)
        return None

    def delete(self, ref: ObjectRef) -> Answer:
        if ref.kind == "Pod":
            if ref.name not in self.run.pods:
                return MISSING
            self.sim.remove_pod(self.run, ref.name, self.now)
        elif ref.kind == "PodGroup":
            if self.run.pg is None:
                return MISSING
            self.sim.remove_podgroup(self.run)
        return None

    def event(self, ev: EmitEvent) -> Answer:
        return None
