"""Resource dimensions shared by every vector in the model.

Volcano's ``Resource`` is a map; Tephra keeps one integer vector per object instead, indexed by a
registry of resource names, so node fits and shares are numpy operations. Index 0 is ``pods`` (a
plain count, never part of shares), 1 is ``cpu`` (milli-cores), 2 is ``memory`` (bytes); extended
resources (``nvidia.com/gpu``, ...) get the next indexes in order of first appearance, in
milli-units, exactly as ``batch.api.resources.to_internal`` returns them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

from batch.api.resources import CPU, MEMORY, PODS, format_resource_list

IntVec = npt.NDArray[np.int64]

#: vectors are allocated with this many slots; the registry grows it (doubling) when needed
INITIAL_DIMS = 16


class ResourceIndex:
    """Name <-> dimension registry; ``capacity`` is the length of every vector."""

    __slots__ = ("_by_name", "_formatted", "capacity", "names", "version")

    def __init__(self) -> None:
        self._formatted: dict[bytes, dict[str, str]] = {}
        self.names: list[str] = [PODS, CPU, MEMORY]
        self._by_name: dict[str, int] = {n: i for i, n in enumerate(self.names)}
        self.capacity = INITIAL_DIMS
        self.version = 0

    def __len__(self) -> int:
        return len(self.names)

    def index(self, name: str) -> int:
        """Dimension of ``name``, registering it when new (may raise the capacity)."""
        i = self._by_name.get(name)
        if i is None:
            i = len(self.names)
            self.names.append(name)
            self._formatted.clear()
            self._by_name[name] = i
            self.version += 1
            while len(self.names) > self.capacity:
                self.capacity *= 2
        return i

    def get(self, name: str) -> int | None:
        return self._by_name.get(name)

    def zeros(self) -> IntVec:
        return np.zeros(self.capacity, dtype=np.int64)

    def vector(self, amounts: Mapping[str, int]) -> IntVec:
        """Vector of ``amounts`` (registers new names)."""
        v = self.zeros()
        idx = [self.index(n) for n in amounts]
        if len(v) < self.capacity:  # capacity grew while registering
            v = self.zeros()
        for i, amount in zip(idx, amounts.values(), strict=True):
            v[i] = amount
        return v

    def to_dict(self, vec: IntVec, *, keep_zero: Iterable[str] = ()) -> dict[str, int]:
        """Non-zero dimensions of ``vec`` (``pods`` excluded) as a name -> amount dict."""
        keep = set(keep_zero)
        out: dict[str, int] = {}
        for i, name in enumerate(self.names):
            if i == 0 or i >= len(vec):
                continue
            amount = int(vec[i])
            if amount or name in keep:
                out[name] = amount
        return out

    def to_list(self, vec: IntVec) -> dict[str, str]:
        """Kubernetes ResourceList (canonical quantity strings) of ``vec``; cpu/memory always.

        Memoized by the vector's bytes: every session formats each queue's allocation, and
        formatting quantities costs far more than looking them up.
        """
        key = vec.tobytes()
        hit = self._formatted.get(key)
        if hit is None:
            if len(self._formatted) >= 4096:
                self._formatted.clear()
            hit = self._formatted[key] = format_resource_list(
                self.to_dict(vec, keep_zero=(CPU, MEMORY))
            )
        return dict(hit)


def pad(vec: IntVec, capacity: int) -> IntVec:
    """``vec`` zero-padded to ``capacity`` (no copy when already that long)."""
    if len(vec) >= capacity:
        return vec
    out = np.zeros(capacity, dtype=np.int64)
    out[: len(vec)] = vec
    return out


def less_equal(a: IntVec, b: IntVec, dims: IntVec | None = None) -> bool:
    """``a <= b`` on every dimension (or only on ``dims``); pods excluded."""
    if dims is None:
        return bool((a[1:] <= b[1:]).all())
    return bool((a[dims] <= b[dims]).all())


def requested_dims(vec: IntVec) -> IntVec:
    """Dimensions (excluding pods) where ``vec`` is positive."""
    nz = np.flatnonzero(vec > 0)
    return nz[nz > 0]


def add_column(arr: npt.NDArray[np.int64], idx: int, vec: IntVec, sign: int = 1) -> None:
    """``arr[:, idx] += sign * vec`` in place (``sign``: 1 or -1), without the write-back of
    the augmented assignment on a slice (a node's column of the dims x nodes arrays: one
    numpy call instead of three on the placement path)."""
    col = arr[:, idx]
    (np.add if sign > 0 else np.subtract)(col, vec, col)
