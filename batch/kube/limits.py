"""Defaults of the scheduler's API traffic that its command line shows (no heavy imports here:
`tephra --help` reads them)."""

from __future__ import annotations

#: binds in flight at once (`--bind-concurrency`); each bind's worker then posts its pod's
#: `Scheduled` event, so about half are binds on the wire. On a real apiserver the rate is
#: bound by these requests' latency, not by Tephra's CPU: 5,000 single pods on 1,000 Nodes went
#: 113 pods/s at 128 against kube-scheduler's 170 (no cap on its binds), 221 at 256 and 216 at
#: 512 against 173 and 168, same runs (docs/benchmarks.md, 7 December 2026, 08:40 UTC). The
#: kubelets' Lease renewals are not crowded out: they have connections of their own (and a
#: priority level of their own under API Priority and Fairness).
BIND_CONCURRENCY = 256
