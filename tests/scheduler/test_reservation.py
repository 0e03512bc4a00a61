"""reservation plugin: EASY backfill for big gangs (runningEstimate from a PodGroup annotation)."""

from __future__ import annotations

from datetime import UTC, datetime

from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.model.status import TaskStatus

from .evict_util import pending, running, settle
from .util import NOW, cluster, run

EST = "tephra.io/running-estimate"
CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance},
            {name: reservation, arguments: {minGangSize: 3}}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
"""
PLAIN = CONF.replace(",\n            {name: reservation, arguments: {minGangSize: 3}}", "")


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def scenario() -> ClusterCache:
    c = cluster(4, cpu="4")
    start = iso(NOW)
    running(c, "a", ["n0", "n1"], cpu="4", start=start, annotations={EST: "100s"})
    running(c, "b", ["n2"], cpu="4", start=start, annotations={EST: "1000s"})
    pending(c, "gang", 3, cpu="4", created="2026-01-01T00:00:00Z")
    pending(c, "short", 1, cpu="4", annotations={EST: "50s"}, created="2026-01-01T00:00:01Z")
    pending(c, "long", 1, cpu="4", annotations={EST: "500s"}, created="2026-01-01T00:00:02Z")
    pending(c, "unknown", 1, cpu="4", created="2026-01-01T00:00:03Z")
    return c


def finish_due(c: ClusterCache, now: float) -> None:
    """Delete the pods of running jobs whose estimate has elapsed (they completed)."""
    for job in list(c.jobs.values()):
        est = job.annotations.get(EST)
        if est is None:
            continue
        secs = float(est.rstrip("s"))
        on = [t for t in job.tasks.values() if t.status is TaskStatus.RUNNING]
        if not on:
            continue
        start = min(
            float(
                datetime.fromisoformat(
                    str((t.raw or {})["status"]["startTime"]).replace("Z", "+00:00")
                ).timestamp()
            )
            for t in on
        )
        if start + secs <= now:
            for t in on:
                assert t.raw is not None
                c.apply("Pod", "DELETED", t.raw)


def simulate(conf: str, until: float = 300.0) -> dict[str, float]:
    """Cycles every 10 s; returns the time each job first got a bind."""
    c = scenario()
    started: dict[str, float] = {}
    t = NOW
    while t <= NOW + until:
        finish_due(c, t)
        d = run(c, conf, now=t)
        for b in d.binds:
            started.setdefault(b.job_id, t)
        settle(c, d, now_iso=iso(t))
        t += 10.0
    return started


def test_reservation_due_time_and_nodes() -> None:
    c = scenario()
    d = run(c, CONF)
    r = d.pending_reasons["default/gang"].details["reservation"]
    assert r["due"] == NOW + 100
    assert sorted(r["nodes"]) == ["n0", "n1", "n3"]
    # only the job that ends before the reservation is due may use the free reserved node
    assert {b.job_id for b in d.binds} == {"default/short"}


def test_big_gang_starts_by_its_reservation_while_backfilled_jobs_finish_first() -> None:
    started = simulate(CONF)
    assert started["default/gang"] <= NOW + 100
    assert started["default/short"] == NOW
    assert started["default/short"] + 50 <= started["default/gang"]
    # the long and unknown jobs never jumped ahead of the gang
    assert started.get("default/long", float("inf")) >= started["default/gang"]
    assert started.get("default/unknown", float("inf")) >= started["default/gang"]


def test_without_reservation_small_jobs_delay_the_gang() -> None:
    started = simulate(PLAIN)
    assert started.get("default/gang", float("inf")) > NOW + 100
    assert started["default/long"] == NOW + 50


def test_small_gangs_do_not_reserve_and_bad_arguments_are_rejected() -> None:
    import pytest

    from batch.scheduler import ConfigError, load_config

    c = cluster(2, cpu="4")
    running(c, "a", ["n0"], cpu="4", annotations={EST: "100s"})
    pending(c, "pair", 2, cpu="4")  # below minGangSize 3
    pending(c, "other", 1, cpu="4")
    d = run(c, CONF)
    assert {b.job_id for b in d.binds} == {"default/other"}
    with pytest.raises(ConfigError, match="defaultRunningEstimate"):
        load_config(CONF.replace("minGangSize: 3", "defaultRunningEstimate: soon"))
    assert f.GROUP  # fixtures in use


def test_two_reservations_do_not_share_nodes() -> None:
    conf = CONF.replace("minGangSize: 3", "minGangSize: 2, maxReservations: 2")
    c = cluster(4, cpu="4")
    start = iso(NOW)
    running(c, "a", ["n0", "n1"], cpu="4", start=start, annotations={EST: "100s"})
    running(c, "b", ["n2", "n3"], cpu="4", start=start, annotations={EST: "200s"})
    pending(c, "g1", 2, cpu="4", created="2026-01-01T00:00:00Z")
    pending(c, "g2", 2, cpu="4", created="2026-01-01T00:00:01Z")
    d = run(c, conf)
    r1 = d.pending_reasons["default/g1"].details["reservation"]
    r2 = d.pending_reasons["default/g2"].details["reservation"]
    assert (r1["due"], sorted(r1["nodes"])) == (NOW + 100, ["n0", "n1"])
    assert (r2["due"], sorted(r2["nodes"])) == (NOW + 200, ["n2", "n3"])
