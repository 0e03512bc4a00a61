"""conformance: Volcano's conformance plugin (docs/volcano-semantics.md#plugins).

Preemptable/Reclaimable: never evict pods with priorityClassName system-cluster-critical or
system-node-critical, nor pods in namespace kube-system.
"""

from __future__ import annotations

from batch.model.info import TaskInfo
from batch.scheduler.framework.registry import Plugin
from batch.scheduler.framework.session import Session
from batch.scheduler.framework.votes import PERMIT

CRITICAL = frozenset({"system-cluster-critical", "system-node-critical"})


def evictable(task: TaskInfo) -> bool:
    return task.priority_class_name not in CRITICAL and task.namespace != "kube-system"


class ConformancePlugin(Plugin):
    name = "conformance"
    ARGUMENTS = ()

    def on_session_open(self, ssn: Session) -> None:
        def victims(_: TaskInfo, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            return [t for t in candidates if evictable(t)], PERMIT

        ssn.hooks.add_preemptable_fn(victims)
        ssn.hooks.add_reclaimable_fn(victims)
        ssn.hooks.add_unified_evictable_fn(victims)
