"""minruntime: a minimum running time before a pod may be preempted or reclaimed.

Volcano has no such protection (its ``cdp`` plugin is a per-pod cool-down annotation); this
follows KAI Scheduler's MinRuntime plugin (``preemptMinRuntime`` / ``reclaimMinRuntime`` per
queue, inherited down the queue tree, with plugin defaults — shared/reference/peers.md §1.6). A
victim whose pod has been running (``status.startTime``, else its creation time) for less than
the minimum of its queue is never chosen. The filter is a hard *guard* of the evicting actions
(preempt, reclaim, gangpreempt, gangreclaim): it applies after the tiered Preemptable/Reclaimable
callbacks whatever tier the plugin is configured in, so Volcano's tier fall-through cannot
bypass it.

Arguments: ``preemptMinRuntime`` and ``reclaimMinRuntime`` (durations such as ``90s``, ``5m``,
``1h30m`` or plain seconds; default ``0s``), and per-queue overrides
``queues.<queue>.preemptMinRuntime`` / ``queues.<queue>.reclaimMinRuntime``. A Queue may also
carry the annotations ``tephra.io/preempt-min-runtime`` / ``tephra.io/reclaim-min-runtime``
(argument overrides win over annotations; a queue without either inherits from its parent).
The switches ``enablePreemptable`` / ``enableReclaimable`` turn either half off.

The other bound, ``preemptLostWorkRatio`` / ``reclaimLostWorkRatio`` (a number >= 0; default 0:
off), protects old victims instead: a victim whose current run (lost when it restarts without
a checkpoint) is longer than the ratio times how long the preemptor's pod has waited (since its
creation) is never chosen either. Evicting days of work to spare a pod minutes of waiting then
cannot happen; the longer a pod waits, the more it may take (docs/preemption.md).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence

from batch.model.cache import ClusterCache
from batch.model.info import QueueInfo, TaskInfo
from batch.model.parse import ROOT_QUEUE
from batch.model.status import TaskStatus
from batch.scheduler.framework.arguments import Arg, Arguments, ConfigError, check_arguments
from batch.scheduler.framework.hooks import Hooks
from batch.scheduler.framework.registry import Plugin
from batch.scheduler.framework.session import Session
from batch.scheduler.pluginlib.durations import parse_duration, task_start

__all__ = [
    "ANN_PREEMPT",
    "ANN_RECLAIM",
    "MinRuntimePlugin",
    "earliest_crossing",
    "parse_duration",
]

ANN_PREEMPT = "tephra.io/preempt-min-runtime"
ANN_RECLAIM = "tephra.io/reclaim-min-runtime"
#: the statuses a victim of preempt (Bound, Running) or reclaim (Running) is in
_VICTIM_STATUSES = frozenset({TaskStatus.BOUND, TaskStatus.RUNNING})


class MinRuntimePlugin(Plugin):
    name = "minruntime"
    ARGUMENTS = (
        Arg("preemptMinRuntime", "duration", 0, "a pod runs this long before preempt may evict it"),
        Arg("reclaimMinRuntime", "duration", 0, "a pod runs this long before reclaim may evict it"),
        Arg(
            "preemptLostWorkRatio",
            "float",
            0,
            "a victim's run may be at most this times the preemptor's wait (0: no bound)",
            min=0,
        ),
        Arg(
            "reclaimLostWorkRatio",
            "float",
            0,
            "a victim's run may be at most this times the reclaimer's wait (0: no bound)",
            min=0,
        ),
        Arg("queues.<queue>.preemptMinRuntime", "duration", None, "`preemptMinRuntime` of a queue"),
        Arg("queues.<queue>.reclaimMinRuntime", "duration", None, "`reclaimMinRuntime` of a queue"),
    )
    time_dependent = True  # pods pass their minimum runtime; lost-work bounds loosen
    keeps_callbacks = True

    def __init__(self, arguments: Arguments) -> None:
        super().__init__(arguments)
        check_arguments("plugin minruntime", self.ARGUMENTS, arguments.raw)
        self.defaults = {
            "preempt": self._dur(arguments, "preemptMinRuntime"),
            "reclaim": self._dur(arguments, "reclaimMinRuntime"),
        }
        self.per_queue: dict[tuple[str, str], float] = {}
        for key, value in arguments.keys_with_prefix("queues.").items():
            qname, sep, field = key.rpartition(".")
            if not sep or field not in ("preemptMinRuntime", "reclaimMinRuntime"):
                raise ConfigError(
                    f"plugin minruntime: argument 'queues.{key}' must be "
                    "queues.<queue>.preemptMinRuntime or queues.<queue>.reclaimMinRuntime"
                )
            try:
                secs = parse_duration(value)
            except ValueError as exc:
                raise ConfigError(f"plugin minruntime: argument 'queues.{key}': {exc}") from None
            self.per_queue[(qname, field[:7])] = secs
        self.lost_ratio = {
            "preempt": self._ratio(arguments, "preemptLostWorkRatio"),
            "reclaim": self._ratio(arguments, "reclaimLostWorkRatio"),
        }

    @classmethod
    def next_change(cls, cache: ClusterCache, arguments: Arguments, since: float) -> float | None:
        """The first time after ``since`` a running pod passes its minimum runtime, or a
        lost-work bound starts to allow a victim it did not (``Scheduler.run_once`` reuses
        decisions until then; the simulator sleeps until then)."""
        plugin = cls(arguments)
        # at a ratio of 1 a pod may take a victim iff it was created no later: time changes nothing
        ratios = {r for r in plugin.lost_ratio.values() if r > 0 and r != 1}
        times = _PodTimes(plugin, cache, lost_work=bool(ratios))
        found = [t for t in times.expiries if t > since]
        if times.created and times.starts:
            starts = sorted(times.starts)
            for ratio in ratios:
                crossing = earliest_crossing(times.created, starts, ratio, since)
                if crossing is not None:
                    found.append(crossing)
        return min(found) if found else None

    @staticmethod
    def _ratio(arguments: Arguments, key: str) -> float:
        value = arguments.get_float(key, 0.0)
        if not 0 <= value < math.inf:  # also refuses nan
            raise ConfigError(f"plugin minruntime: {key} must be a finite number >= 0")
        return value

    @staticmethod
    def _dur(arguments: Arguments, key: str) -> float:
        if key not in arguments:
            return 0.0
        try:
            return parse_duration(arguments.raw[key])
        except ValueError as exc:
            raise ConfigError(f"plugin minruntime: argument {key!r}: {exc}") from None

    def min_runtime(self, ssn: Session, queue: str, kind: str) -> float:
        """Minimum runtime of ``kind`` ("preempt"|"reclaim") for victims in ``queue``."""
        ann = ANN_PREEMPT if kind == "preempt" else ANN_RECLAIM
        seen: set[str] = set()
        q = queue
        while q and q not in seen:
            seen.add(q)
            got = self.per_queue.get((q, kind))
            if got is not None:
                return got
            info = ssn.queues.get(q)
            if info is None:
                break
            value = info.annotations.get(ann)
            if value is not None:
                try:
                    return parse_duration(value)
                except ValueError:
                    break  # admission rejects bad values; treat as not set
            q = info.parent or (ROOT_QUEUE if q != ROOT_QUEUE else "")
        return self.defaults[kind]

    def register_kept(self, hooks: Hooks) -> None:
        option = self.option
        on = {
            "preemptable": option is None or option.enabled("preemptable"),
            "reclaimable": option is None or option.enabled("reclaimable"),
        }

        def start(t: TaskInfo) -> float:
            starts = self._starts
            st = starts.get(t.uid)
            if st is None:
                st = starts[t.uid] = task_start(t)
            return st

        def guard(point: str, preemptor: TaskInfo, victims: list[TaskInfo]) -> list[TaskInfo]:
            if not on.get(point, False):
                return victims
            ssn, cache = self.ssn, self._mins
            kind = "preempt" if point == "preemptable" else "reclaim"
            ratio = self.lost_ratio[kind]
            most = ratio * max(ssn.now - preemptor.creation, 0.0) if ratio > 0 else math.inf
            out = []
            for t in victims:
                job = ssn.jobs.get(t.job_id or "")
                qname = job.queue if job is not None else ""
                m = cache.get((qname, kind))
                if m is None:
                    m = cache[(qname, kind)] = self.min_runtime(ssn, qname, kind)
                if m <= 0 and most == math.inf:
                    out.append(t)
                    continue
                ran = ssn.now - start(t)
                if m <= ran <= most:
                    out.append(t)
            return out

        hooks.add_victim_guard(guard)

    def on_session_open(self, ssn: Session) -> None:
        #: this session's minimum runtimes per (queue, kind) and pods' start times
        self._mins: dict[tuple[str, str], float] = {}
        self._starts: dict[str, float] = {}


class _PodTimes:
    """What ``next_change`` needs of the cluster, in one walk over its pods: when each running
    pod passes each minimum runtime of its queue, and, for a lost-work bound, the pending pods'
    creation times and the victim pods' start times."""

    def __init__(self, plugin: MinRuntimePlugin, cache: ClusterCache, *, lost_work: bool) -> None:
        self.expiries: list[float] = []
        self.created: set[float] = set()
        self.starts: list[float] = []
        fake = _QueuesOnly(cache.queues)
        mins: dict[str, list[float]] = {}
        for job in cache.jobs.values():
            m = mins.get(job.queue)
            if m is None:
                m = mins[job.queue] = [
                    v
                    for kind in ("preempt", "reclaim")
                    if (v := plugin.min_runtime(fake, job.queue, kind)) > 0  # type: ignore[arg-type]
                ]
            if m or lost_work:
                self._take(job.tasks.values(), m, lost_work=lost_work)

    def _take(self, tasks: Iterable[TaskInfo], mins: list[float], *, lost_work: bool) -> None:
        for t in tasks:
            if t.status is TaskStatus.PENDING:
                if lost_work:
                    self.created.add(t.creation)
            elif t.status in _VICTIM_STATUSES:
                start = task_start(t)
                if lost_work:
                    self.starts.append(start)
                if t.status is TaskStatus.RUNNING:
                    self.expiries.extend(start + v for v in mins)


def earliest_crossing(
    created: Iterable[float], starts: Sequence[float], ratio: float, since: float
) -> float | None:
    """A pod created at ``c`` may take a victim started at ``s`` once
    ``t - s <= ratio * (t - c)``, i.e. from ``T = (ratio * c - s) / (ratio - 1)`` on (ratio
    above 1; below 1 the answer changes at any time: ``since`` is returned). The earliest
    ``T`` after ``since`` over all pairs: for each creation time, the latest start (``starts``
    sorted) whose ``T`` is still ahead, by bisection."""
    if ratio < 1:
        return since
    first: float | None = None
    for c in created:
        i = bisect.bisect_left(starts, ratio * c - (ratio - 1) * since) - 1
        if i >= 0:
            crossing = (ratio * c - starts[i]) / (ratio - 1)
            if first is None or crossing < first:
                first = crossing
    return first


class _QueuesOnly:
    """The part of a session ``min_runtime`` reads (its queues)."""

    def __init__(self, queues: Mapping[str, QueueInfo]) -> None:
        self.queues = queues
