"""Node state as structure-of-arrays.

One ``(dims, nodes)`` int64 matrix per quantity (allocatable, used, idle, releasing, pipelined):
row ``d`` is a contiguous array over nodes, so "does request r fit" over 10,000 nodes is a handful
of vector compares. Labels are interned per key into an int32 code array (``-1`` = absent) and
taints into one boolean mask per distinct taint, so nodeSelector, node affinity and taint checks
are vector operations too. Slots of deleted nodes are reused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

BoolVec = npt.NDArray[np.bool_]
Int32Vec = npt.NDArray[np.int32]

#: kubelet's default max-pods, used when a Node does not report ``pods`` allocatable
DEFAULT_MAX_PODS = 110


@dataclass(slots=True)
class LabelColumn:
    """Interned values of one label key over all node slots."""

    codes: Int32Vec
    values: list[str] = field(default_factory=list)
    by_value: dict[str, int] = field(default_factory=dict)

    def code(self, value: str) -> int:
        c = self.by_value.get(value)
        if c is None:
            c = len(self.values)
            self.values.append(value)
            self.by_value[value] = c
        return c

    def lookup(self, value: str) -> int:
        return self.by_value.get(value, -2)  # -2 never matches a slot


@dataclass(slots=True)
class NodeMeta:
    """Per-node facts that are not resource amounts."""

    name: str
    labels: Mapping[str, str]
    taints: list[tuple[str, str, str]]
    unschedulable: bool
    ready: bool
    raw: Mapping[str, Any] | None = None


class NodeArrays:
    """All node slots of the cache (the session copies only the mutable matrices)."""

    def __init__(self, dims: int, capacity: int = 64) -> None:
        self.dims = dims
        self.cap = capacity
        self.count = 0  # slots in use (including free ones below count)
        self.alloc = np.zeros((dims, capacity), dtype=np.int64)
        self.used = np.zeros((dims, capacity), dtype=np.int64)
        self.releasing = np.zeros((dims, capacity), dtype=np.int64)
        self.pipelined = np.zeros((dims, capacity), dtype=np.int64)
        self.present = np.zeros(capacity, dtype=np.bool_)  # slot holds a node
        self.schedulable = np.zeros(capacity, dtype=np.bool_)  # Ready and selected
        self.unschedulable = np.zeros(capacity, dtype=np.bool_)  # spec.unschedulable
        self.meta: list[NodeMeta | None] = [None] * capacity
        self.by_name: dict[str, int] = {}
        self.free: list[int] = []
        self.labels: dict[str, LabelColumn] = {}
        self.taints: dict[tuple[str, str, str], BoolVec] = {}
        self.ports: dict[tuple[str, str, int], Int32Vec] = {}
        self.meta_gen = 0  # bumps when labels/taints/readiness/membership change
        self.alloc_gen = 0  # bumps when a node's allocatable (or the resource dimensions) change
        #: slots whose allocatable, used, releasing or pipelined columns changed, in order
        #: (``touch``; read with ``touched_since``); ``touched_base``: entries dropped in front
        self.touched: list[int] = []
        self.touched_base = 0
        #: bumps when any releasing or pipelined amount changes (``has_future``)
        self.future_gen = 0
        self._has_future: tuple[int, int, bool] = (-1, -1, False)

    # -- capacity -------------------------------------------------------------------------
    def _grow_nodes(self) -> None:
        new = self.cap * 2

        def grow2(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
            out = np.zeros((a.shape[0], new), dtype=a.dtype)
            out[:, : self.cap] = a
            return out

        def grow1(a: npt.NDArray[Any], fill: Any = 0) -> npt.NDArray[Any]:
            out = np.full(new, fill, dtype=a.dtype)
            out[: self.cap] = a
            return out

        self.alloc = grow2(self.alloc)
        self.used = grow2(self.used)
        self.releasing = grow2(self.releasing)
        self.pipelined = grow2(self.pipelined)
        self.present = grow1(self.present)
        self.schedulable = grow1(self.schedulable)
        self.unschedulable = grow1(self.unschedulable)
        self.meta.extend([None] * (new - self.cap))
        for col in self.labels.values():
            col.codes = grow1(col.codes, -1)
        for tkey, mask in list(self.taints.items()):
            self.taints[tkey] = grow1(mask)
        for pkey, cnt in list(self.ports.items()):
            self.ports[pkey] = grow1(cnt)
        self.cap = new

    def grow_dims(self, dims: int) -> None:
        for name in ("alloc", "used", "releasing", "pipelined"):
            old = getattr(self, name)
            out = np.zeros((dims, self.cap), dtype=np.int64)
            out[: old.shape[0]] = old
            setattr(self, name, out)
        self.future_gen += 1
        self.dims = dims
        self.alloc_gen += 1

    # -- change record --------------------------------------------------------------------
    def touch(self, idx: int) -> None:
        """Record that slot ``idx``'s resource columns changed (state kept across sessions
        refreshes only such slots, ``touched_since``)."""
        touched = self.touched
        touched.append(idx)
        if len(touched) > 8 * self.cap:  # forget the older half (their readers start afresh)
            drop = len(touched) // 2
            del touched[:drop]
            self.touched_base += drop

    def has_future(self, n: int) -> bool:
        """Does any of the first ``n`` slots hold releasing or pipelined amounts? (Kept by
        ``future_gen``, which every writer of those matrices bumps.)"""
        gen, count, got = self._has_future
        if gen != self.future_gen or count != n:
            got = bool(self.releasing[:, :n].any() or self.pipelined[:, :n].any())
            self._has_future = (self.future_gen, n, got)
        return got

    @property
    def stamp(self) -> int:
        """The position in the change record now (what ``touched_since`` is given later)."""
        return self.touched_base + len(self.touched)

    def touched_since(self, stamp: int) -> set[int] | None:
        """Slots touched after ``stamp`` (None: no longer known, recompute everything)."""
        if stamp < self.touched_base:
            return None
        return set(self.touched[stamp - self.touched_base :])

    # -- membership -----------------------------------------------------------------------
    def slot_for(self, name: str) -> int:
        idx = self.by_name.get(name)
        if idx is not None:
            return idx
        if self.free:
            idx = self.free.pop()
        else:
            if self.count >= self.cap:
                self._grow_nodes()
            idx = self.count
            self.count += 1
        self.by_name[name] = idx
        self.present[idx] = True
        self.meta_gen += 1
        return idx

    def set_meta(self, idx: int, meta: NodeMeta, alloc: npt.NDArray[np.int64]) -> None:
        old = self.meta[idx]
        self.meta[idx] = meta
        column = alloc[: self.dims]
        if not np.array_equal(self.alloc[:, idx], column):
            self.alloc[:, idx] = column
            self.alloc_gen += 1
            self.touch(idx)
        changed = (
            old is None
            or old.labels != meta.labels
            or old.taints != meta.taints
            or old.unschedulable != meta.unschedulable
            or old.ready != meta.ready
        )
        if not changed:
            return
        self.meta_gen += 1
        self.unschedulable[idx] = meta.unschedulable
        # labels
        old_labels = old.labels if old is not None else {}
        for key in old_labels:
            if key not in meta.labels:
                self.labels[key].codes[idx] = -1
        for key, value in meta.labels.items():
            col = self.labels.get(key)
            if col is None:
                col = self.labels[key] = LabelColumn(np.full(self.cap, -1, dtype=np.int32))
            col.codes[idx] = col.code(value)
        # taints
        if old is not None:
            for t in old.taints:
                if t in self.taints:
                    self.taints[t][idx] = False
        for t in meta.taints:
            mask = self.taints.get(t)
            if mask is None:
                mask = self.taints[t] = np.zeros(self.cap, dtype=np.bool_)
            mask[idx] = True

    def remove(self, name: str) -> int | None:
        idx = self.by_name.pop(name, None)
        if idx is None:
            return None
        meta = self.meta[idx]
        if meta is not None:
            for key in meta.labels:
                self.labels[key].codes[idx] = -1
            for t in meta.taints:
                self.taints[t][idx] = False
        self.meta[idx] = None
        self.present[idx] = False
        self.schedulable[idx] = False
        self.unschedulable[idx] = False
        self.alloc[:, idx] = 0
        self.alloc_gen += 1
        self.touch(idx)
        self.used[:, idx] = 0
        self.releasing[:, idx] = 0
        self.pipelined[:, idx] = 0
        self.future_gen += 1
        for cnt in self.ports.values():
            cnt[idx] = 0
        self.free.append(idx)
        self.meta_gen += 1
        return idx

    def add_ports(self, idx: int, ports: list[tuple[str, str, int]], sign: int) -> None:
        for p in ports:
            cnt = self.ports.get(p)
            if cnt is None:
                cnt = self.ports[p] = np.zeros(self.cap, dtype=np.int32)
            cnt[idx] += sign

    def name_of(self, idx: int) -> str:
        meta = self.meta[idx]
        return meta.name if meta is not None else ""
