"""`tephra sim` progress: "policy i of n" with a total ETA, a line per policy off a terminal."""

from __future__ import annotations

import io

from batch.sim.progress import RunProgress


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _replay(reporter: RunProgress, clock: Clock, *, jobs: int, seconds: list[float]) -> None:
    for i, cost in enumerate(seconds):
        update = reporter.for_policy(f"p{i}")
        for done in range(1, jobs + 1):
            clock.t += cost / jobs
            update(done, jobs, 0.0)


def test_one_line_per_policy_when_not_a_terminal() -> None:
    out, clock = io.StringIO(), Clock()
    reporter = RunProgress(out, ["p0", "p1", "p2"], 10, tty=False, clock=clock)
    _replay(reporter, clock, jobs=10, seconds=[30.0, 90.0, 60.0])
    reporter.close()
    lines = out.getvalue().splitlines()
    assert lines == [
        "policy 1 of 3 (p0): 10 jobs in 30 s, total ETA 1 min",  # 2 more at 30 s each
        "policy 2 of 3 (p1): 10 jobs in 1.5 min, total ETA 1 min",  # 1 more at the mean, 60 s
        "policy 3 of 3 (p2): 10 jobs in 1 min, all done",
    ]


def test_terminal_line_rewritten_with_total_eta() -> None:
    out, clock = io.StringIO(), Clock()
    reporter = RunProgress(out, ["a", "b"], 100, tty=True, clock=clock, every_s=0.0)
    update = reporter.for_policy("a")
    clock.t = 50.0
    update(50, 100, 0.0)  # half of a in 50 s: 50 s left for a, 100 s for b
    text = out.getvalue()
    assert text.startswith("\rpolicy 1 of 2 (a): 50/100 jobs done, 50 s elapsed, total ETA 2.5 min")
    assert "\n" not in text


def test_policy_ending_with_unfinished_jobs_still_reports() -> None:
    out, clock = io.StringIO(), Clock()
    reporter = RunProgress(out, ["a", "b"], 4, tty=False, clock=clock)
    reporter.for_policy("a")(3, 4, 0.0)  # the horizon came with a job unfinished
    clock.t = 10.0
    reporter.for_policy("b")(4, 4, 0.0)
    reporter.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "policy 1 of 2 (a): 3/4 jobs finished in 10 s, total ETA 10 s"
    assert lines[1] == "policy 2 of 2 (b): 4 jobs in 0 s, all done"
