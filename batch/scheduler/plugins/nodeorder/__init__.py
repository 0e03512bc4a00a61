"""nodeorder: Volcano's nodeorder plugin — kube-scheduler scores, vectorized
(docs/volcano-semantics.md#plugins).

Per node, integer 0..100 scores as kube-scheduler computes them, times the plugin weights and
summed: ``leastrequested.weight`` (1) — Σ over cpu, memory of (alloc - requested) * 100 / alloc,
averaged; ``mostrequested.weight`` (0) — requested * 100 / alloc; ``balancedresource.weight`` (1)
— (1 - std of the cpu/memory requested fractions) * 100; ``nodeaffinity.weight`` (2) — preferred
node-affinity term weights, normalized to 0..100 over feasible nodes; ``tainttoleration.weight``
(3) — intolerable PreferNoSchedule taints counted and normalized in reverse. "requested" is the
node's used amount plus the task's request. ``podaffinity``, ``imagelocality`` and
``podtopologyspread`` weights are accepted but those scores are not implemented (always 0).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from batch.model.info import TaskTemplate
from batch.model.nodes import BoolVec
from batch.scheduler.framework.arguments import MAX_WEIGHT, Arg, Arguments
from batch.scheduler.framework.hooks import Hooks
from batch.scheduler.framework.nodes import FloatVec, SessionNodes
from batch.scheduler.framework.registry import Plugin
from batch.scheduler.pluginlib.matching import term_mask, tolerates

MAX_SCORE = 100
CPU, MEM = 1, 2


def _requested(tmpl: TaskTemplate, nd: SessionNodes, idx: Any, d: int) -> Any:
    return nd.used[d, idx] + tmpl.req[d]


def least_requested(tmpl: TaskTemplate, nd: SessionNodes, idx: Any) -> FloatVec:
    total = np.zeros(nd.alloc[CPU, idx].shape, dtype=np.int64)
    for d in (CPU, MEM):
        alloc = nd.alloc[d, idx]
        req = _requested(tmpl, nd, idx, d)
        safe = np.where(alloc > 0, alloc, 1)
        s = np.where((alloc > 0) & (req <= alloc), (alloc - req) * MAX_SCORE // safe, 0)
        total += s
    return (total // 2).astype(np.float64)


def most_requested(tmpl: TaskTemplate, nd: SessionNodes, idx: Any) -> FloatVec:
    total = np.zeros(nd.alloc[CPU, idx].shape, dtype=np.int64)
    for d in (CPU, MEM):
        alloc = nd.alloc[d, idx]
        req = _requested(tmpl, nd, idx, d)
        safe = np.where(alloc > 0, alloc, 1)
        s = np.where((alloc > 0) & (req <= alloc), req * MAX_SCORE // safe, 0)
        total += s
    return (total // 2).astype(np.float64)


def balanced(tmpl: TaskTemplate, nd: SessionNodes, idx: Any) -> FloatVec:
    fr = []
    for d in (CPU, MEM):
        alloc = nd.alloc[d, idx]
        req = _requested(tmpl, nd, idx, d)
        f = np.where(alloc > 0, req / np.where(alloc > 0, alloc, 1), 1.0)
        fr.append(np.minimum(f, 1.0))
    std = np.abs(fr[0] - fr[1]) / 2
    out: FloatVec = np.floor((1 - std) * MAX_SCORE)
    return out


def least_requested_one(req_l: list[int], alloc: list[int], used: list[int]) -> int:
    total = 0
    for d in (CPU, MEM):
        a = alloc[d]
        r = used[d] + req_l[d]
        total += (a - r) * MAX_SCORE // a if (a > 0 and r <= a) else 0
    return total // 2


def most_requested_one(req_l: list[int], alloc: list[int], used: list[int]) -> int:
    total = 0
    for d in (CPU, MEM):
        a = alloc[d]
        r = used[d] + req_l[d]
        total += r * MAX_SCORE // a if (a > 0 and r <= a) else 0
    return total // 2


def balanced_one(req_l: list[int], alloc: list[int], used: list[int]) -> float:
    fr = []
    for d in (CPU, MEM):
        a = alloc[d]
        f = (used[d] + req_l[d]) / a if a > 0 else 1.0
        fr.append(min(f, 1.0))
    std = abs(fr[0] - fr[1]) / 2
    return float(math.floor((1 - std) * MAX_SCORE))


def normalize(raw: FloatVec, ok: BoolVec, *, reverse: bool) -> FloatVec:
    """kube DefaultNormalizeScore over the feasible nodes."""
    top = float(raw[ok].max()) if ok.any() else 0.0
    if top == 0:
        return np.full(raw.shape, float(MAX_SCORE) if reverse else 0.0)
    s = np.floor(raw * MAX_SCORE / top)
    return MAX_SCORE - s if reverse else s


class NodeOrderPlugin(Plugin):
    name = "nodeorder"
    ARGUMENTS = (
        Arg(
            "leastrequested.weight", "float", 1, "least requested resources", min=0, max=MAX_WEIGHT
        ),
        Arg("mostrequested.weight", "float", 0, "most requested resources", min=0, max=MAX_WEIGHT),
        Arg("nodeaffinity.weight", "float", 2, "preferred node affinity", min=0, max=MAX_WEIGHT),
        Arg(
            "podaffinity.weight", "float", 2, "preferred inter-pod affinity", min=0, max=MAX_WEIGHT
        ),
        Arg("balancedresource.weight", "float", 1, "balanced allocation", min=0, max=MAX_WEIGHT),
        Arg("tainttoleration.weight", "float", 3, "tolerated soft taints", min=0, max=MAX_WEIGHT),
        Arg(
            "imagelocality.weight", "float", 1, "images already on the node", min=0, max=MAX_WEIGHT
        ),
        Arg("podtopologyspread.weight", "float", 2, "topology spread", min=0, max=MAX_WEIGHT),
        Arg("selectorspread.weight", "float", 0, "accepted (Volcano)", min=0, max=MAX_WEIGHT),
        Arg("volumebinding.weight", "float", 1, "accepted (Volcano)", min=0, max=MAX_WEIGHT),
    )

    def __init__(self, arguments: Arguments) -> None:
        super().__init__(arguments)
        a = arguments
        self.least = a.get_float("leastrequested.weight", 1)
        self.most = a.get_float("mostrequested.weight", 0)
        self.node_affinity = a.get_float("nodeaffinity.weight", 2)
        self.pod_affinity = a.get_float("podaffinity.weight", 2)
        self.balanced = a.get_float("balancedresource.weight", 1)
        self.taint = a.get_float("tainttoleration.weight", 3)
        self.image = a.get_float("imagelocality.weight", 1)
        self.spread = a.get_float("podtopologyspread.weight", 2)

    keeps_callbacks = True

    def register_kept(self, hooks: Hooks) -> None:
        least, most, bal = self.least, self.most, self.balanced

        def dynamic(tmpl: TaskTemplate, nd: SessionNodes, idx: Any) -> Any:
            if isinstance(idx, int):
                alloc, used, _ = nd.cols(idx)
                rl = tmpl.req_list
                s = 0.0
                if least:
                    s += least * least_requested_one(rl, alloc, used)
                if most:
                    s += most * most_requested_one(rl, alloc, used)
                if bal:
                    s += bal * balanced_one(rl, alloc, used)
                return s
            out: FloatVec = np.zeros(nd.alloc[CPU, idx].shape)
            if least:
                out += least * least_requested(tmpl, nd, idx)
            if most:
                out += most * most_requested(tmpl, nd, idx)
            if bal:
                out += bal * balanced(tmpl, nd, idx)
            return out

        if least or most or bal:
            hooks.add_batch_node_order_fn(dynamic, local=True)
        if self.node_affinity or self.taint:
            hooks.add_static_node_order_fn(self.static)

    def static(self, tmpl: TaskTemplate, nd: SessionNodes, ok: BoolVec) -> FloatVec:
        out: FloatVec = np.zeros(nd.n)
        if self.node_affinity and tmpl.preferred_terms:
            raw: FloatVec = np.zeros(nd.n)
            for term in tmpl.preferred_terms:
                weight = float(term.get("weight") or 0)
                pref = term.get("preference") or {}
                if weight:
                    raw += weight * term_mask(nd.arrays, nd.n, pref)
            out += self.node_affinity * normalize(raw, ok, reverse=False)
        if self.taint:
            prefer = [
                (t, m)
                for t, m in nd.arrays.taints.items()
                if t[2] == "PreferNoSchedule" and m[: nd.n].any()
            ]
            if prefer:
                cnt: FloatVec = np.zeros(nd.n)
                for (key, value, effect), mask in prefer:
                    if not tolerates(tmpl.tolerations, key, value, effect):
                        cnt += mask[: nd.n]
                out += self.taint * normalize(cnt, ok, reverse=True)
            else:
                out += self.taint * MAX_SCORE
        return out
