"""What-if from the dashboard (`--allow-whatif`): replay the ledger with proposed queue changes.

Why this exists: the question after "who holds what" is "what would a weight change do". The
answer is `batch.sim.whatif.compare_queue_configs`, the same replay `tephra whatif` runs, on the
ledger's recorded submissions and a cluster made of the live nodes. A replay takes seconds to
minutes, so it runs in a background thread, one at a time; its page shows it running (elapsed
time) and then the before/after table with what the replay assumed and left out (the jobs still
waiting are replayed with an assumed run time).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from batch.api.errors import UserError, one_line

__all__ = ["WhatIfRun", "WhatIfRuns"]


@dataclass
class WhatIfRun:
    """One replay: its changes, its state (running, done, failed) and its answer."""

    id: int
    changes: list[str]
    started: float = field(default_factory=time.time)
    finished: float | None = None
    state: str = "running"
    table: str = ""
    rows: list[dict[str, Any]] = field(default_factory=list)
    #: what the replay assumed and left out (also under the table)
    assumptions: list[str] = field(default_factory=list)
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        end = self.finished or time.time()
        return {
            "id": self.id,
            "changes": self.changes,
            "state": self.state,
            "elapsed_s": round(end - self.started, 1),
            "table": self.table,
            "rows": self.rows,
            "assumptions": self.assumptions,
            "error": self.error,
        }


@dataclass
class WhatIfRuns:
    """The replays started from the dashboard (newest last), at most one running at a time."""

    db_url: str
    since: str = "7d"
    runs: list[WhatIfRun] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, changes: Sequence[str], nodes: Sequence[Mapping[str, Any]]) -> WhatIfRun:
        """Start a replay in a thread; UserError if one is still running or a change is bad."""
        from batch.sim.whatif import parse_change

        parsed = [parse_change(c) for c in changes]  # bad input fails here, at once
        if not parsed:
            raise UserError("name at least one change, e.g. queue=team-a,weight=3")
        with self._lock:
            if any(r.state == "running" for r in self.runs):
                raise UserError("a what-if replay is still running; wait for it")
            run = WhatIfRun(len(self.runs) + 1, list(changes))
            self.runs.append(run)
        thread = threading.Thread(
            target=self._run, args=(run, list(nodes)), name=f"whatif-{run.id}", daemon=True
        )
        thread.start()
        return run

    def _run(self, run: WhatIfRun, nodes: list[Mapping[str, Any]]) -> None:
        from batch.sim.cluster import cluster_from_nodes
        from batch.sim.traces.ledger import load_ledger
        from batch.sim.whatif import compare_queue_configs, format_whatif, parse_change

        try:
            cluster = cluster_from_nodes(nodes, source="the cluster's nodes")
            workload = load_ledger(self.db_url, since=self.since, cluster=cluster)
            if not workload.jobs:
                left = "; ".join(workload.assumptions) or "none recorded"
                raise UserError(f"no job to replay in the last {self.since} ({left})")
            result = compare_queue_configs(workload, [parse_change(c) for c in run.changes])
            run.table, run.rows = format_whatif(result), result.rows
            run.assumptions, run.state = result.assumptions, "done"
        except Exception as exc:  # a replay's failure belongs on its page, not in a log
            run.error, run.state = one_line(exc), "failed"
        finally:
            run.finished = time.time()

    def get(self, run_id: int) -> WhatIfRun | None:
        return self.runs[run_id - 1] if 0 < run_id <= len(self.runs) else None
