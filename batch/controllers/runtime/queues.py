"""The queue controller's shell: read a Queue, its PodGroups and Commands, reconcile, apply."""

from __future__ import annotations

from dataclasses import dataclass

from batch.api.bus import queue_target
from batch.controllers import constants as c
from batch.controllers.metrics import ControllerMetrics
from batch.controllers.queue import oldest_pending, parent_of, podgroup_counts, reconcile_queue
from batch.controllers.runtime.part import Part
from batch.controllers.shell import COMMANDS, PODGROUPS, QUEUES, get_or_none, list_items


@dataclass(eq=False)
class Queues(Part):
    """Reconciles the Queue a `queue` key names (and its children when it changed)."""

    metrics: ControllerMetrics

    async def process(self, name: str) -> None:
        client = self.client()
        queue = await get_or_none(client, QUEUES, name)
        if queue is None:
            return
        queue.setdefault("kind", "Queue")
        queue.setdefault("apiVersion", c.SCHED_API)
        queues = await list_items(client, QUEUES)
        for q in queues:
            self.watched.queue_parents[str(q["metadata"]["name"])] = parent_of(q)
        groups = [
            g
            for g in await list_items(client, PODGROUPS)
            if str((g.get("spec") or {}).get("queue") or c.DEFAULT_QUEUE) == name
        ]
        commands = [cmd for cmd in await list_items(client, COMMANDS) if queue_target(cmd) == name]
        result = reconcile_queue(
            queue,
            queues=queues,
            podgroups=groups,
            commands=commands,
            command_namespace=self.settings.queue_command_namespace,
        )
        await self.writes.apply(("queue", "", name), result)
        for phase, count in podgroup_counts(groups).items():
            self.metrics.queue_podgroups[phase].labels(name).set(count)
        self.metrics.oldest_pending.labels(name).set(oldest_pending(groups) or 0)
        if result.actions:
            self.watched.enqueue_children(name)
