"""The wait buckets of the ``wait_days`` rollup: pure arithmetic, shared by the rollup's writer
(batch.ledger.jobrollups) and the reports, which read with SQLAlchemy Core alone and import no
ORM model (batch.ledger.columns says why)."""

from __future__ import annotations

import math

#: the bucket of a job that ended without starting (it has no wait)
ENDED = -1
#: buckets per doubling of the wait, above ``_EXACT`` s (below, one per whole second)
_SUB = 8
_SHIFT = _SUB.bit_length() - 1
_EXACT = _SUB


def bucket_of(wait: float) -> int:
    """A wait's bucket, from its whole seconds: 0 below 1 s (and for a negative wait), one per
    second below 8 s, then 8 per doubling (each at most 12.5 % wide). Monotone in ``wait``;
    bucket ``b`` holds exactly the waits ``w`` with ``lo <= w < hi`` (``bucket_bounds``)."""
    s = math.floor(wait)
    if s < _EXACT:
        return max(s, 0)
    e = s.bit_length() - 1
    return _EXACT + (e - _SHIFT) * _SUB + ((s >> (e - _SHIFT)) & (_SUB - 1))


def bucket_bounds(bucket: int) -> tuple[int | None, int]:
    """``(lo, hi)`` of a bucket in whole seconds; ``lo`` is None for bucket 0 (no lower end)."""
    if bucket < _EXACT:
        return (None if bucket == 0 else bucket), bucket + 1
    e, m = divmod(bucket - _EXACT, _SUB)
    return (_SUB + m) << e, (_SUB + m + 1) << e


def seconds_to_us(value: float) -> int:
    """A view's seconds (microsecond-exact on PostgreSQL, millisecond on SQLite) as whole
    microseconds, as the rollup sums them and the reports add the raw rows to it."""
    return round(value * 1_000_000)
