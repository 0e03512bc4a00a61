"""The scheduler service: the Kubernetes shell around the pure scheduling cycle.

Why this exists: `batch.scheduler` decides, this module does the I/O around it, in one asyncio
loop so that the cache is never mutated while a session reads it:

1. leader election (optional) so only one replica acts;
2. list+watch of every kind the scheduler reads, feeding the incremental cache; the first
   session waits until every initial list has synced;
3. every `period`: one session on the cache; its binds and evictions are assumed in the cache
   and handed to background workers, its PodGroup/Queue statuses, nominations, events and each
   queue's fair-share figures (the `tephra.io/fair-share` annotation) to a coalescing status
   queue (`batch.kube.dispatch`), so the next session does not wait for their round trips
   (kube-scheduler's asynchronous binding cycle); a session waits while binds or evictions
   are queued behind those on the wire, but not indefinitely (`BUSY_SESSION_GAP`), and runs
   in a thread of its own while the loop goes on sending, the cache's changes held back until
   its decisions are dispatched;
4. a bind that fails returns its task to Pending (retried next session) and keeps its PodGroup
   from being reported Running (Volcano #4383);
5. with leader election, a session runs and its binds, evictions and statuses are sent only
   while the leadership is current (`LeaderElector.current`: renewed within the lease duration,
   on the monotonic clock); each bind and eviction is checked again just before it is sent and
   dropped, counted and logged, when the leadership it was decided under has lapsed since;
   on stop or loss of the lease, binds not sent yet are dropped and those on the wire get a
   grace period before the lease is released;
6. metrics and health endpoints.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web
from prometheus_client import disable_created_metrics

from batch.api.events import identity
from batch.api.yamlio import FileInputError, read_text_file
from batch.kube.binder import Binder, BindOutcome, BindRequest, Evictor, EvictRequest
from batch.kube.client import RESOURCES, ApiError, KubeClient
from batch.kube.config import ClusterAccess, load_access
from batch.kube.dispatch import InFlight, StatusQueue
from batch.kube.fairshare import fair_share_annotations
from batch.kube.informer import Reflector, ReflectorSet
from batch.kube.leader import LeaderElector
from batch.kube.ledger_hook import SchedulerLedger
from batch.kube.limits import BIND_CONCURRENCY
from batch.kube.metrics import SchedulerMetrics
from batch.kube.podcond import PodConditions, scheduled_event
from batch.kube.protobuf import MEDIA_TYPE, ProtobufCreates
from batch.kube.session_gauges import SessionGauges
from batch.kube.status import EventSpec, StatusWriter
from batch.kube.usage_feed import UsageFeed
from batch.ledger.health import LedgerCollector
from batch.model.cache import ClusterCache
from batch.model.status import TaskStatus
from batch.scheduler import Scheduler
from batch.scheduler.config import ConfigError, SchedulerConfig, load_config
from batch.scheduler.framework.decisions import Decisions, Event

__all__ = ["SchedulerOptions", "SchedulerService", "load_scheduler_conf"]

log = logging.getLogger(__name__)
disable_created_metrics()  # type: ignore[no-untyped-call]

WATCHED_KINDS = ("Node", "Pod", "PodGroup", "Queue", "PriorityClass", "HyperNode", "Namespace")


#: status writes (PodGroup, Queue, pod) in flight at once, beside the binds
STATUS_CONCURRENCY = 32
#: status writes in flight at once while binds wait for the wire: binds go first. More makes
#: PodGroup statuses follow the binds more closely at the binds' expense (200 nodes, 4,000
#: single pods on a loaded machine: 16 had 0.17 of the PodGroups Running at the last bind, not
#: 0.00, and bound about 15 % fewer pods a second)
STATUS_CONCURRENCY_WHILE_BINDING = 4
#: events (pods' `Scheduled` above all, one per bind) in flight at once meanwhile: a share of
#: their own, or they trail the binds by minutes (issue 33)
EVENT_CONCURRENCY_WHILE_BINDING = 32
#: binds and evictions queued behind those on the wire before sessions wait: none. A session
#: holds the event loop, and a queued bind then waits the whole session for a worker (a
#: 20,000-job session at the end of a burst stalled the last binds for seconds, issue 33);
#: its own binds would only queue behind the others anyway
QUEUED_BEFORE_SESSIONS_WAIT = 0
#: binds assumed and queued between two turns of the event loop
DISPATCH_CHUNK = 500
#: while binds are queued, a session at most once per this many times the last one's length:
#: it costs a core's share beside the binds, not the binds' event loop
BUSY_SESSION_GAP = 3.0
#: seconds a stopping replica waits for requests on the wire, and for its pending statuses
DRAIN_GRACE_S = 2.0


def _always() -> bool:
    return True


@dataclass
class Outbox:
    """Where a session's decisions go: sent in the background, never awaited by the session."""

    binder: Binder
    evictor: Evictor
    requests: InFlight
    statuses: StatusQueue
    #: a new guard per session: it holds while the leadership current at the session lasts
    fence: Callable[[], Callable[[], bool]] = field(default=lambda: _always)

    async def close(self, *, leading: bool) -> None:
        """Settle in-flight work. Binds and evictions not sent are dropped (the pods stay
        Pending at the API server for whoever leads next); those on the wire get a grace
        period. Statuses are flushed only while this replica still leads."""
        await self.requests.close(DRAIN_GRACE_S)
        await self.statuses.close(DRAIN_GRACE_S if leading else 0.0)


