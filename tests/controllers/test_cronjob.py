"""The CronJob controller's pure sync on a fake clock (Volcano's and Kubernetes' CronJob rules)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from batch.controllers.cronjob import job_name, reconcile_cronjob, schedule_of
from batch.controllers.effects import DeleteObject, EmitEvent, ReconcileResult
from batch.controllers.memory import MemoryCluster
from batch.controllers.timeutil import format_time
from tests.api.conftest import find_shared

from .conftest import make_job

REPO = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 1, 1, 10, 0, 0, tzinfo=UTC)  # a Thursday
NS = "ns"


def cronjob(schedule: str = "* * * * *", **spec: Any) -> dict[str, Any]:
    job = make_job()
    body: dict[str, Any] = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "CronJob",
        "metadata": {
            "name": "nightly",
            "namespace": NS,
            "uid": "cj-uid",
            "creationTimestamp": format_time(T0 - timedelta(seconds=30)),
        },
        "spec": {
            "schedule": schedule,
            "concurrencyPolicy": "Allow",
            "suspend": False,
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 1,
            "jobTemplate": {
                "metadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}},
                "spec": job["spec"],
            },
        },
    }
    body["spec"].update(spec)
    return body


class Cron:
    """A memory cluster holding one CronJob, synced at the times a test chooses."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.cluster = MemoryCluster()
        self.cluster.add(body)
        self.name = str(body["metadata"]["name"])
        self.events: list[EmitEvent] = []
        self.last: ReconcileResult = ReconcileResult()

    @property
    def cj(self) -> dict[str, Any]:
        found = self.cluster.get("CronJob", NS, self.name)
        assert found is not None
        return found

    @property
    def status(self) -> dict[str, Any]:
        return dict(self.cj.get("status") or {})

    def jobs(self) -> list[dict[str, Any]]:
        return self.cluster.objects_of("Job", NS)

    def names(self) -> list[str]:
        return sorted(j["metadata"]["name"] for j in self.jobs())

    def sync(self, now: datetime) -> ReconcileResult:
        """Sync at `now`, again at once while the sync asks for it (as the work queue does)."""
        self.cluster.now = now
        for _ in range(5):
            self.last = reconcile_cronjob(self.cj, self.jobs(), now=now)
            self.cluster.apply(self.last.actions)
            self.events += self.last.of_type(EmitEvent)
            if self.last.requeue_after != 0:
                break
        return self.last

    def finish(self, name: str, phase: str, at: datetime) -> None:
        job = self.cluster.get("Job", NS, name)
        assert job is not None
        job["status"] = {"state": {"phase": phase, "lastTransitionTime": format_time(at)}}

    def reasons(self) -> list[str]:
        return [e.reason for e in self.events]


def minute(n: int) -> datetime:
    return T0 + timedelta(minutes=n)


# -- creation ---------------------------------------------------------------------------------


def test_creates_the_job_volcano_would_at_the_start_time() -> None:
    c = Cron(cronjob())
    c.sync(T0 - timedelta(seconds=10))
    assert c.jobs() == [], "nothing is due before the first start time"
    assert c.last.requeue_after == pytest.approx(10.1)
    c.sync(T0 + timedelta(seconds=2))
    name = f"nightly-{int(T0.timestamp()) // 60}"
    assert c.names() == [name]
    job = c.jobs()[0]
    m = job["metadata"]
    assert m["labels"] == {"team": "a"}
    assert m["annotations"] == {
        "note": "x",
        "volcano.sh/cronjob-scheduled-timestamp": "2026-01-01T10:00:00Z",
    }
    assert m["ownerReferences"] == [
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "CronJob",
            "name": "nightly",
            "uid": "cj-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert job["spec"] == cronjob()["spec"]["jobTemplate"]["spec"]
    assert c.status["lastScheduleTime"] == "2026-01-01T10:00:00Z"
    assert c.status["active"] == [
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "namespace": NS,
            "name": name,
            "uid": m["uid"],
        }
    ]
    assert "SuccessfulCreate" in c.reasons()
    assert c.last.requeue_after == pytest.approx(58.1), "then at the next minute"
    c.sync(T0 + timedelta(seconds=30))
    assert len(c.jobs()) == 1, "a start time is started once"


