"""proportion's water-filling (``fill_rows``) on Python floats, for the few queues of a cluster.

Why this exists: the simulator's sessions fill ~10 queues over ~4 resources, where the vector
form's two dozen numpy calls a round cost more than the arithmetic (7 % of every Philly
session). This form does the same IEEE operations in the same order on Python floats, so its
results are the vector form's bit for bit (tests/scheduler/test_proportion_paths.py compares them):

* a round's step ``remaining * (weight / w)`` per queue and resource, then ``np.minimum`` with
  the capability and the request and ``np.maximum`` with the guarantee (for numbers that are
  not NaN, ``np.minimum(x, y)`` is ``x if x <= y else y`` and ``np.maximum(x, y)`` is
  ``x if x >= y else y``, signed zeros included);
* ``sum(axis=0)`` over a matrix of two or more columns adds the rows in order, the first row
  the start (numpy reduces along the slow axis row by row); here from +0.0, the same since no
  addend is -0.0, skipping the addends that are 0 (``x + 0.0`` is ``x``);
* the weight sum ``w``: numpy adds pairwise, so this form runs only for weights that are whole
  numbers whose sum is below 2**53 (every order of adding them is exact: ``whole_weights``);
* a resource column (pods left out, which the vector form keeps at 0) that the cluster has
  none of, that no queue is guaranteed or requests, and that no capability makes negative stays
  +0.0 in every round (``0.0 + 0.0 * share``, capped by a number >= 0, floored at 0) and moves no
  ``remaining``: such columns are left out of the arithmetic (``Specs.live``).

Inputs are finite but for capabilities (unlimited: +inf) and never NaN or -0.0 (they come from
integer resource amounts).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from batch.scheduler.framework.shares import TOL, F

__all__ = ["Live", "Specs", "fill_floats", "specs", "whole_weights"]

Rows = list[list[float]]

#: weight sums below this are exact in every order (whole numbers in a float's mantissa)
_EXACT = float(2**53)


def whole_weights(weights: Sequence[float]) -> bool:
    """Are all ``weights`` whole numbers with a sum of magnitudes below 2**53?"""
    return all(float(w).is_integer() for w in weights) and sum(abs(w) for w in weights) < _EXACT


class Specs:
    """The capabilities and guarantees of a list of queues as matrices (one row per queue), the
    columns they make live (a guarantee that is not 0, a negative capability) and, per cluster
    total and set of requested columns, the live columns with those matrices' parts as lists
    (``live``)."""

    __slots__ = ("cap", "guarantee", "kept", "lives", "static")

    def __init__(self, cap: Sequence[F], guarantee: Sequence[F]) -> None:
        self.kept = (tuple(cap), tuple(guarantee))  # keeps the ids in the ``specs`` key
        self.cap = np.stack(cap)
        self.guarantee = np.stack(guarantee)
        self.static = (self.guarantee != 0).any(axis=0) | ~(self.cap >= 0).all(axis=0)
        self.lives: dict[bytes, Live] = {}

    def live(self, total: F, request: F) -> Live:
        """The live columns for ``total`` and ``request`` (pods, column 0, left out): those the
        cluster has some of, some queue requests, or ``static``."""
        asked = request.any(axis=0)
        key = total.tobytes() + asked.tobytes()
        got = self.lives.get(key)
        if got is None:
            mask = asked | (total != 0) | self.static
            mask[0] = False
            cols: list[int] = np.flatnonzero(mask).tolist()
            got = Live(cols, self.cap[:, cols].tolist(), self.guarantee[:, cols].tolist(), total)
            if len(self.lives) >= _SPECS_KEPT:
                self.lives.clear()
            self.lives[key] = got
        return got


class Live:
    """The live columns of a fill (``Specs.live``), where to write them in a row (``at``: a
    slice when they are consecutive), the queues' capabilities and guarantees on them and the
    cluster's total on them."""

    __slots__ = ("at", "cap", "cols", "guarantee", "total")

    def __init__(self, cols: list[int], cap: Rows, guarantee: Rows, total: F) -> None:
        self.cols, self.cap, self.guarantee = cols, cap, guarantee
        self.total: list[float] = total[cols].tolist()
        consecutive = bool(cols) and cols == list(range(cols[0], cols[-1] + 1))
        self.at: slice | list[int] = slice(cols[0], cols[-1] + 1) if consecutive else cols


#: ``Specs`` by the ids of the vectors they were stacked from, only of vectors that were
#: read-only (``QueueVectors``' vectors, never made writeable again); at most ``_SPECS_KEPT``
_SPECS: dict[tuple[int, ...], Specs] = {}
_SPECS_KEPT = 64


def specs(cap: Sequence[F], guarantee: Sequence[F]) -> Specs:
    """The ``Specs`` of queues with these capabilities and guarantees (kept for read-only
    vectors: the simulator's sessions fill the same queues' vectors over and over)."""
    key = (*map(id, cap), *map(id, guarantee))
    got = _SPECS.get(key)
    if got is None:
        got = Specs(cap, guarantee)
        if any(v.flags.writeable for v in (*cap, *guarantee)):
            return got
        if len(_SPECS) >= _SPECS_KEPT:
            _SPECS.clear()
        _SPECS[key] = got
    return got


def fill_floats(
    weights: Sequence[float], cap: Rows, guarantee: Rows, request: Rows, remaining: list[float]
) -> Rows:
    """The deserved rows (one per queue, the columns given) of the water-filling of
    ``remaining`` (``fill_rows``' loop, round by round; each round's increase and decrease
    summed over the queues in order, from +0.0: no addend is -0.0)."""
    cols = range(len(remaining))
    deserved: Rows = [[0.0] * len(remaining) for _ in weights]
    rows = list(range(len(weights)))
    while rows:
        w = sum([weights[i] for i in rows])
        if w == 0:
            break
        inc = [0.0] * len(remaining)
        dec = [0.0] * len(remaining)
        left: list[int] = []
        for i in rows:
            share = weights[i] / w
            old, c, q, g = deserved[i], cap[i], request[i], guarantee[i]
            d = []
            moved = short = False
            for j in cols:
                o = old[j]
                x = o + remaining[j] * share
                if not x <= c[j]:
                    x = c[j]
                if not x <= q[j]:
                    x = q[j]
                if not x >= g[j]:
                    x = g[j]
                d.append(x)
                if x != o:
                    moved = True
                    if x > o:
                        inc[j] += x - o
                    else:
                        dec[j] += o - x
                if not q[j] <= x + TOL:
                    short = True
            deserved[i] = d
            if moved and short:
                left.append(i)
        net = [r + x - y for r, x, y in zip(remaining, dec, inc, strict=True)]
        new = [v if v >= 0 else 0.0 for v in net]
        if all(v < TOL for v in new) or new == remaining:
            break
        remaining, rows = new, left
    return deserved