@dataclass
class SchedulerOptions:
    """Command-line options of `tephra scheduler` (and the sandbox's embedded scheduler)."""

    kubeconfig: Path | None = None
    scheduler_conf: Path | None = None
    scheduler_names: tuple[str, ...] = ("volcano",)
    schedule_period: float = 1.0
    default_queue: str = "default"
    leader_elect: bool = False
    lease_name: str = "tephra-scheduler"
    lease_namespace: str = "kube-system"
    lease_seconds: int = 10
    renew_seconds: float = 2.0
    identity: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    metrics_port: int | None = None
    healthz_port: int | None = None
    bind_concurrency: int = BIND_CONCURRENCY
    db_url: str | None = None
    #: how Bindings and Events are sent (`--kube-api-content-type`, as kube-scheduler's):
    #: protobuf, which the apiserver decodes faster (docs/benchmarks.md, "The wire format"),
    #: or application/json; a 415 answer to protobuf turns to JSON on its own
    kube_api_content_type: str = MEDIA_TYPE


def load_scheduler_conf(path: Path | None) -> SchedulerConfig:
    """The scheduler configuration in `path` (Tephra's default when None); a ConfigError names
    the file."""
    from batch.scheduler.config import TEPHRA_DEFAULT_CONFIG

    if path is None:
        return load_config(TEPHRA_DEFAULT_CONFIG)
    try:
        text = read_text_file(path)
    except FileInputError as exc:
        raise ConfigError(f"cannot read scheduler configuration {path}: {exc.reason}") from None
    try:
        return load_config(text)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


