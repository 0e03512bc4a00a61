"""Matching a ``metav1.LabelSelector`` object (matchLabels + matchExpressions) against labels.

Why this exists: pod affinity, HyperNode ``labelMatch`` members and the sandbox's
PodDisruptionBudgets and workload selectors all ask the same question; the rule is written once
here. (The sandbox's *string* selector grammar, ``?labelSelector=a in (x)``, is the HTTP API's
and stays in ``batch.sandbox.selectors``.)

A nil selector matches nothing and an empty one everything, as ``LabelSelectorAsSelector``
says; values compare as strings; an unknown operator constrains nothing (admission rejects it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["label_selector_matches"]


def _expression_holds(expr: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
    key = str(expr.get("key", ""))
    op = str(expr.get("operator", ""))
    has = key in labels
    if op in ("Exists", "DoesNotExist"):
        return has == (op == "Exists")
    values = {str(v) for v in expr.get("values") or []}
    inside = has and str(labels[key]) in values
    if op == "In":
        return inside
    if op == "NotIn":
        return not inside
    return True


def label_selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, Any]) -> bool:
    """Whether ``labels`` satisfy the LabelSelector ``selector`` (None matches nothing)."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if str(key) not in labels or str(labels[str(key)]) != str(value):
            return False
    return all(
        _expression_holds(expr, labels)
        for expr in selector.get("matchExpressions") or []
        if isinstance(expr, Mapping)
    )
