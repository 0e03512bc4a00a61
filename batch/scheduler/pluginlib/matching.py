"""Vectorized Kubernetes matching: node selector terms, tolerations, label selectors.

Node-side checks work on the label code columns of ``NodeArrays`` so a term is evaluated over all
nodes with a few numpy operations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from batch.model.nodes import BoolVec, NodeArrays


def _int(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        return None


def expression_mask(arrays: NodeArrays, n: int, expr: Mapping[str, Any]) -> BoolVec:
    """One nodeSelectorRequirement (In, NotIn, Exists, DoesNotExist, Gt, Lt) over nodes."""
    key = str(expr.get("key", ""))
    op = str(expr.get("operator", ""))
    values = [str(v) for v in (expr.get("values") or [])]
    col = arrays.labels.get(key)
    codes = col.codes[:n] if col is not None else np.full(n, -1, dtype=np.int32)
    present = codes >= 0
    if op in ("In", "NotIn"):
        wanted = [col.lookup(v) for v in values] if col is not None else []
        inside = np.isin(codes, wanted) if wanted else np.zeros(n, dtype=np.bool_)
        return inside if op == "In" else ~inside
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return ~present
    if op in ("Gt", "Lt") and col is not None and len(values) == 1:
        bound = _int(values[0])
        if bound is None:
            return np.zeros(n, dtype=np.bool_)
        table = np.array(
            [(_int(v) if _int(v) is not None else 0) for v in col.values] + [0], dtype=np.int64
        )
        valid = np.array([_int(v) is not None for v in col.values] + [False], dtype=np.bool_)
        nums = table[codes]  # -1 indexes the trailing sentinel
        ok = present & valid[codes]
        return ok & (nums > bound if op == "Gt" else nums < bound)
    return np.zeros(n, dtype=np.bool_)


def field_mask(arrays: NodeArrays, n: int, expr: Mapping[str, Any]) -> BoolVec:
    """matchFields requirement (only ``metadata.name`` exists for nodes)."""
    if expr.get("key") != "metadata.name":
        return np.zeros(n, dtype=np.bool_)
    names = {str(v) for v in (expr.get("values") or [])}
    idx = [arrays.by_name[v] for v in names if v in arrays.by_name and arrays.by_name[v] < n]
    inside = np.zeros(n, dtype=np.bool_)
    inside[idx] = True
    op = expr.get("operator")
    if op == "In":
        return inside
    if op == "NotIn":
        return ~inside
    return np.zeros(n, dtype=np.bool_)


def term_mask(arrays: NodeArrays, n: int, term: Mapping[str, Any]) -> BoolVec:
    """A nodeSelectorTerm: AND of its requirements; an empty term matches nothing."""
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return np.zeros(n, dtype=np.bool_)
    m = np.ones(n, dtype=np.bool_)
    for e in exprs:
        m &= expression_mask(arrays, n, e)
    for f in fields:
        m &= field_mask(arrays, n, f)
    return m


def terms_mask(arrays: NodeArrays, n: int, terms: list[dict[str, Any]]) -> BoolVec:
    """requiredDuringScheduling nodeSelectorTerms: OR of terms (empty list matches nothing)."""
    m = np.zeros(n, dtype=np.bool_)
    for t in terms:
        m |= term_mask(arrays, n, t)
    return m


def selector_mask(arrays: NodeArrays, n: int, selector: Mapping[str, str]) -> BoolVec:
    m = np.ones(n, dtype=np.bool_)
    for k, v in selector.items():
        col = arrays.labels.get(k)
        if col is None:
            return np.zeros(n, dtype=np.bool_)
        m &= col.codes[:n] == col.lookup(v)
    return m


def tolerates(tolerations: list[dict[str, Any]], key: str, value: str, effect: str) -> bool:
    """Kubernetes ToleratesTaint for one taint."""
    for t in tolerations:
        t_effect = t.get("effect") or ""
        if t_effect and t_effect != effect:
            continue
        t_key = t.get("key") or ""
        op = t.get("operator") or "Equal"
        if not t_key:
            if op == "Exists":
                return True
            continue
        if t_key != key:
            continue
        if op == "Exists":
            return True
        if str(t.get("value") or "") == value:
            return True
    return False