class SchedulerService:
    """One scheduler replica. `await service.run(stop)` until `stop` is set."""

    def __init__(self, options: SchedulerOptions, *, access: ClusterAccess | None = None) -> None:
        self.options = options
        self.access = access or load_access(options.kubeconfig)
        self.config = load_scheduler_conf(options.scheduler_conf)
        self._conf_mtime = (
            options.scheduler_conf.stat().st_mtime if options.scheduler_conf else None
        )
        self.metrics = SchedulerMetrics()
        self.cache = ClusterCache(
            scheduler_names=options.scheduler_names, default_queue=options.default_queue
        )
        self.scheduler = Scheduler(self.cache, self.config)
        self.sessions = 0
        self.synced = False
        self.ready = threading.Event()
        self.last_session_at = 0.0
        self._observers: list[Callable[[str, str, dict[str, Any]], None]] = []
        self._last_decisions: Decisions | None = None
        #: pending pods' PodScheduled conditions offered so far (batch.kube.podcond)
        self.pod_conditions = PodConditions()
        self._lapsed = False  # the last session found the leadership not current
        #: the loop ended because the Lease was lost: the process should exit non-zero so
        #: that it is restarted with fresh state (kube-scheduler exits 1 too)
        self.lost_leadership = False
        #: queues whose fair-share figures the metrics export
        self.gauges = SessionGauges(self.metrics, self.cache)
        self.ledger: SchedulerLedger | None = None
        self._ledger_metrics: LedgerCollector | None = None
        #: changes to the cache held back while a session reads it in its thread
        self._held: list[Callable[[], None]] | None = None
        #: how long the last session took, dispatch included
        self.session_seconds = 0.0
        self.usage_feed = UsageFeed(
            self.cache, on_state=self.gauges.usage_state, change=self._change
        )

    # -- cache feed ---------------------------------------------------------------------
    def _change(self, apply: Callable[[], None]) -> None:
        """Make a change to the cache now, or, while a session reads the cache in its thread,
        once that session's decisions are dispatched: as if it had arrived after the session
        (as it did when sessions held the event loop)."""
        if self._held is None:
            apply()
        else:
            self._held.append(apply)

    def _release_held(self) -> None:
        held, self._held = self._held or [], None
        for apply in held:
            try:
                apply()
            except Exception:
                log.exception("a change to the cache held back during a session failed")

    def _sink(self, kind: str, etype: str, obj: dict[str, Any]) -> None:
        self._change(functools.partial(self._apply, kind, etype, obj))
        for observe in self._observers:
            observe(kind, etype, obj)

    def _apply(self, kind: str, etype: str, obj: dict[str, Any]) -> None:
        try:
            self.cache.apply(kind, etype, obj)
        except Exception:  # a malformed object must not stop the watch
            meta = obj.get("metadata") or {}
            log.exception("cache rejected %s %s/%s", kind, meta.get("namespace"), meta.get("name"))

    def _reload_config_if_changed(self) -> None:
        path = self.options.scheduler_conf
        if path is None:
            return
        try:
            mtime = path.stat().st_mtime
        except OSError:
            return
        if mtime == self._conf_mtime:
            return
        self._conf_mtime = mtime
        try:
            self.config = load_scheduler_conf(path)
            self.scheduler = Scheduler(self.cache, self.config)
            log.info("reloaded scheduler configuration from %s", path)
        except ConfigError as exc:
            log.error("keeping the previous scheduler configuration: %s", exc)

    async def _ensure_default_queues(self, client: KubeClient) -> None:
        wanted = {"root": False, self.options.default_queue: True}
        for name, reclaimable in wanted.items():
            spec: dict[str, Any] = {"weight": 1, "reclaimable": reclaimable}
            if name != "root":
                spec["parent"] = "root"
            body = {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": name},
                "spec": spec,
            }
            deadline = time.monotonic() + 60
            while True:
                try:
                    await client.create(RESOURCES["Queue"], body)
                    log.info("created queue %s", name)
                    break
                except ApiError as exc:
                    if exc.status == 409:
                        break
                    if time.monotonic() > deadline:
                        log.error("could not create queue %s: %s", name, exc)
                        break
                except Exception as exc:
                    if time.monotonic() > deadline:
                        log.error("could not create queue %s: %r", name, exc)
                        break
                await asyncio.sleep(1.0)

    # -- one cycle ------------------------------------------------------------------------
    async def run_once(self, out: Outbox) -> None:
        """One session; its decisions go to `out` and are sent in the background. None while
        the leadership is not current: the session would be dropped unsent."""
        guard = out.fence()
        if not self._leading(guard):
            return
        self._reload_config_if_changed()
        self.usage_feed.tick(self.config, self.ledger.recorder if self.ledger else None)
        started = time.perf_counter()
        self._held = []
        try:
            decisions = await self._session()
            await self._dispatch(out, decisions, guard, started)
        finally:
            self._release_held()
        self.session_seconds = time.perf_counter() - started

    async def _session(self) -> Decisions:
        """The session, in a thread of its own: the event loop meanwhile keeps sending binds
        and events and writing statuses (a 20,000-job session held it for 4 s, issue 33). The
        session is pure Python, so the loop gets the interpreter at every switch interval; the
        changes to the cache that arrive meanwhile are held back (`_change`)."""
        running = asyncio.ensure_future(asyncio.to_thread(self.scheduler.run_once, time.time()))
        try:
            return await asyncio.shield(running)
        except asyncio.CancelledError:
            await asyncio.wait([running])  # it reads the cache until it ends
            raise

    async def _dispatch(
        self, out: Outbox, decisions: Decisions, guard: Callable[[], bool], started: float
    ) -> None:
        """The session's decisions, to `out`. The answers to the first binds, which go out
        while the others are still being dispatched, are held back with the cache's other
        changes (`_change`): a failure always finds the status it must hold back offered."""
        self.sessions += 1
        if decisions is self._last_decisions:
            # Nothing changed since the last session (so it dispatched no bind or eviction):
            # only status writes that failed then are worth making again.
            out.statuses.kick()
            return
        self._last_decisions = decisions
        self._observe_session(decisions)
        self._dispatch_evictions(out, decisions, guard)
        await self._dispatch_binds(out, decisions, guard)
        self._offer_statuses(out.statuses, decisions)
        self._assume_phases(decisions)
        self.gauges.export(decisions)
        self.metrics.e2e_latency.observe((time.perf_counter() - started) * 1000)
        self.last_session_at = time.time()

    def _offer_statuses(self, statuses: StatusQueue, decisions: Decisions) -> None:
        """The session's statuses, nominations, pending pods' conditions, events and
        fair-share annotations, to be written in the background (by the leader only, when they
        differ from the objects')."""
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        conditions, pod_events = self.pod_conditions.plan(self.cache, decisions, stamp)
        statuses.offer(
            podgroups=decisions.podgroup_status,
            queues=decisions.queue_status,
            pods=self._nominations(decisions),
            pod_conditions=conditions,
            condition_events=pod_events,
            events=[self._podgroup_event(ev) for ev in decisions.events],
            fair_shares=fair_share_annotations(decisions, self.cache),
            binding=self._binding_podgroups(),
        )

    def _assume_phases(self, decisions: Decisions) -> None:
        """The session's PodGroup phases, assumed in the cache until the watch shows them.
        Otherwise a PodGroup whose status is held back while its binds are on their way
        stays Pending to every session until it is written, and each session beside 20,000
        binds admitted all 20,000 jobs again: every job changed, so nothing incremental held
        and the session took seconds (issue 33)."""
        statuses = decisions.podgroup_status
        new = decisions.podgroup_status_new
        for namespace, name in statuses if new is None else new:
            phase = statuses[(namespace, name)].get("phase")
            if isinstance(phase, str):
                self.cache.assume_phase(f"{namespace}/{name}", phase)

    def _binding_podgroups(self) -> set[tuple[str, str]]:
        """PodGroups (namespace, name) with a pod assumed bound that the watch has not shown
        bound yet: their status would be stale by the time the binds land."""
        tasks = self.cache.tasks
        out: set[tuple[str, str]] = set()
        for uid in self.cache.assumed:
            task = tasks.get(uid)
            if task is not None and task.job_id:
                namespace, _, name = task.job_id.partition("/")
                out.add((namespace, name))
        return out

    def _leading(self, guard: Callable[[], bool]) -> bool:
        """Whether a session may run; says so when that changes."""
        leading = guard()
        if leading and self._lapsed:
            log.warning("leadership current again: scheduling resumes")
            self.metrics.is_leader.set(1)
        elif not leading and not self._lapsed:
            log.warning("leadership not current (lease not renewed in time): no session")
            self.metrics.is_leader.set(0)
        self._lapsed = not leading
        return leading

    def _dropped(self, counts: Mapping[str, int]) -> None:
        """Requests dropped unsent because the leadership they were decided under lapsed."""
        for kind, n in sorted(counts.items()):
            self.metrics.dropped_requests.labels(kind=kind).inc(n)
            log.warning("dropped %d %s: leadership not current", n, kind if n == 1 else f"{kind}s")

    def _observe_session(self, decisions: Decisions) -> None:
        """The ledger's view of the session and its timings as metrics."""
        if self.ledger is not None:
            self.ledger.observe_session(self.cache, decisions, time.time())
        for stage, seconds in decisions.timings.items():
            if stage == "open":
                self.metrics.open_session.observe(seconds * 1000)
            elif stage != "close":
                self.metrics.action_latency.labels(action=stage).observe(seconds * 1000)
        for (plugin, hook), seconds in decisions.plugin_timings.items():
            self.metrics.plugin_latency.labels(plugin=plugin, OnSession=hook).observe(
                seconds * 1000
            )

    def _dispatch_evictions(
        self, out: Outbox, decisions: Decisions, guard: Callable[[], bool]
    ) -> None:
        if not decisions.evictions:
            return
        self.gauges.count_evictions(decisions)
        for e in decisions.evictions:
            victim = EvictRequest(e.namespace, e.name, e.uid, e.reason, e.job_id)
            self.cache.assume_evict(victim.uid)

            async def send(victim: EvictRequest = victim) -> None:
                answer = await out.evictor.evict_one(victim, guard=guard)
                self._change(functools.partial(self._evicted, *answer))

            drop = functools.partial(
                self._change, functools.partial(self.cache.evict_failed, victim.uid)
            )
            out.requests.submit(send, drop, guard=guard, kind="eviction")

    def _evicted(self, victim: EvictRequest, ok: bool, message: str) -> None:
        self.metrics.evictions.labels(result="ok" if ok else "failed").inc()
        if not ok:
            self.cache.evict_failed(victim.uid)  # retried, or replaced, next session
            log.warning("eviction of %s/%s failed: %s", victim.namespace, victim.pod, message)

    async def _dispatch_binds(
        self, out: Outbox, decisions: Decisions, guard: Callable[[], bool]
    ) -> None:
        """Assume and queue the binds, `DISPATCH_CHUNK` at a time: the first are on the wire
        while the next are assumed (20,000 binds took 3 s to dispatch, issue 33)."""
        for i, b in enumerate(decisions.binds):
            if i and not i % DISPATCH_CHUNK:
                await asyncio.sleep(0)
            req = BindRequest(b.namespace, b.name, b.uid, b.node, b.job_id)
            self.cache.assume_bind(req.uid, req.node)

            async def send(req: BindRequest = req) -> None:
                answer = await out.binder.bind_one(req, guard=guard)
                self._change(functools.partial(self._bound, out, *answer))
                if answer[1] is BindOutcome.BOUND:
                    # On the bind's own worker, as kube-scheduler's binding cycle records it:
                    # the events keep pace with the binds instead of trailing them (issue 33)
                    await out.statuses.post(
                        scheduled_event(req.namespace, req.pod, req.uid, req.node)
                    )

            drop = functools.partial(
                self._change, functools.partial(self.cache.bind_failed, req.uid)
            )
            out.requests.submit(send, drop, guard=guard, kind="bind")

    def _bound(self, out: Outbox, req: BindRequest, outcome: BindOutcome, message: str) -> None:
        """Apply a bind's answer: a bind that did not take returns its task to Pending."""
        self.metrics.binds.labels(result=outcome.value).inc()
        if outcome is BindOutcome.BOUND:
            self.metrics.schedule_attempts.labels(result="scheduled").inc()
            task = self.cache.tasks.get(req.uid)
            if task is not None and task.creation:
                waited_ms = (time.time() - task.creation) * 1000
                self.metrics.task_latency.labels(stage="Bound").observe(waited_ms)
            return
        if outcome is BindOutcome.FAILED:
            self.metrics.schedule_attempts.labels(result="error").inc()
            # Never report a gang Running while binds of its minimum are failing.
            out.statuses.hold_running(req.job)
            log.warning("bind %s/%s -> %s failed: %s", req.namespace, req.pod, req.node, message)
        self.cache.bind_failed(req.uid)

    def _nominations(self, decisions: Decisions) -> list[tuple[str, str, dict[str, Any]]]:
        """Patches keeping `status.nominatedNodeName` equal to this session's pipelines.

        A pipelined preemptor waits for its victims to go; the nomination is how the next
        sessions (and anyone looking) know which node's released resources are its. A pod the
        session did not pipeline again (its gang no longer fits there, or it was bound) loses
        its nomination: otherwise the `nominated` plugin would keep that node's resources from
        every other job for as long as the pod stays Pending.
        """
        patches: list[tuple[str, str, dict[str, Any]]] = []
        pipelined: set[str] = set()
        for p in decisions.pipelines:
            pipelined.add(p.uid)
            task = self.cache.tasks.get(p.uid)
            if task is not None and task.nominated_node != p.node:
                patches.append((p.namespace, p.name, {"nominatedNodeName": p.node}))
        for uid in sorted(self.cache.nominated_tasks - pipelined):
            task = self.cache.tasks.get(uid)
            if task is not None and task.status is TaskStatus.PENDING:
                patches.append((task.namespace, task.name, {"nominatedNodeName": None}))
        return patches

    def _podgroup_event(self, ev: Event) -> EventSpec:
        """A session's event about a PodGroup, naming the object as the cache last saw it."""
        job = self.cache.jobs.get(f"{ev.namespace}/{ev.name}")
        uid, version = identity(job.podgroup if job is not None else None)
        return EventSpec(
            kind=ev.kind,
            namespace=ev.namespace,
            name=ev.name,
            reason=ev.reason,
            message=ev.message,
            type=ev.type,
            uid=uid,
            resource_version=version,
        )

    # -- HTTP endpoints -------------------------------------------------------------------
    async def _start_http(self) -> list[web.AppRunner]:
        runners: list[web.AppRunner] = []

        async def metrics(_req: web.Request) -> web.Response:
            return web.Response(body=self.metrics.render(), content_type="text/plain")

        async def healthz(_req: web.Request) -> web.Response:
            ledger = self.ledger  # a recorder down is said, never failed: it only records
            lines = ["ok"] if ledger is None else ["ok", ledger.recorder.health().line()]
            return web.Response(text="\n".join(lines))

        async def readyz(_req: web.Request) -> web.Response:
            if self.synced:
                return web.Response(text="ok")
            return web.Response(status=503, text="cache not synced")

        ports = {self.options.metrics_port, self.options.healthz_port} - {None}
        for port in ports:
            app = web.Application()
            app.router.add_get("/metrics", metrics)
            app.router.add_get("/healthz", healthz)
            app.router.add_get("/readyz", readyz)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "0.0.0.0", port).start()
            runners.append(runner)
        return runners

    # -- main loop ------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        runners = await self._start_http()
        connections = self.options.bind_concurrency + STATUS_CONCURRENCY + 16
        try:
            async with KubeClient(self.access, max_connections=connections) as client:
                leads, elector = await self._lead(client, stop)
                if leads:
                    await self._serve(client, stop, elector)
        finally:
            await self._stop_http(runners)

    async def _lead(
        self, client: KubeClient, stop: asyncio.Event
    ) -> tuple[bool, LeaderElector | None]:
        """Whether this replica leads (False: `stop` came first), with its elector (None
        without leader election)."""
        if not self.options.leader_elect:
            self.metrics.is_leader.set(1)  # the only replica: it leads
            return True, None
        elector = LeaderElector(
            client,
            name=self.options.lease_name,
            namespace=self.options.lease_namespace,
            identity=self.options.identity,
            lease_seconds=self.options.lease_seconds,
            renew_seconds=self.options.renew_seconds,
        )
        acquire = asyncio.create_task(elector.acquire())
        stopper = asyncio.create_task(stop.wait())
        await asyncio.wait({acquire, stopper}, return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        if not acquire.done():
            acquire.cancel()
            return False, None
        self.metrics.is_leader.set(1)
        return True, elector

    async def _serve(
        self, client: KubeClient, stop: asyncio.Event, elector: LeaderElector | None
    ) -> None:
        """Sessions until `stop` or the loss of the lease; then in-flight work is settled
        before the lease is released, so a new leader never meets a bind of this one."""
        hold_task = asyncio.create_task(elector.hold()) if elector is not None else None
        reflectors: ReflectorSet | None = None
        out: Outbox | None = None
        try:
            await self._ensure_default_queues(client)
            if self.options.db_url:
                self.ledger = await asyncio.get_running_loop().run_in_executor(
                    None, SchedulerLedger, self.options.db_url
                )
                self._ledger_metrics = LedgerCollector(self.ledger.recorder, "scheduler")
                self.metrics.registry.register(self._ledger_metrics)
            out = self._outbox(client, elector)
            self._observers.append(out.statuses.writer.observe)
            reflectors = ReflectorSet(
                [Reflector(client, RESOURCES[kind], self._sink) for kind in WATCHED_KINDS]
            )
            reflectors.start()
            await self._loop(reflectors, out, stop, elector)
        finally:
            if out is not None:
                await out.close(leading=elector is None or elector.current())
            if reflectors is not None:
                await reflectors.stop()
            if hold_task is not None:
                hold_task.cancel()
            if elector is not None:
                await elector.release()
            self.metrics.is_leader.set(0)
            if self._ledger_metrics is not None:
                self.metrics.registry.unregister(self._ledger_metrics)
                self._ledger_metrics = None
            if self.ledger is not None:
                self.ledger.close()
                self.ledger = None

    def _outbox(self, client: KubeClient, elector: LeaderElector | None) -> Outbox:
        concurrency = self.options.bind_concurrency
        failures = self.metrics.status_write_failures
        protobuf = ProtobufCreates.for_content_type(self.options.kube_api_content_type)
        writer = StatusWriter(
            client,
            concurrency=STATUS_CONCURRENCY,
            on_failed=lambda kind: failures.labels(kind=kind).inc(),
            protobuf=protobuf,
        )
        requests = InFlight(
            workers=concurrency,
            limit=concurrency + QUEUED_BEFORE_SESSIONS_WAIT + 1,
            on_dropped=self._dropped,
        )
        return Outbox(
            binder=Binder(client, concurrency=concurrency, protobuf=protobuf),
            evictor=Evictor(client),
            requests=requests,
            statuses=StatusQueue(
                writer,
                allowed=_always if elector is None else elector.current,
                on_written=self.metrics.status_writes.labels(kind="status").inc,
                busy=lambda: requests.outstanding > requests.workers,
                busy_concurrency=STATUS_CONCURRENCY_WHILE_BINDING,
                busy_event_concurrency=EVENT_CONCURRENCY_WHILE_BINDING,
            ),
            fence=(lambda: _always) if elector is None else elector.fence,
        )

    async def _loop(
        self,
        reflectors: ReflectorSet,
        out: Outbox,
        stop: asyncio.Event,
        elector: LeaderElector | None,
    ) -> None:
        while not await reflectors.wait_synced(timeout=1.0):
            if stop.is_set():
                return
        self.synced = True
        self.metrics.cache_synced.set(1)
        log.info("cache synced; scheduling every %.2fs", self.options.schedule_period)
        while not stop.is_set():
            if elector is not None and elector.lost.is_set():
                log.error("leadership lost: stopping the scheduling loop")
                self.lost_leadership = True
                break
            await self._room(out, stop)
            cycle_start = time.monotonic()
            try:
                await self.run_once(out)
            except Exception:
                log.exception("scheduling session failed")
            self.ready.set()
            delay = self.options.schedule_period - (time.monotonic() - cycle_start)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), max(delay, 0.0))

    async def _room(self, out: Outbox, stop: asyncio.Event) -> None:
        """Backpressure: no session while binds are queued behind those on the wire, but one
        every `BUSY_SESSION_GAP` times the last session's length all the same. That session
        runs beside the binds (`_session`) and offers the statuses of the PodGroups bound
        meanwhile, which otherwise waited for the last bind of a burst (issue 33)."""
        gap = max(self.options.schedule_period, BUSY_SESSION_GAP * self.session_seconds)
        await out.requests.room(stop, timeout=gap)

    @staticmethod
    async def _stop_http(runners: list[web.AppRunner]) -> None:
        for runner in runners:
            await runner.cleanup()


class SchedulerComponent:
    """The scheduler as a component of `tephra sandbox up`: its own thread and event loop."""

    name = "scheduler"

    def __init__(self, options: SchedulerOptions | None = None) -> None:
        self.options = options or SchedulerOptions()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self.service: SchedulerService | None = None
        self.error: BaseException | None = None

    def start(self, *, kubeconfig: Path, options: Any = None) -> None:
        opts = self.options
        opts.kubeconfig = kubeconfig
        for attr in ("scheduler_conf", "schedule_period", "db_url"):
            value = getattr(options, attr, None)
            if value is not None:
                setattr(opts, attr, Path(value) if attr == "scheduler_conf" else value)
        self.service = SchedulerService(opts)
        started = threading.Event()

        def target() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._stop = asyncio.Event()
            started.set()
            try:
                assert self.service is not None
                loop.run_until_complete(self.service.run(self._stop))
            except BaseException as exc:
                self.error = exc
                log.exception("embedded scheduler crashed")
            finally:
                loop.close()

        self._thread = threading.Thread(target=target, name="tephra-scheduler", daemon=True)
        self._thread.start()
        started.wait(5)

    def wait_ready(self, timeout: float) -> bool:
        return self.service is not None and self.service.ready.wait(timeout)

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(15)
