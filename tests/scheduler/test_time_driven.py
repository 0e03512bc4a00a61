"""When time alone changes a decision: ``Plugin.next_change`` (minimum runtimes passing,
lost-work bounds loosening, sla deadlines), which ``Scheduler.run_once``'s memo and the
simulator's idle cycles rely on."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, strategies as st

from batch.model import fixtures as f
from batch.scheduler import Scheduler, load_config
from batch.scheduler.plugins.minruntime import earliest_crossing

from .evict_util import pending, running
from .util import BASIC, NOW, cluster, stamp

times = st.floats(0, 1e6, allow_nan=False, allow_infinity=False)


@given(
    created=st.lists(times, min_size=1, max_size=8),
    starts=st.lists(times, min_size=1, max_size=8),
    ratio=st.floats(1.01, 1000, allow_nan=False),
    since=times,
)
def test_earliest_crossing_is_the_first_pair_that_becomes_allowed(
    created: list[float], starts: list[float], ratio: float, since: float
) -> None:
    # the pairs' crossing times in exact arithmetic; a pair crossing at ``since`` itself may
    # land on either side of it in floats
    r, now = Fraction(ratio), Fraction(since)
    exact = [
        t for c in created for s in starts if (t := (r * Fraction(c) - Fraction(s)) / (r - 1)) > now
    ]
    got = earliest_crossing(created, sorted(starts), ratio, since)
    tol = 1e-3
    if not exact:
        assert got is None or got <= since + tol
        return
    first = float(min(exact))
    if got is None:  # only a crossing at ``since`` up to rounding may be missed
        assert first - since <= tol
        return
    # never late; early only by a rounding-level crossing at ``since`` (a spurious wake)
    assert got <= first + tol
    assert got >= first - tol or got <= since + tol


def _conf(args: str) -> str:
    return BASIC.replace(
        "  - name: conformance\n",
        f"  - name: conformance\n  - name: minruntime\n    arguments: {{{args}}}\n",
    )


def test_next_change_is_when_the_first_pod_passes_its_minimum_runtime() -> None:
    c = cluster(1, cpu="4")
    running(c, "old", ["n0"], start=stamp(3600))
    running(c, "young", ["n0"], start=stamp(60))
    sched = Scheduler(c, load_config(_conf("preemptMinRuntime: 10m")))
    assert sched.next_change(NOW) == pytest.approx(NOW + 540)  # young passes 10 min
    assert not sched.time_sensitive(NOW, NOW + 539)
    assert sched.time_sensitive(NOW, NOW + 540)


def test_next_change_is_when_a_lost_work_bound_first_allows_a_victim() -> None:
    # the victim has run 2 h; the pod has waited 10 min; ratio 4: allowed once
    # 2 h + x <= 4 x (10 min + x), i.e. x = (7200 - 2400) / 3 = 1600 s from now
    c = cluster(1, cpu="4", queues=("a", "b"))
    running(c, "victim", ["n0"], queue="b", start=stamp(7200))
    pending(c, "waiting", 1, queue="a", created=stamp(600))
    sched = Scheduler(c, load_config(_conf("reclaimLostWorkRatio: 4")))
    assert sched.next_change(NOW) == pytest.approx(NOW + 1600)


def test_nothing_time_driven_without_a_pending_pod() -> None:
    c = cluster(1, cpu="4")
    running(c, "victim", ["n0"], start=stamp(7200))
    sched = Scheduler(c, load_config(_conf("reclaimLostWorkRatio: 4")))
    assert sched.next_change(NOW) is None


def test_sla_next_change_is_the_first_deadline_ahead() -> None:
    c = cluster(1, cpu="4")
    conf = BASIC.replace("  - name: conformance\n", "  - name: conformance\n  - name: sla\n")
    for name, created, wait in (("late", 3600, "30m"), ("soon", 600, "15m"), ("none", 60, "")):
        ann = {"volcano.sh/sla-waiting-time": wait} if wait else {}
        c.apply(
            "PodGroup",
            "ADDED",
            f.podgroup(name, created=stamp(created), annotations=ann),
        )
    sched = Scheduler(c, load_config(conf))
    assert sched.next_change(NOW) == pytest.approx(NOW + 300)  # "soon": 10 min + 5 min left