def test_the_active_list_fits_the_crd_schema() -> None:
    c = Cron(cronjob())
    c.sync(T0)
    crd = yaml.safe_load((REPO / "crds" / "batch.volcano.sh_cronjobs.yaml").read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    item = schema["properties"]["status"]["properties"]["active"]["items"]
    for ref in c.status["active"]:
        assert set(ref) <= set(item["properties"]), "the API server would prune these"


def test_time_zone_sets_start_times_and_the_annotation() -> None:
    c = Cron(cronjob("0 11 * * *", timeZone="Europe/Paris"))
    c.sync(T0 + timedelta(seconds=5))  # 10:00 UTC is 11:00 in Paris in winter
    (job,) = c.jobs()
    stamp = job["metadata"]["annotations"]["volcano.sh/cronjob-scheduled-timestamp"]
    assert stamp == "2026-01-01T11:00:00+01:00"
    assert c.last.requeue_after == pytest.approx(24 * 3600 - 5 + 0.1)


def test_job_end_updates_status_and_success_time() -> None:
    c = Cron(cronjob())
    c.sync(T0)
    (name,) = c.names()
    c.finish(name, "Completed", T0 + timedelta(seconds=20))
    c.sync(T0 + timedelta(seconds=21))
    assert "active" not in c.status
    assert c.status["lastSuccessfulTime"] == "2026-01-01T10:00:20Z"
    assert "SawCompletedJob" in c.reasons()


def test_suspend_starts_nothing_and_asks_for_no_timer() -> None:
    c = Cron(cronjob(suspend=True))
    result = c.sync(minute(5))
    assert c.jobs() == [] and result.requeue_after is None


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ({"schedule": "61 * * * *"}, "UnparseableSchedule"),
        ({"timeZone": "Mars/Base"}, "InvalidTimeZone"),
    ],
)
def test_a_bad_schedule_is_reported(spec: dict[str, Any], reason: str) -> None:
    c = Cron(cronjob(**spec))
    result = c.sync(minute(1))
    assert c.jobs() == [] and result.requeue_after is None
    assert [e.type for e in c.events if e.reason == reason] == ["Warning"]


# -- missed start times -------------------------------------------------------------------------


def test_after_downtime_only_the_most_recent_start_runs() -> None:
    c = Cron(cronjob())
    c.sync(minute(10) + timedelta(seconds=5))
    assert c.names() == [job_name("nightly", minute(10))]
    assert "TooManyMissedTimes" not in c.reasons()


def test_starting_deadline_skips_a_start_too_late() -> None:
    c = Cron(cronjob("*/10 * * * *", startingDeadlineSeconds=30))
    c.sync(minute(0) + timedelta(seconds=40))
    assert c.jobs() == [], "10:00 is 40 s ago, over the 30 s deadline"
    c.sync(minute(10) + timedelta(seconds=20))
    assert c.names() == [job_name("nightly", minute(10))]


def test_too_many_missed_start_times_warns_and_still_starts() -> None:
    c = Cron(cronjob())
    c.sync(minute(200) + timedelta(seconds=1))
    assert c.names() == [job_name("nightly", minute(200))]
    assert "TooManyMissedTimes" in c.reasons()
    d = Cron(cronjob(startingDeadlineSeconds=300))
    d.sync(minute(200) + timedelta(seconds=1))
    assert "TooManyMissedTimes" not in d.reasons(), "the deadline bounds what counts as missed"


# -- concurrency ----------------------------------------------------------------------------------


