"""The narrow interface between the simulator and the scheduler it drives.

Why this exists: the engine must not know how the scheduler is built, only that it is fed
Kubernetes objects as watch events and answers, once per cycle, with decisions. In production
the same two calls are made by the scheduler service (watch events -> cache, session ->
binder/evictor/status writer). `RealScheduler` (in `batch.sim.real`) is the implementation that
runs Tephra's actual `batch.scheduler` session on a `batch.model.cache.ClusterCache`; there is no
other scheduler in the simulator.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["CycleOutcome", "SchedulerBackend"]


@dataclass(slots=True)
class CycleOutcome:
    """What one scheduling cycle decided, in API terms."""

    binds: list[tuple[str, str, str]] = field(default_factory=list)  # (namespace, pod, node)
    evictions: list[tuple[str, str, str]] = field(default_factory=list)  # (namespace, pod, reason)
    podgroup_phases: dict[tuple[str, str], str] = field(default_factory=dict)  # (ns, name) -> phase
    #: each queue's deserved GPUs (milli) as the scheduler's fair-share plugin published them
    #: this cycle (queues it published nothing for are left out; None: it publishes none)
    deserved: dict[str, int] | None = None
    seconds: float = 0.0  # wall time spent in the cycle


class SchedulerBackend(Protocol):
    """A scheduler fed watch events and asked for one cycle's decisions at virtual time `now`."""

    def apply(self, kind: str, event: str, obj: dict[str, Any]) -> None: ...

    def at(self, now: float) -> None:
        """The virtual time of the events that follow (what held resources until then held
        them since the previous call: the usage-decayed fair share counts it)."""
        ...

    def cycle(self, now: float) -> CycleOutcome: ...

    def next_change(self, since: float) -> float | None:
        """The earliest time after ``since`` at which a cycle could decide differently with no
        event in between (a minimum runtime passing, a wait-based bound loosening): None for
        never, ``since`` or earlier for at any time (attained service, aging)."""
        ...
