"""What-if: replay the same workload with today's queue configuration and a proposed one.

Why this exists: admins tune queue weights by guessing. `compare_queue_configs` replays one
workload (usually the ledger's recorded submissions) twice through the real scheduler — once
with the queues as they are, once with the changes applied — and reports per queue how waiting
time and GPU share move, so the admin sees who gains and who loses before applying anything.

Changes are written like `queue=q1,weight=3` or
`queue=q2,capability.nvidia.com/gpu=16,reclaimable=false`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from batch.sim.cluster import QueueSpec
from batch.sim.errors import SimInputError
from batch.sim.policies import Policy, policies_for
from batch.sim.runner import BackendFactory, PolicyRun, run_policy
from batch.sim.workload import Workload

__all__ = ["QueueChange", "apply_changes", "compare_queue_configs", "format_whatif", "parse_change"]


@dataclass(frozen=True, slots=True)
class QueueChange:
    queue: str
    weight: int | None = None
    capability: tuple[tuple[str, str], ...] = ()
    guarantee: tuple[tuple[str, str], ...] = ()
    reclaimable: bool | None = None


def parse_change(text: str) -> QueueChange:
    """Parse one `--set` value (comma separated key=value; `queue` is required)."""
    fields: dict[str, str] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep:
            raise SimInputError(f"--set {text!r}: {part!r} is not key=value")
        fields[key.strip()] = value.strip()
    queue = fields.pop("queue", None)
    if not queue:
        raise SimInputError(f"--set {text!r}: needs queue=NAME")
    weight: int | None = None
    capability: list[tuple[str, str]] = []
    guarantee: list[tuple[str, str]] = []
    reclaimable: bool | None = None
    for key, value in fields.items():
        if key == "weight":
            try:
                weight = int(value)
            except ValueError:
                weight = -1
            if weight < 1:
                raise SimInputError(f"--set {text!r}: weight must be an integer >= 1")
        elif key.startswith("capability."):
            capability.append((key.removeprefix("capability."), value))
        elif key.startswith("guarantee."):
            guarantee.append((key.removeprefix("guarantee."), value))
        elif key == "reclaimable":
            if value.lower() not in ("true", "false"):
                raise SimInputError(f"--set {text!r}: reclaimable must be true or false")
            reclaimable = value.lower() == "true"
        else:
            raise SimInputError(
                f"--set {text!r}: unknown key {key!r} (weight, capability.<resource>, "
                "guarantee.<resource>, reclaimable)"
            )
    return QueueChange(queue, weight, tuple(capability), tuple(guarantee), reclaimable)


def apply_changes(queues: Sequence[QueueSpec], changes: Sequence[QueueChange]) -> list[QueueSpec]:
    by_name = {q.name: q for q in queues}
    for ch in changes:
        q = by_name.get(ch.queue)
        if q is None:
            raise SimInputError(
                f"--set queue={ch.queue}: no such queue (known: {', '.join(sorted(by_name))})"
            )
        if ch.weight is not None:
            q = replace(q, weight=ch.weight)
        if ch.capability:
            q = replace(q, capability={**(q.capability or {}), **dict(ch.capability)})
        if ch.guarantee:
            q = replace(q, guarantee={**(q.guarantee or {}), **dict(ch.guarantee)})
        if ch.reclaimable is not None:
            q = replace(q, reclaimable=ch.reclaimable)
        by_name[ch.queue] = q
    return [by_name[q.name] for q in queues]


@dataclass(slots=True)
class WhatIfResult:
    current: PolicyRun
    proposed: PolicyRun
    rows: list[dict[str, Any]]


def compare_queue_configs(
    workload: Workload,
    changes: Sequence[QueueChange],
    *,
    conf: str | None = None,
    period: float = 1.0,
    backend_factory: BackendFactory | None = None,
) -> WhatIfResult:
    """Run `workload` with its queues and with `changes` applied; per-queue comparison rows."""
    policy: Policy = policies_for(conf=conf, compare=[], period=period)[0]
    proposed_queues = apply_changes(workload.cluster.queues, changes)
    current = run_policy(workload, policy, backend_factory=backend_factory)
    proposed = run_policy(
        workload.with_queues(proposed_queues),
        replace(policy, name="proposed"),
        backend_factory=backend_factory,
    )
    rows: list[dict[str, Any]] = []
    weights_now = {q.name: q.weight for q in workload.cluster.queues}
    weights_new = {q.name: q.weight for q in proposed_queues}
    for name in current.result.metrics.queue_names:
        a = current.summary["queues"].get(name)
        b = proposed.summary["queues"].get(name)
        if a is None or b is None:
            continue
        wa, wb = a.get("queue_delay_mean_s"), b.get("queue_delay_mean_s")
        sa, sb = a.get("allocated_share") or 0.0, b.get("allocated_share") or 0.0
        if wa is not None and wb is not None and abs(wb - wa) > 1e-9:
            verdict = "gains" if wb < wa else "loses"
        elif abs(sb - sa) > 1e-9:
            verdict = "gains" if sb > sa else "loses"
        else:
            verdict = "same"
        rows.append(
            {
                "queue": name,
                "weight_now": weights_now.get(name, 1),
                "weight_proposed": weights_new.get(name, 1),
                "jobs": a.get("jobs"),
                "wait_mean_now_s": wa,
                "wait_mean_proposed_s": wb,
                "wait_p99_now_s": a.get("queue_delay_p99_s"),
                "wait_p99_proposed_s": b.get("queue_delay_p99_s"),
                "share_now": sa,
                "share_proposed": sb,
                "deserved_now": a.get("deserved_share"),
                "deserved_proposed": b.get("deserved_share"),
                "verdict": verdict,
            }
        )
    return WhatIfResult(current, proposed, rows)


def format_whatif(result: WhatIfResult) -> str:
    def s(v: Any) -> str:
        if v is None:
            return "-"
        return f"{float(v):.0f}s"

    def p(v: Any) -> str:
        return "-" if v is None else f"{float(v) * 100:.1f}%"

    head = ["queue", "weight", "jobs", "wait mean", "wait p99", "GPU share", "deserved", "verdict"]
    table = [head]
    for r in result.rows:
        table.append(
            [
                r["queue"],
                f"{r['weight_now']}->{r['weight_proposed']}",
                str(r["jobs"]),
                f"{s(r['wait_mean_now_s'])}->{s(r['wait_mean_proposed_s'])}",
                f"{s(r['wait_p99_now_s'])}->{s(r['wait_p99_proposed_s'])}",
                f"{p(r['share_now'])}->{p(r['share_proposed'])}",
                f"{p(r['deserved_now'])}->{p(r['deserved_proposed'])}",
                r["verdict"],
            ]
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    cur, new = result.current.summary, result.proposed.summary
    lines.append("")
    lines.append(
        f"overall: wait mean {s(cur['queue_delay_mean_s'])} -> {s(new['queue_delay_mean_s'])}, "
        f"JCT mean {s(cur['jct_mean_s'])} -> {s(new['jct_mean_s'])}, "
        f"utilization {p(cur['utilization'])} -> {p(new['utilization'])}, "
        f"Jain {cur['jain_index'] or 0:.3f} -> {new['jain_index'] or 0:.3f}"
    )
    return "\n".join(lines)
