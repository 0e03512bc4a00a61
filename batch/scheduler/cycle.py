"""One scheduling cycle: ``run_session`` (pure function) and ``Scheduler`` (holds a memo).

``run_session(cache, config, now=...)`` opens a session, runs the configured actions in order,
closes it and returns the ``Decisions``; the cache is left exactly as it was. ``Scheduler`` wraps
the same call and, when neither the cache (``ClusterCache.generation``) nor the configuration
changed and no time-dependent plugin could decide differently, returns the previous decisions
without recomputing them (Volcano would recompute the same result).
"""

from __future__ import annotations

import gc
import time

import batch.scheduler.builtins  # noqa: F401 (fills ACTIONS and PLUGINS)
from batch.model.cache import ClusterCache
from batch.scheduler.config import SchedulerConfig
from batch.scheduler.framework.arguments import Arguments
from batch.scheduler.framework.close import close_session
from batch.scheduler.framework.decisions import Decisions
from batch.scheduler.framework.registry import ACTIONS, PLUGINS, build_plugins, changes_by
from batch.scheduler.framework.session import Session


def open_session(
    cache: ClusterCache, config: SchedulerConfig, *, now: float, uid: str | None = None
) -> Session:
    """A session over ``cache`` with the plugins ``config`` names, built from the registry."""
    return Session(cache, config, build_plugins(config), now=now, uid=uid)


def run_session(
    cache: ClusterCache,
    config: SchedulerConfig,
    *,
    now: float,
    uid: str | None = None,
    pause_gc: bool = True,
) -> Decisions:
    """Run one session over ``cache`` with ``config`` at wall/virtual time ``now`` (seconds).

    With ``pause_gc`` (default) Python's cyclic garbage collector is paused for the session:
    a cycle creates many short-lived objects next to a large live cluster model, and full
    collections scanning that model would otherwise cost more than the scheduling itself.
    Everything the session allocates is freed by reference counting; the collector is
    re-enabled (if it was enabled) before returning.
    """
    was_enabled = gc.isenabled()
    if pause_gc:
        gc.disable()
    try:
        ssn = open_session(cache, config, now=now, uid=uid)
        try:
            for name in config.actions:
                action = ACTIONS[name](config.action_arguments(name))
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
        if pause_gc and was_enabled:
            gc.enable()


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

    def next_change(self, since: float) -> float | None:
        """The earliest time after ``since`` at which a plugin could decide differently with
        the same state (``Plugin.next_change``: None never, ``since`` or earlier at any time)."""
        first: float | None = None
        for tier in self.config.tiers:
            for option in tier.plugins:
                cls = PLUGINS[option.name]
                if not cls.time_dependent:
                    continue
                args = Arguments(f"plugin {option.name}", option.arguments)
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
        d = run_session(self.cache, self.config, now=now)
        self._memo = (gen, id(self.config), now, d)
        return d
