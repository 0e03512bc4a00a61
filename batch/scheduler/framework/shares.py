"""Fair-share arithmetic the fair-share plugins and the evicting actions share.

Volcano compares resource vectors with a 0.1 tolerance and leaves the pods dimension out
(``LessEqual``); queue figures are float vectors over the session's resource dimensions, missing
capability dimensions unlimited. proportion and capacity compute their queues' figures with
these helpers and publish them (``publish_shares``) for the ``volcano_queue_*`` metrics.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from batch.api.resources import describe_amount
from batch.model.info import QueueInfo
from batch.scheduler.framework.session import Session

F = npt.NDArray[np.float64]
TOL = 0.1
INF = np.inf
_F64 = np.dtype(np.float64)


#: ``positive_dims`` answers from a memo by the vector's type and bytes (False: worked out at
#: every call)
KEEP_POSITIVE_DIMS = True
_POSITIVE: dict[tuple[str, bytes], npt.NDArray[np.intp]] = {}
#: at most this many vectors' answers are kept
_POSITIVE_KEPT = 4096


def positive_dims(v: npt.NDArray[Any]) -> npt.NDArray[np.intp]:
    """The resources, pods (index 0) left out, that ``v`` has more than 0 of, as indexes
    (``np.flatnonzero(v[1:] > 0) + 1``, read-only): a gang's minimum, asked at every admission,
    is one of a few shapes, so the answers are kept by the vector's type and bytes."""
    if not KEEP_POSITIVE_DIMS:
        return np.flatnonzero(v[1:] > 0) + 1
    key = (v.dtype.char, v.tobytes())
    got = _POSITIVE.get(key)
    if got is None:
        got = np.flatnonzero(v[1:] > 0) + 1
        got.flags.writeable = False
        if len(_POSITIVE) >= _POSITIVE_KEPT:
            _POSITIVE.clear()
        _POSITIVE[key] = got
    return got


def le(a: F, b: F) -> bool:
    """Volcano's ``LessEqual`` with the 0.1 tolerance, all dimensions except pods.

    Float vectors of one shape are compared as Python floats (the same IEEE additions and
    comparisons as the vector form, without its per-call overhead: allocate asks after every
    placement)."""
    if a.dtype == _F64 and b.dtype == _F64 and a.shape == b.shape and a.ndim == 1:
        return le_lists(a.tolist(), b.tolist())
    return bool((a[1:] <= b[1:] + TOL).all())


def le_lists(a: list[float], b: list[float]) -> bool:
    """``le`` of two float vectors of one length given as Python lists."""
    for i in range(1, len(a)):  # noqa: SIM110 (no generator: asked after every placement)
        if not a[i] <= b[i] + TOL:
            return False
    return True


def le_common(a: npt.NDArray[Any], b: npt.NDArray[Any]) -> bool:
    """``LessEqual`` on the resources both vectors have (a job's vectors may be shorter than a
    session's queue figures when a resource appeared since)."""
    n = min(len(a), len(b))
    return bool((a[1:n] <= b[1:n] + TOL).all())


def le_on(a: F, b: F, dims: npt.NDArray[np.intp]) -> bool:
    return bool((a[dims] <= b[dims] + TOL).all())


def nearer_on(held: F, need: F, deserved: F, dims: npt.NDArray[np.intp]) -> bool:
    """Would a queue holding ``held`` be nearer its ``deserved`` share with ``need`` more, on
    every resource of ``dims``? Within its share, or past it by less than it now falls short:
    shares are rounded to the nearest gang, not down (a queue owed 6.7 GPUs whose gangs take 8
    is owed its gang; one owed 4 is not, 8 would leave it as far past its share)."""
    if SCALAR_NEARER and held.dtype == need.dtype == deserved.dtype == _F64:
        return _nearer_floats(held.tolist(), need.tolist(), deserved.tolist(), dims.tolist())
    h, n, d = held[dims], need[dims], deserved[dims]
    after = h + n
    return bool(((after <= d + TOL) | (after - d < d - h - TOL)).all())


#: ``nearer_on`` on Python floats for float vectors (False: the vector form always)
SCALAR_NEARER = True


def _nearer_floats(h: list[float], n: list[float], d: list[float], dims: list[int]) -> bool:
    """``nearer_on``'s vector form, resource by resource: the same IEEE additions,
    subtractions and comparisons without its per-call overhead (fair admission and borrowing
    ask it for every waiting gang)."""
    for i in dims:
        after = h[i] + n[i]
        if not (after <= d[i] + TOL or after - d[i] < d[i] - h[i] - TOL):
            return False
    return True


def vec_of(ssn: Session, amounts: dict[str, int], *, missing: float = 0.0) -> F:
    v = np.full(ssn.resources.capacity, missing, dtype=np.float64)
    v[0] = 0.0 if missing == 0.0 else INF
    for name, amount in amounts.items():
        i = ssn.resources.get(name)
        if i is not None:
            v[i] = float(amount)
    return v


def describe_shares(ssn: Session, v: F, dims: npt.NDArray[np.intp]) -> str:
    """``v`` on ``dims`` for people to read: ``16 nvidia.com/gpu, 48 cpu``."""
    names = ssn.resources.names
    return ", ".join(f"{describe_amount(names[d], round(float(v[d])))} {names[d]}" for d in dims)


def capability_vec(ssn: Session, q: QueueInfo) -> F:
    """spec.capability: missing dimensions, and cpu/memory <= 0, are unlimited."""
    v = vec_of(ssn, q.capability, missing=INF)
    for i in (1, 2):
        if v[i] <= 0:
            v[i] = INF
    return v


class ShareAttr(Protocol):
    """What a fair-share plugin knows of a queue (proportion's QueueAttr, capacity's CapAttr)."""

    deserved: F
    real_capability: F
    inqueue: F
    allocated: F

    def share(self) -> float: ...


def publish_shares(ssn: Session, attrs: Mapping[str, ShareAttr]) -> None:
    """Hand each queue's figures to the session for the ``volcano_queue_*`` metrics (a plugin
    without a notion of request, like capacity, has no ``request`` attribute)."""
    for name, a in attrs.items():
        ssn.publish_queue_metrics(
            name,
            deserved=a.deserved,
            real_capacity=a.real_capability,
            inqueue=a.inqueue,
            request=getattr(a, "request", None),
            share=a.share,
            overused=functools.partial(le, a.deserved, a.allocated),
        )
