"""proportion's water-filling on Python floats, for the handful of queues and resources a
cluster has.

Why this exists: ``fill_rows`` is a dozen numpy operations per round on matrices of a few
queues by 16 resource slots, most of them never requested; each operation costs more in numpy's
per-call overhead than in arithmetic (the Philly replay refilled about one session in three,
at about a fifth of the session's open). This is the same loop on the resources some queue
requests or is guaranteed, with the same IEEE operations in the same order, so it gives the
same bits (``tests/scheduler/test_fair_share_properties.py`` compares the two on random
inputs):

* a round's step is ``old + remaining * (weight / w)``, clipped by capability and request and
  raised to the guarantee, as numpy computes it element by element;
* the sums over queues of a round (what was raised and lowered) add the queues in row order,
  as numpy's reduction over the first axis of a matrix of two or more columns does (over one
  column numpy sums pairwise: not taken here);
* the weights' sum is numpy's own unless every weight is a whole number (then any order is
  exact);
* a resource no queue requests or is guaranteed ends at 0 for every queue and never changes
  what is left of it, so it is left out of the loop but for the end test (all that is left
  below the tolerance).

Inputs outside that (a negative total, one column, many queues) take numpy's path
(``applies``). ``SCALAR_FILL`` switches this path off (the tests compare both).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from batch.scheduler.framework.shares import TOL, F

from .attrs import QueueAttr

__all__ = ["SCALAR_FILL", "fill_scalar"]

#: water-fill on Python floats when it applies (off: always numpy's ``fill_rows``)
SCALAR_FILL = True

#: more queues than this take numpy's path (its row-order sums are checked up to here)
MAX_ROWS = 64

Rows = list[list[float]]


def _weight_sum(weights: Sequence[float], whole: bool) -> float:
    """numpy's ``weight[rows].sum()`` of these weights (exact in any order when whole)."""
    if whole:
        return float(sum(weights))
    return float(np.array(weights, dtype=np.float64).sum())


def _active(request: F, guarantees: Rows) -> list[int]:
    """The resources (not pods) some queue requests or is guaranteed."""
    used = [n > 0 for n in np.count_nonzero(request, axis=0).tolist()]
    for g in guarantees:
        if any(g):
            used = [bool(u or x != 0) for u, x in zip(used, g, strict=True)]
    return [j for j in range(1, len(used)) if used[j]]


def fill_scalar(attrs: Sequence[QueueAttr], request: F, total: F) -> F | None:
    """``fill_rows`` of ``attrs`` for ``request`` (one row per queue), or None when this path
    does not apply."""
    k, m = request.shape
    tot = total.tolist()
    if not SCALAR_FILL or m < 2 or k > MAX_ROWS or min(tot) < 0:
        return None
    guarantees = [a.guarantee.tolist() for a in attrs]
    act = _active(request, guarantees)
    wts = [float(a.weight) for a in attrs]
    whole = all(w.is_integer() for w in wts) and sum(map(abs, wts)) < 2.0**52
    out = np.zeros((k, m), dtype=np.float64)
    if act:
        caps = [a.real_capability.tolist() for a in attrs]
        rows = _loop(
            wts,
            whole,
            [[c[j] for j in act] for c in caps],
            [[g[j] for j in act] for g in guarantees],
            [[r[j] for j in act] for r in request.tolist()],
            [tot[j] for j in act],
            all(tot[j] < TOL for j in range(1, m) if j not in act),
        )
        for t, j in enumerate(act):  # (numpy's fancy indexing costs more than a few columns)
            out[:, j] = [row[t] for row in rows]
    return out


def _loop(
    wts: list[float],
    whole: bool,
    cap: Rows,
    guarantee: Rows,
    req: Rows,
    remaining: list[float],
    dropped_small: bool,
) -> Rows:
    """The rounds of ``fill_rows`` on the active resources. numpy's sums over queues start
    from the first row; adding the others' zeros, or starting from 0.0, keeps the bits (every
    term is a non-negative float, never -0.0)."""
    k, n = len(wts), len(remaining)
    deserved: Rows = [[0.0] * n for _ in range(k)]
    meet = [False] * k
    span = range(n)
    while True:
        rows = [i for i in range(k) if not meet[i]]
        w = _weight_sum([wts[i] for i in rows], whole)
        if w == 0:
            break
        inc = [0.0] * n
        dec = [0.0] * n
        for i in rows:
            old, c, q, g = deserved[i], cap[i], req[i], guarantee[i]
            ratio = wts[i] / w
            d = []
            satisfied = True
            for t in span:
                o = old[t]
                x = o + remaining[t] * ratio
                x = min(x, c[t])
                x = min(x, q[t])
                x = max(x, g[t])
                d.append(x)
                if not q[t] <= x + TOL:
                    satisfied = False
                if x > o:
                    inc[t] += x - o
                elif o > x:
                    dec[t] += o - x
            if satisfied or d == old:
                meet[i] = True
            deserved[i] = d
        new = [r + dn - up for r, dn, up in zip(remaining, dec, inc, strict=True)]
        new = [0.0 if v < 0 else v for v in new]
        if (dropped_small and all(v < TOL for v in new)) or new == remaining:
            break
        remaining = new
    return deserved