def test_forbid_skips_while_a_job_runs_then_starts_late() -> None:
    c = Cron(cronjob(concurrencyPolicy="Forbid", startingDeadlineSeconds=50))
    c.sync(minute(0))
    first = c.names()
    c.sync(minute(1))
    assert c.names() == first and "ForbidConcurrent" in c.reasons()
    c.finish(first[0], "Completed", minute(1) + timedelta(seconds=10))
    c.sync(minute(1) + timedelta(seconds=10))
    assert c.names() == sorted([*first, job_name("nightly", minute(1))]), "10:01 starts late"
    c.finish(job_name("nightly", minute(1)), "Completed", minute(2) + timedelta(seconds=55))
    c.sync(minute(2) + timedelta(seconds=55))
    assert job_name("nightly", minute(2)) not in c.names(), "past the deadline: skipped"


def test_replace_deletes_the_running_job_first() -> None:
    c = Cron(cronjob(concurrencyPolicy="Replace"))
    c.sync(minute(0))
    (first,) = c.names()
    c.sync(minute(1))
    assert c.names() == [job_name("nightly", minute(1))]
    deletes = [a for a in c.cluster.log if isinstance(a, DeleteObject)]
    assert [d.ref.name for d in deletes] == [first]
    assert [a["name"] for a in c.status["active"]] == [job_name("nightly", minute(1))]


def test_allow_runs_jobs_side_by_side() -> None:
    c = Cron(cronjob())
    for n in range(3):
        c.sync(minute(n))
    assert len(c.status["active"]) == 3


# -- history and references ---------------------------------------------------------------------


def test_history_limits_delete_the_oldest_finished_jobs() -> None:
    c = Cron(cronjob(successfulJobsHistoryLimit=2, failedJobsHistoryLimit=1))
    for n in range(6):
        c.sync(minute(n))
        phase = "Failed" if n in (1, 3) else "Completed"
        c.finish(job_name("nightly", minute(n)), phase, minute(n) + timedelta(seconds=30))
    c.sync(minute(5) + timedelta(seconds=40))
    assert c.names() == sorted(
        [
            job_name("nightly", minute(3)),
            job_name("nightly", minute(4)),
            job_name("nightly", minute(5)),
        ]
    )


def test_terminated_jobs_count_as_failed_history() -> None:
    c = Cron(cronjob(failedJobsHistoryLimit=0))
    c.sync(minute(0))
    c.finish(c.names()[0], "Terminated", minute(0) + timedelta(seconds=5))
    c.sync(minute(0) + timedelta(seconds=6))
    assert c.jobs() == []


def test_a_stale_reference_leaves_the_active_list() -> None:
    c = Cron(cronjob())
    c.sync(minute(0))
    (name,) = c.names()
    del c.cluster.objects[("Job", NS, name)]
    c.sync(minute(0) + timedelta(seconds=10))
    assert "active" not in c.status and "StaleReference" in c.reasons()


def test_an_unlisted_old_child_is_reported_not_adopted() -> None:
    c = Cron(cronjob())
    c.sync(minute(2))
    stray = copy.deepcopy(c.jobs()[0])
    stray["metadata"].update(name="nightly-stray", uid="stray")
    stray["metadata"]["annotations"]["volcano.sh/cronjob-scheduled-timestamp"] = format_time(
        minute(0)
    )
    c.cluster.objects[("Job", NS, "nightly-stray")] = stray
    c.sync(minute(2) + timedelta(seconds=10))
    assert [a["name"] for a in c.status["active"]] == [job_name("nightly", minute(2))]
    assert "OrphanedJob" in c.reasons()


def test_a_child_without_the_annotation_is_known_by_its_name() -> None:
    c = Cron(cronjob())
    c.sync(minute(0))
    (job,) = c.jobs()
    del job["metadata"]["annotations"]["volcano.sh/cronjob-scheduled-timestamp"]
    c.cluster.get("CronJob", NS, "nightly")["status"] = {}  # type: ignore[index]
    c.sync(minute(0) + timedelta(seconds=5))
    assert [a["name"] for a in c.status["active"]] == [job["metadata"]["name"]]
    assert c.status["lastScheduleTime"] == format_time(minute(0))
    assert "OrphanedJob" not in c.reasons()


