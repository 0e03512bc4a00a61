"""The configuration types a session runs on (``tiers``, per-plugin switches and arguments).

``batch.scheduler.config`` parses and validates ``volcano-scheduler.conf`` into these; the
framework reads them (which plugin sits in which tier, which extension points a switch turns
off, each action's ``configurations`` entry). Volcano keeps the same types in ``conf/``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from batch.scheduler.framework.arguments import Arguments

#: every enable switch of a plugin option and the extension points it gates
#: (docs/volcano-semantics.md#tiers)
SWITCHES: dict[str, tuple[str, ...]] = {
    "enableJobOrder": ("job_order",),
    "enableHierarchy": (),
    "enableJobReady": ("job_ready",),
    "enableJobPipelined": ("job_pipelined",),
    "enableTaskOrder": ("task_order",),
    "enablePreemptable": ("preemptable",),
    "enableReclaimable": ("reclaimable",),
    "enablePreemptive": ("preemptive",),
    "enableQueueOrder": ("queue_order",),
    "enabledClusterOrder": ("cluster_order",),
    "enablePredicate": ("predicate", "pre_predicate"),
    "enableBestNode": ("best_node",),
    "enableNodeOrder": ("node_order",),
    "enableTargetJob": ("target_job",),
    "enableReservedNodes": ("reserved_nodes",),
    "enableJobEnqueued": ("job_enqueueable", "job_enqueued"),
    "enabledVictim": ("victim_tasks",),
    "enableJobStarving": ("job_starving",),
    "enabledOverused": ("overused",),
    "enabledAllocatable": ("allocatable",),
    "enabledHyperNodeOrder": ("hypernode_order",),
    "enabledSubJobReady": ("subjob_ready",),
    "enabledSubJobPipelined": ("subjob_pipelined",),
    "enabledSubJobOrder": ("subjob_order",),
    "enabledHyperNodeGradient": ("hypernode_gradient",),
}
#: extension point -> switch that gates it
GATES: dict[str, str] = {p: s for s, points in SWITCHES.items() for p in points}


@dataclass(slots=True, frozen=True)
class PluginOption:
    """One ``tiers[].plugins[]`` entry."""

    name: str
    switches: Mapping[str, bool] = field(default_factory=dict)
    arguments: Mapping[str, Any] = field(default_factory=dict)

    def enabled(self, point: str) -> bool:
        """Whether callbacks at extension point ``point`` are registered (default true)."""
        switch = GATES.get(point)
        return switch is None or self.switches.get(switch, True)

    @property
    def hierarchy(self) -> bool:
        return self.switches.get("enableHierarchy", False)


@dataclass(slots=True, frozen=True)
class Tier:
    plugins: tuple[PluginOption, ...]


@dataclass(slots=True, frozen=True)
class SchedulerConfig:
    """A validated scheduler configuration."""

    actions: tuple[str, ...]
    tiers: tuple[Tier, ...]
    configurations: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    metrics: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""

    def action_arguments(self, action: str) -> Arguments:
        return Arguments(f"configurations[{action}]", self.configurations.get(action, {}))

    def plugin(self, name: str) -> PluginOption | None:
        for tier in self.tiers:
            for p in tier.plugins:
                if p.name == name:
                    return p
        return None
