"""The policies a simulation compares: Tephra's configuration and two baselines.

Why this exists: a result means little without a yardstick in the same run. Each policy is a
`volcano-scheduler.conf` for the real scheduler plus the engine switches that are not scheduler
configuration (how pods and PodGroups are created):

* `tephra` — the configuration given with `--scheduler-conf`, else the one Tephra ships
  (`batch.scheduler.config.TEPHRA_DEFAULT_CONFIG`), with one queue per trace queue, weighted.
* `kube-default` — what a cluster without a batch scheduler does: pods are created at
  submission (no enqueue gating), every pod is placed on its own (PodGroup minMember 1 and no
  gang plugin, so the real session commits each task by itself), one queue, least-allocated
  spreading. This reproduces partial allocation: a gang holds GPUs while waiting for its
  missing pods, possibly forever.
* `fifo` — gang scheduling in submission order with one queue and no fair share (priority and
  gang job order, overcommit-gated enqueue). The session still lets a later job that fits start
  ahead of a blocked earlier one (Volcano's allocate skips jobs that do not fit), so this is
  FIFO with skipping, not head-of-line blocking.
* `tiresias` — Tephra's default with the opt-in `tiresias` job order (least attained GPU
  service first, in levels) in a tier of its own before gang, so that its preemptable vote
  decides, and preempt's victim selection back to Volcano's (`strict` would let gang veto every
  victim at its minimum).
* `sjf` — Tephra's default with the opt-in `sjf` job order (shortest runningEstimate x GPUs
  first, with aging) after priority; every job gets its trace run time as runningEstimate (an
  oracle: the trace has no user estimates).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from batch.scheduler.config import TEPHRA_DEFAULT_CONFIG
from batch.sim.engine import EngineOptions
from batch.sim.errors import SimInputError

__all__ = [
    "BASELINES",
    "FIFO_CONF",
    "KUBE_DEFAULT_CONF",
    "SJF_CONF",
    "TIRESIAS_CONF",
    "Policy",
    "choose_lifecycle",
    "policies_for",
]

KUBE_DEFAULT_CONF = """\
actions: "allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: predicates
  - name: nodeorder
"""

FIFO_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: overcommit
  - name: predicates
  - name: nodeorder
"""


def _tephra_with(change: Any) -> str:
    doc = yaml.safe_load(TEPHRA_DEFAULT_CONFIG)
    change(doc)
    return yaml.safe_dump(doc, sort_keys=False)


def _tiresias(doc: dict[str, Any]) -> None:
    doc["tiers"].insert(0, {"plugins": [{"name": "tiresias"}]})
    for c in doc["configurations"]:
        if c["name"] == "preempt":
            c["arguments"]["victimSelection"] = "volcano"


def _sjf(doc: dict[str, Any]) -> None:
    doc["tiers"][0]["plugins"].insert(1, {"name": "sjf"})


TIRESIAS_CONF = _tephra_with(_tiresias)
SJF_CONF = _tephra_with(_sjf)


@dataclass(frozen=True, slots=True)
class Policy:
    name: str
    conf: str
    options: EngineOptions


AUTO_VOLCANO_MAX_JOBS = 20_000


def choose_lifecycle(name: str, jobs: int) -> str:
    """`auto`: the real reconciler up to AUTO_VOLCANO_MAX_JOBS jobs, else the fast equivalent."""
    if name == "auto":
        return "volcano" if jobs <= AUTO_VOLCANO_MAX_JOBS else "fast"
    return name


def _baseline(name: str, period: float, lifecycle: str) -> Policy:
    if name == "kube-default":
        return Policy(
            name,
            KUBE_DEFAULT_CONF,
            EngineOptions(
                period=period,
                gang=False,
                gate_pods=False,
                single_queue=True,
                lifecycle=lifecycle,
            ),
        )
    if name == "fifo":
        return Policy(
            name,
            FIFO_CONF,
            EngineOptions(period=period, single_queue=True, lifecycle=lifecycle),
        )
    if name in ("tiresias", "sjf"):
        conf = TIRESIAS_CONF if name == "tiresias" else SJF_CONF
        options = EngineOptions(period=period, lifecycle=lifecycle, estimates=name == "sjf")
        return Policy(name, conf, options)
    raise SimInputError(f"--compare: unknown baseline {name!r} (known: {', '.join(BASELINES)})")


BASELINES = ("kube-default", "fifo", "tiresias", "sjf")


def policies_for(
    *, conf: str | None, compare: list[str], period: float = 1.0, lifecycle: str = "volcano"
) -> list[Policy]:
    """Tephra's policy first, then the requested baselines in the given order."""
    options = EngineOptions(period=period, lifecycle=lifecycle)
    out = [Policy("tephra", conf or TEPHRA_DEFAULT_CONFIG, options)]
    seen = {"tephra"}
    for raw in compare:
        name = raw.strip()
        if not name or name in seen:
            continue
        seen.add(name)
        out.append(_baseline(name, period, lifecycle))
    return out
