"""A small, hand-computed history used by the report and prune tests.

Jobs (all times November 2026, UTC; "10 00:30" = the 10th at 00:30):

| job | queue/ns/submitter | submitted | started     | finished    | outcome   | pod          |
|-----|--------------------|-----------|-------------|-------------|-----------|--------------|
| A   | q1/ns1/alice       | 10 00:00  | 10 00:30    | 10 02:30    | Completed | 2 GPU, 2 h   |
| B   | q1/ns1/bob         | 10 12:00  | 10 22:00    | 11 02:00    | Failed    | 1 GPU, 4 h   |
| C   | q2/ns2/alice       | 11 00:00  | 11 00:00:30 | 11 00:30:30 | Completed | 4 GPU, 8 cpu |
| D   | q2/ns2/carol       | 11 06:00  | -           | -           | -         | none         |

So: waits q1 = [1800, 36000] s, q2 = [30] s (+1 waiting); GPU-hours 10th: alice 4, bob 2;
11th: bob 2, alice (q2) 2 with 4 CPU-core-hours.
"""

from __future__ import annotations

from batch.ledger import events as ev

from .helpers import t

E = ev.LedgerEvent


def _job(
    uid: str, queue: str, ns: str, who: str, submitted: object, *phases: tuple[str, object]
) -> list[E]:
    out: list[E] = [
        ev.JobObserved(
            uid=uid,
            namespace=ns,
            name=uid.lower(),
            queue=queue,
            submitter=who,
            submitted_at=submitted,  # type: ignore[arg-type]
            retries=1 if uid == "B" else None,
        )
    ]
    for phase, at in phases:
        out.append(
            ev.JobPhaseChanged(job_uid=uid, namespace=ns, name=uid.lower(), to_phase=phase, at=at)
        )  # type: ignore[arg-type]
    return out


def history() -> list[E]:
    out: list[E] = []
    out += _job(
        "A",
        "q1",
        "ns1",
        "alice",
        t(10),
        ("Pending", t(10)),
        ("Running", t(10, 0, 30)),
        ("Completed", t(10, 2, 30)),
    )
    out += _job(
        "B",
        "q1",
        "ns1",
        "bob",
        t(10, 12),
        ("Pending", t(10, 12)),
        ("Running", t(10, 22)),
        ("Restarting", t(10, 23)),
        ("Running", t(10, 23, 30)),
        ("Failed", t(11, 2)),
    )
    out += _job(
        "C",
        "q2",
        "ns2",
        "alice",
        t(11),
        ("Pending", t(11)),
        ("Running", t(11, 0, 0, 30)),
        ("Completed", t(11, 0, 30, 30)),
    )
    out += _job("D", "q2", "ns2", "carol", t(11, 6), ("Pending", t(11, 6)))
    out += [
        ev.PodAttempt(
            pod_uid="a0",
            namespace="ns1",
            name="a-0",
            job_uid="A",
            gpu_milli=2000,
            started_at=t(10, 0, 30),
            finished_at=t(10, 2, 30),
            outcome="Succeeded",
            exit_code=0,
        ),
        ev.PodAttempt(
            pod_uid="b0",
            namespace="ns1",
            name="b-0",
            job_uid="B",
            gpu_milli=1000,
            started_at=t(10, 22),
            finished_at=t(11, 2),
            outcome="Failed",
            exit_code=3,
        ),
        ev.PodAttempt(
            pod_uid="c0",
            namespace="ns2",
            name="c-0",
            job_uid="C",
            queue="q2",
            gpu_milli=4000,
            cpu_milli=8000,
            started_at=t(11, 0, 0, 30),
            finished_at=t(11, 0, 30, 30),
            outcome="Succeeded",
            exit_code=0,
        ),
        ev.SchedulingEvent(
            action="preempt",
            at=t(10, 12),
            victim_pod_uid="a-old",
            victim_namespace="ns1",
            victim_pod="a-old",
            victim_job_uid="A",
            victim_queue="q1",
            beneficiary_job_uid="B",
            gpu_milli=2000,
        ),
        ev.SchedulingEvent(
            action="reclaim",
            at=t(11, 0, 0, 10),
            victim_pod_uid="b-old",
            victim_namespace="ns1",
            victim_pod="b-old",
            victim_job_uid="B",
            beneficiary_job_uid="C",
            beneficiary_queue="q2",
            gpu_milli=1000,
        ),
        ev.QueueConfigChanged(queue="q1", at=t(1), weight=2),
        ev.QueueConfigChanged(queue="q2", at=t(1), weight=1),
        ev.QueueConfigChanged(queue="q1", at=t(10, 12), weight=3),
    ]
    gpu = "nvidia.com/gpu"
    for at, q1, q2 in ((t(10), (2000, 1000), (6000, 0)), (t(10, 1), (4000, 0), (4000, 0))):
        out.append(
            ev.QueueUsageSample(
                queue="q1",
                at=at,
                allocated={gpu: q1[0]},
                deserved={gpu: 4000},
                pending={gpu: q1[1]},
            )
        )
        out.append(
            ev.QueueUsageSample(
                queue="q2",
                at=at,
                allocated={gpu: q2[0]},
                deserved={gpu: 4000},
                pending={gpu: q2[1]},
            )
        )
    return out