def test_volcano_example_cronjob() -> None:
    shared = find_shared() or REPO.parent / "shared"  # any parent's: worktrees too
    path = shared / "corpus/volcano-examples/volcano/example/cronjob/cronjob.yaml"
    body = yaml.safe_load(path.read_text())
    body["metadata"].update(
        namespace=NS, uid="cj-uid", creationTimestamp=format_time(T0 - timedelta(minutes=1))
    )
    c = Cron(body)
    c.sync(T0 + timedelta(seconds=3))
    (job,) = c.jobs()
    assert job["metadata"]["name"] == job_name("volcano-cronjob-example", T0)
    assert job["spec"]["tasks"][0]["name"] == "task-1"
    c.sync(minute(5) + timedelta(seconds=1))
    assert len(c.jobs()) == 1, "Forbid: the first one still runs"
    c.finish(job["metadata"]["name"], "Completed", minute(6))
    c.sync(minute(6) + timedelta(seconds=1))
    assert len(c.jobs()) == 1, "10:05 is over the 60 s startingDeadlineSeconds by now"
    c.sync(minute(10))
    assert len(c.jobs()) == 2


# -- schedules -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schedule", "after", "expected"),
    [
        ("*/15 * * * *", "2026-01-01T10:07:30", "2026-01-01T10:15:00"),
        ("0 9 * * 1-5", "2026-01-02T09:00:00", "2026-01-05T09:00:00"),  # Fri -> Mon
        ("0 0 * * 7", "2026-01-01T00:00:00", "2026-01-04T00:00:00"),  # 7 is Sunday
        ("0 0 13 * 5", "2026-01-01T00:00:00", "2026-01-02T00:00:00"),  # 13th OR Friday
        ("0 0 13 * *", "2026-01-01T00:00:00", "2026-01-13T00:00:00"),
        ("30 2 1 feb,aug ?", "2026-01-01T00:00:00", "2026-02-01T02:30:00"),
        ("@hourly", "2026-01-01T10:00:00", "2026-01-01T11:00:00"),
        ("@every 90s", "2026-01-01T10:00:00.700", "2026-01-01T10:01:30"),
        ("5/20 * * * *", "2026-01-01T10:06:00", "2026-01-01T10:25:00"),
        ("TZ=Asia/Tokyo 0 9 * * *", "2026-01-01T00:00:00", "2026-01-02T00:00:00"),
    ],
)
def test_next_start_times(schedule: str, after: str, expected: str) -> None:
    sched = schedule_of({"schedule": schedule})
    start = datetime.fromisoformat(after).replace(tzinfo=UTC)
    assert sched.next_after(start) == datetime.fromisoformat(expected).replace(tzinfo=UTC)


def test_an_impossible_date_has_no_start_time() -> None:
    c = Cron(cronjob("0 0 30 2 *"))
    result = c.sync(minute(1))
    assert c.jobs() == [] and result.requeue_after is None
    assert "InvalidSchedule" in c.reasons()


def _field(lo: int, hi: int) -> st.SearchStrategy[str]:
    value = st.integers(lo, hi)
    single = value.map(str)
    span = st.tuples(value, value).map(lambda ab: f"{min(ab)}-{max(ab)}")
    step = st.tuples(st.sampled_from(["*", f"{lo}"]), st.integers(1, 4)).map(
        lambda p: f"{p[0]}/{p[1]}"
    )
    part = st.one_of(st.just("*"), single, span, step)
    return st.lists(part, min_size=1, max_size=3).map(",".join)


