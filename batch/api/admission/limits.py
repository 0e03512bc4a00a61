"""Size limits: how much work one admitted object may ask of the controllers and the scheduler.

Why this exists: Kubernetes bounds an object's bytes, not what it asks for. `replicas: 100000000`
is a few bytes, yet every pod it names must be built, created, listed and tracked, and the svc,
ssh and tensorflow plugins list every host. Admission bounds the counts that drive that work, so
every loop of the controllers over a job's tasks, pods, hosts or policies is bounded by a limit
here (docs/controllers.md, "Bounded work").

Defaults, and why:
* 10,000 pods per job and per task: the largest jobs of the shared GPU traces ask for 128 GPUs,
  so even at one GPU per pod the limit is ~80 times the largest real gang. A 10,000-pod job is
  20 create batches of the job controller (500 pods each, as Kubernetes' Job controller), and the
  svc ConfigMap that lists its hosts twice holds about 0.5 MB with short names.
* 100 tasks per job: a task is a role (master, worker, ps, chief, evaluator); the example corpus
  has at most 3. The svc plugin puts two variables per task in every pod, so this also bounds a
  pod's size, and the PodGroup's minTaskMember has one entry per task.
* 64 lifecycle policies per list (the job's and each task's): a policy is matched against every
  pod event, and events are unique per list (eight kinds), so more than a few dozen means a long
  list of exit codes, which `event: PodFailed` says better.
* 1,000 hosts listed per pod: the tensorflow plugin writes every host of its tasks into every
  pod's TF_CONFIG, so such a job's bytes grow with the square of its pods (10,000 pods would
  store 3.5 GB of pods, each read back by every reconcile); 1,000 is 28 KB per pod.
The webhook, the sandbox, the controllers and `tephra validate` take the same options
(`--max-pods-per-job`, `--max-task-replicas`); the chart sets both from one value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["DEFAULT_LIMITS", "UNBOUNDED", "AdmissionLimits"]

_NO_LIMIT = 2**63 - 1


@dataclass(frozen=True, slots=True)
class AdmissionLimits:
    """The largest counts one object may ask for; every field must be at least 1."""

    pods_per_job: int = 10_000
    replicas_per_task: int = 10_000
    tasks_per_job: int = 100
    policies_per_list: int = 64
    hosts_per_pod: int = 1_000

    def __post_init__(self) -> None:
        for name in self.__slots__:
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"admission limit {name} must be an integer >= 1, not {value!r}")

    def task_replicas_error(self, replicas: int) -> str | None:
        if replicas <= self.replicas_per_task:
            return None
        return (
            f"replicas {replicas} exceeds the limit of {self.replicas_per_task} pods per task, "
            "set by --max-task-replicas"
        )

    def pods_error(self, total: int) -> str | None:
        if total <= self.pods_per_job:
            return None
        return (
            f"the tasks ask for {total} pods in all, over the limit of {self.pods_per_job} pods "
            "per job, set by --max-pods-per-job"
        )

    def tasks_error(self, count: int) -> str | None:
        if count <= self.tasks_per_job:
            return None
        return f"{count} tasks, over the limit of {self.tasks_per_job} tasks per job"

    def policies_error(self, count: int) -> str | None:
        if count <= self.policies_per_list:
            return None
        return f"{count} policies, over the limit of {self.policies_per_list} per list"

    def hosts_error(self, count: int) -> str | None:
        if count <= self.hosts_per_pod:
            return None
        return f"{count} hosts in every pod, over the limit of {self.hosts_per_pod} per pod"

    def job_error(self, replicas: Sequence[int]) -> str | None:
        """The first limit a job with these per-task replicas breaks, or None (the controllers'
        guard for a job that reached them without admission)."""
        found = self.tasks_error(len(replicas))
        for n in replicas:
            found = found or self.task_replicas_error(n)
        return found or self.pods_error(sum(replicas))


DEFAULT_LIMITS = AdmissionLimits()
#: No size limit at all: for a client's offline pre-check, where the server decides.
UNBOUNDED = AdmissionLimits(_NO_LIMIT, _NO_LIMIT, _NO_LIMIT, _NO_LIMIT, _NO_LIMIT)
