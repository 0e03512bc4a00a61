"""One scheduling cycle: ``run_session`` (pure function) and ``Scheduler`` (holds a memo).

``run_session(cache, config, now=...)`` opens a session, runs the configured actions in order,
closes it and returns the ``Decisions``; the cache is left exactly as it was. ``Scheduler`` wraps
the same call and, when neither the cache (``ClusterCache.generation``) nor the configuration
changed and no time-dependent plugin could decide differently, returns the previous decisions
without recomputing them (Volcano would recompute the same result). ``Scheduler`` also keeps the
configuration's plugin and action instances (``Kit``) across sessions instead of building them
for each one, as Volcano does: every plugin and action sets up its per-session state when a
session opens or the action executes, so a kept instance decides as a new one.
"""

from __future__ import annotations

import contextlib
import time

import batch.scheduler.builtins  # noqa: F401 (fills ACTIONS and PLUGINS)
from batch.gcpause import gc_paused
from batch.model.cache import ClusterCache
from batch.scheduler.config import SchedulerConfig
from batch.scheduler.framework.arguments import Arguments
from batch.scheduler.framework.close import close_session
from batch.scheduler.framework.decisions import Decisions
from batch.scheduler.framework.hooks import Hooks
from batch.scheduler.framework.instances import forget_sessions
from batch.scheduler.framework.registry import (
    PLUGINS,
    Action,
    Plugin,
    build_actions,
    build_plugins,
    changes_by,
)
from batch.scheduler.framework.session import Session


class Kit:
    """The plugin and action instances of one configuration, built once from the registry and
    used by every session run with it (``Scheduler``); and the parsed arguments its
    time-dependent plugins answer ``next_change`` with."""

    __slots__ = ("actions", "config", "hooks", "plugins", "timed")

    def __init__(self, config: SchedulerConfig) -> None:
        self.config = config
        self.plugins: list[list[Plugin]] = build_plugins(config)
        self.actions: list[tuple[str, Action]] = build_actions(config)
        #: the extension points, emptied when a session is released, refilled at the next open
        self.hooks = Hooks(len(config.tiers))
        self.timed: list[tuple[type[Plugin], Arguments]] = [
            (PLUGINS[o.name], Arguments(f"plugin {o.name}", o.arguments))
            for tier in config.tiers
            for o in tier.plugins
            if PLUGINS[o.name].time_dependent
        ]


def open_session(
    cache: ClusterCache,
    config: SchedulerConfig,
    *,
    now: float,
    uid: str | None = None,
    kit: Kit | None = None,
) -> Session:
    """A session over ``cache`` with the plugins ``config`` names: ``kit``'s (built from
    ``config``), else new ones built from the registry."""
    if kit is None:
        return Session(cache, config, build_plugins(config), now=now, uid=uid)
    return Session(cache, config, kit.plugins, now=now, uid=uid, hooks=kit.hooks)


def run_session(
    cache: ClusterCache,
    config: SchedulerConfig,
    *,
    now: float,
    uid: str | None = None,
    pause_gc: bool = True,
    kit: Kit | None = None,
) -> Decisions:
    """Run one session over ``cache`` with ``config`` at wall/virtual time ``now`` (seconds).

    With ``pause_gc`` (default) Python's cyclic garbage collector is paused for the session:
    a cycle creates many short-lived objects next to a large live cluster model, and full
    collections scanning that model would otherwise cost more than the scheduling itself.
    Everything the session allocates is freed by reference counting; the collector is
    re-enabled (if it was enabled) before returning. ``kit`` (built from ``config``) lends
    its plugin and action instances; without it the session builds its own.
    """
    if kit is not None and kit.config is not config:
        raise ValueError("run_session: the kit was built from another configuration")
    with gc_paused() if pause_gc else contextlib.nullcontext():
        ssn = open_session(cache, config, now=now, uid=uid, kit=kit)
        actions = kit.actions if kit is not None else build_actions(config)
        try:
            try:
                for name, action in actions:
                    t0 = time.perf_counter()
                    ssn.action = name
                    action.execute(ssn)
                    ssn.timings.setdefault(name, time.perf_counter() - t0)
            except BaseException:
                ssn.rollback()
                ssn.release()
                raise
            return close_session(ssn)
        finally:
            forget_sessions([action for _, action in actions])


def apply_decisions(cache: ClusterCache, decisions: Decisions) -> None:
    """Bookkeeping after dispatch: every bind assumed, every eviction assumed (simulator/tests)."""
    for b in decisions.binds:
        cache.assume_bind(b.uid, b.node)
    for e in decisions.evictions:
        cache.assume_evict(e.uid)


class Scheduler:
    """A cache + configuration pair that runs cycles, skipping cycles where nothing changed."""

    def __init__(self, cache: ClusterCache, config: SchedulerConfig) -> None:
        self.cache = cache
        self.config = config
        self._memo: tuple[int, int, float, Decisions] | None = None
        self.memo_hits = 0
        self._kit: Kit | None = None

    @property
    def kit(self) -> Kit:
        """The plugin and action instances of ``config`` (built again when it is replaced)."""
        kit = self._kit
        if kit is None or kit.config is not self.config:
            kit = self._kit = Kit(self.config)
        return kit

    def next_change(self, since: float) -> float | None:
        """The earliest time after ``since`` at which a plugin could decide differently with
        the same state (``Plugin.next_change``: None never, ``since`` or earlier at any time)."""
        first: float | None = None
        for cls, args in self.kit.timed:
            got = cls.next_change(self.cache, args, since)
            if got is not None and (first is None or got < first):
                first = got
        return first

    def time_sensitive(self, since: float, now: float) -> bool:
        """Could a plugin decide differently at ``now`` than at ``since`` with the same state?"""
        return changes_by(self.next_change(since), since, now)

    def run_once(self, now: float) -> Decisions:
        memo = self._memo
        gen = self.cache.generation
        if (
            memo is not None
            and memo[0] == gen
            and memo[1] == id(self.config)
            and not self.time_sensitive(memo[2], now)
        ):
            self.memo_hits += 1
            return memo[3]
        d = run_session(self.cache, self.config, now=now, kit=self.kit)
        self._memo = (gen, id(self.config), now, d)
        return d
