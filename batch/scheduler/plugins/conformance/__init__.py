"""conformance: Volcano's conformance plugin (docs/volcano-semantics.md#plugins).

Preemptable/Reclaimable: never evict pods with priorityClassName system-cluster-critical or
system-node-critical, nor pods in namespace kube-system.
"""

from __future__ import annotations

from batch.model.info import TaskInfo
from batch.scheduler.framework.hooks import Hooks
from batch.scheduler.framework.registry import Plugin
from batch.scheduler.framework.votes import PERMIT

CRITICAL = frozenset({"system-cluster-critical", "system-node-critical"})


def evictable(task: TaskInfo) -> bool:
    return task.priority_class_name not in CRITICAL and task.namespace != "kube-system"


class ConformancePlugin(Plugin):
    name = "conformance"
    ARGUMENTS = ()
    keeps_callbacks = True

    def register_kept(self, hooks: Hooks) -> None:
        def victims(_: TaskInfo, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], int]:
            return [t for t in candidates if evictable(t)], PERMIT

        hooks.add_preemptable_fn(victims)
        hooks.add_reclaimable_fn(victims)
        hooks.add_unified_evictable_fn(victims)
