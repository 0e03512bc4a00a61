"""What one scheduling session decided: the only output of the pure core.

The Kubernetes shell (batch.kube) and the simulator turn these into API writes; nothing here does
I/O. All records are slotted dataclasses so a 100k-pod decision set stays small.

The records (binds, pipelines, evictions, events) are hashable and never changed once made,
but not ``frozen``: a frozen dataclass sets each field through ``object.__setattr__``, which
made one about seven times as costly to build (some 3.8 us against 0.5 us), and a 100,000-pod
session builds one per placement and one per unready gang. They have the hash a frozen one
has (``unsafe_hash``: from every field), so they still serve as set members and keys.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True, unsafe_hash=True)  # not frozen: see the module docstring
class Bind:
    """Bind pod ``namespace/name`` (uid) to ``node``; the pod belongs to ``job_id``."""

    namespace: str
    name: str
    uid: str
    node: str
    job_id: str


@dataclass(slots=True, unsafe_hash=True)  # not frozen: see the module docstring
class Pipeline:
    """A pod placed onto resources still being released (no bind yet;
    docs/volcano-semantics.md#statement)."""

    namespace: str
    name: str
    uid: str
    node: str
    job_id: str


@dataclass(slots=True, unsafe_hash=True)  # not frozen: see the module docstring
class Eviction:
    """Evict pod ``namespace/name`` (reason ``preempt``/``reclaim``/``shuffle``/...)."""

    namespace: str
    name: str
    uid: str
    reason: str
    job_id: str
    beneficiary: str = ""  # job id of the preemptor/reclaimer the eviction made room for


@dataclass(slots=True, unsafe_hash=True)  # not frozen: see the module docstring
class Event:
    """A Kubernetes Event to record on the involved object."""

    kind: str
    namespace: str
    name: str
    type: str  # "Normal" | "Warning"
    reason: str
    message: str


@dataclass(slots=True)
class PendingReason:
    """Why a job was not (fully) placed this session.

    ``kind`` is one of: ``QueueMissing``, ``QueueClosed``, ``NotEnqueued`` (an enqueue plugin
    rejected it; ``details['rejected_by']``), ``InvalidJob``, ``QueueOverused``,
    ``NotAllocatable`` (queue quota), ``Unschedulable`` (no node fits; ``details['fit']`` is the
    kube-scheduler style node histogram), ``GangShort`` (placed fewer than minAvailable),
    ``SchedulingGated``, ``Pipelined`` (waiting for releasing resources), ``NotConsidered``.
    """

    job_id: str
    kind: str
    message: str
    short_by: int = 0
    shortfall: dict[str, str] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class QueueMetrics:
    """A queue as a fair-share plugin (proportion, capacity) saw it this session.

    Vectors are the plugin's own (indexed like ``names``, the session's resource registry), kept
    as they are, and share and overused are worked out when first read, so that sessions whose
    metrics nobody reads (the simulator's) pay nothing; ``amounts`` converts.
    """

    names: list[str]
    deserved: Any
    real_capacity: Any
    inqueue: Any
    request: Any  # None when the plugin has no notion of request (capacity)
    #: the plugin's answers, asked once (the figures no longer change after the session)
    share_of: Callable[[], float]
    overused_of: Callable[[], bool]
    _answers: tuple[float, bool] | None = None
    #: proportion's usage-decayed fair share: the weight the water-filling read and the queue's
    #: share of the queues' decayed usage (None: plain weights)
    effective_weight: float | None = None
    usage_share: float | None = None

    def _answer(self) -> tuple[float, bool]:
        if self._answers is None:
            self._answers = (self.share_of(), self.overused_of())
        return self._answers

    @property
    def share(self) -> float:
        return self._answer()[0]

    @property
    def overused(self) -> bool:
        return self._answer()[1]

    def amount(self, vector: Any, name: str) -> int:
        """``amounts(vector).get(name, 0)`` without formatting the other resources."""
        try:
            i = self.names.index(name)
        except ValueError:
            i = 0
        if vector is None or not 0 < i < len(vector):
            return 0
        value = float(vector[i])
        return 0 if value == float("inf") else round(value)

    def amounts(self, vector: Any) -> dict[str, int]:
        """Name -> amount (milli-units; bytes for memory) of a vector; pods and unlimited
        dimensions are left out."""
        out: dict[str, int] = {}
        if vector is None:
            return out
        for i, name in enumerate(self.names):
            if 0 < i < len(vector):
                value = float(vector[i])
                if value != float("inf"):
                    out[name] = round(value)
        return out


@dataclass(slots=True)
class Decisions:
    """The decision set of one session (see docs/scheduler.md)."""

    session_uid: str
    binds: list[Bind] = field(default_factory=list)
    pipelines: list[Pipeline] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    #: {(namespace, name): {"phase", "running", "succeeded", "failed", "conditions"}}
    podgroup_status: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    #: the keys of podgroup_status whose status is not the previous session's (None: any)
    podgroup_status_new: list[tuple[str, str]] | None = None
    #: {queue: {"allocated": ResourceList, "pending"|"inqueue"|"running"|"unknown"|"completed": n}}
    queue_status: dict[str, dict[str, Any]] = field(default_factory=dict)
    pending_reasons: dict[str, PendingReason] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    #: seconds spent in "open", each action name, and "close"
    timings: dict[str, float] = field(default_factory=dict)
    #: seconds per (plugin, "OnSessionOpen" | "OnSessionClose")
    plugin_timings: dict[tuple[str, str], float] = field(default_factory=dict)
    #: per queue, what the fair-share plugin computed (empty without proportion/capacity)
    queue_metrics: dict[str, QueueMetrics] = field(default_factory=dict)