def _brute_next(fields: list[set[int]], stars: tuple[bool, bool], t: datetime) -> datetime | None:
    mins, hours, days, months, wdays = fields
    day = t.replace(hour=0, minute=0, second=0, microsecond=0)
    for _ in range(5 * 366):
        cron_wday = (day.weekday() + 1) % 7
        in_dom, in_dow = day.day in days, cron_wday in wdays
        hit = in_dom and in_dow if (stars[0] or stars[1]) else in_dom or in_dow
        if day.month in months and hit:
            for h in sorted(hours):
                for m in sorted(mins):
                    cand = day.replace(hour=h, minute=m)
                    if cand > t:
                        return cand
        day += timedelta(days=1)
    return None


def _expand(text: str, lo: int, hi: int) -> tuple[set[int], bool]:
    out: set[int] = set()
    star = False
    for part in text.split(","):
        rng, _, step = part.partition("/")
        k = int(step) if step else 1
        if rng == "*":
            a, b, star = lo, hi, star or k == 1
        elif "-" in rng:
            a, b = map(int, rng.split("-"))
        else:
            a, b = int(rng), hi if step else int(rng)
        out.update(range(a, b + 1, k))
    return out, star


@settings(max_examples=150, deadline=None)
@given(
    st.tuples(_field(0, 59), _field(0, 23), _field(1, 31), _field(1, 12), _field(0, 6)),
    st.integers(0, 3 * 365 * 24 * 60),
)
def test_start_times_match_a_brute_force_cron(fields: tuple[str, ...], offset: int) -> None:
    bounds = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 6)]
    expanded = [_expand(f, lo, hi) for f, (lo, hi) in zip(fields, bounds, strict=True)]
    t = T0 + timedelta(minutes=offset, seconds=17)
    want = _brute_next([e[0] for e in expanded], (expanded[2][1], expanded[4][1]), t)
    got = schedule_of({"schedule": " ".join(fields)}).next_after(t)
    if want is not None:
        assert got == want, " ".join(fields)


# -- properties -----------------------------------------------------------------------------------

STEP = st.tuples(
    st.integers(1, 150),  # seconds to the next sync
    st.sampled_from(["Completed", "Failed", "Terminated", None]),  # how the oldest runner ends
)


@settings(max_examples=60, deadline=None)
@given(
    policy=st.sampled_from(["Allow", "Forbid", "Replace"]),
    ok_limit=st.integers(0, 3),
    bad_limit=st.integers(0, 2),
    deadline=st.one_of(st.none(), st.integers(0, 120)),
    steps=st.lists(STEP, min_size=1, max_size=30),
)
def test_policies_and_limits_always_hold(
    policy: str,
    ok_limit: int,
    bad_limit: int,
    deadline: int | None,
    steps: list[tuple[int, str | None]],
) -> None:
    spec: dict[str, Any] = {
        "concurrencyPolicy": policy,
        "successfulJobsHistoryLimit": ok_limit,
        "failedJobsHistoryLimit": bad_limit,
    }
    if deadline is not None:
        spec["startingDeadlineSeconds"] = deadline
    c = Cron(cronjob(**spec))
    now = T0 - timedelta(seconds=30)
    last = None
    for wait, ending in steps:
        now += timedelta(seconds=wait)
        running = [j for j in c.jobs() if not (j.get("status") or {}).get("state")]
        if ending and running:
            c.finish(
                min(running, key=lambda j: j["metadata"]["name"])["metadata"]["name"], ending, now
            )
        c.sync(now)
        phases = [((j.get("status") or {}).get("state") or {}).get("phase") for j in c.jobs()]
        if policy in ("Forbid", "Replace"):
            assert phases.count(None) <= 1, "never two jobs running at once"
        assert phases.count("Completed") <= ok_limit
        assert phases.count("Failed") + phases.count("Terminated") <= bad_limit
        active = {a["uid"] for a in c.status.get("active") or []}
        assert active == {j["metadata"]["uid"] for j in c.jobs() if not (j.get("status") or {})}
        stamp = c.status.get("lastScheduleTime")
        assert stamp is None or last is None or stamp >= last
        assert stamp is None or stamp <= format_time(now)
        last = stamp or last
