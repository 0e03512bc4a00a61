"""Gangs no node can ever hold: enqueue leaves them Pending instead of admitting them.

Why this exists (issue 19.5): a 16-GPU pod on 8-GPU nodes passes the queue's and the
cluster's totals, so Volcano's enqueue admits it and it holds the queue's share; 100 of them
kept a feasible 4-GPU gang Pending for minutes. A pod is refused here when it asks, on some
resource, for more than the largest allocatable of any schedulable node: no placement, now or
after any eviction, can hold it. The pods judged are the job's pending ones (one per pod
template), or, for a one-pod gang whose pod does not exist yet, its minResources. Gangs whose
pods would each fit some dimension's largest node but no single node are not judged here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from batch.api.resources import format_resource_list
from batch.model.info import JobInfo
from batch.scheduler.framework.decisions import PendingReason
from batch.scheduler.framework.session import Session

__all__ = ["never_fits"]

_KEY = "enqueue.largest_node"


def _largest(ssn: Session) -> np.ndarray[Any, np.dtype[np.int64]] | None:
    """Per resource, the largest allocatable of a schedulable node (None: no node yet)."""
    if _KEY not in ssn.scratch:
        nd = ssn.nodes
        ssn.scratch[_KEY] = nd.alloc[:, nd.valid].max(axis=1) if nd.valid.any() else None
    largest: np.ndarray[Any, np.dtype[np.int64]] | None = ssn.scratch[_KEY]
    return largest


def _pod_shapes(job: JobInfo) -> list[np.ndarray[Any, np.dtype[np.int64]]]:
    shapes: dict[object, np.ndarray[Any, np.dtype[np.int64]]] = {}
    for task in job.tasks.values():
        if task.node_name:
            continue
        shapes.setdefault(task.template.tid, task.init_req)
    if not shapes and job.min_available <= 1 and job.min_resources is not None:
        return [job.min_resources]
    return list(shapes.values())


def never_fits(ssn: Session, job: JobInfo) -> PendingReason | None:
    """Why no node can ever hold a pod of `job`, or None."""
    largest = _largest(ssn)
    if largest is None:
        return None
    dims = len(largest)
    for req in _pod_shapes(job):
        need = req[:dims]
        over = [int(i) + 1 for i in np.nonzero(need[1:] > largest[1 : len(need)])[0]]  # 0: pods
        if not over:
            continue
        names = ssn.resources.names
        what = ", ".join(
            f"{names[i]} {_shown(ssn, i, int(need[i]))} (largest node: "
            f"{_shown(ssn, i, int(largest[i]))})"
            for i in over
        )
        return PendingReason(
            job.uid,
            "NoNodeFits",
            f"no node can ever hold a pod of this gang: it asks for {what}",
            details={"resources": [names[i] for i in over]},
        )
    return None


def _shown(ssn: Session, index: int, amount: int) -> str:
    vec = np.zeros(len(ssn.resources), dtype=np.int64)
    vec[index] = amount
    return next(iter(format_resource_list(ssn.resources.to_dict(vec)).values()), "0")
