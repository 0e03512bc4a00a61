"""Server-side printing (`meta.k8s.io/v1 Table`) so `kubectl get` shows real columns.

kubectl asks for `as=Table`; the sandbox answers with the columns kube-apiserver prints for the
kinds people look at (pods, nodes, namespaces, deployments, jobs) and with a CRD's
`additionalPrinterColumns` for custom resources, so `kubectl get vcjob,pg,q` looks as it does on a
Volcano cluster.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from batch.sandbox.meta import ResourceType

Obj = dict[str, Any]
Column = tuple[str, str, str, int, Callable[[Obj], Any]]  # name, type, format, priority, getter


def age(stamp: str | None, now: float | None = None) -> str:
    if not stamp:
        return "<unknown>"
    try:
        t = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return "<unknown>"
    secs = int((now or time.time()) - t)
    secs = max(secs, 0)
    if secs < 120:
        return f"{secs}s"
    if secs < 3600 * 3:
        return f"{secs // 60}m"
    if secs < 86400 * 2:
        return f"{secs // 3600}h"
    return f"{secs // 86400}d"


def _pod_status(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    if meta.get("deletionTimestamp"):
        return "Terminating"
    reason = status.get("reason")
    for cs in status.get("containerStatuses") or []:
        state = cs.get("state") or {}
        if "waiting" in state and state["waiting"].get("reason"):
            return str(state["waiting"]["reason"])
        if "terminated" in state:
            term = state["terminated"]
            return str(term.get("reason") or f"ExitCode:{term.get('exitCode')}")
    return str(reason or status.get("phase") or "Unknown")


def _pod_ready(pod: Obj) -> str:
    containers = (pod.get("spec") or {}).get("containers") or []
    ready = sum(
        1 for c in (pod.get("status") or {}).get("containerStatuses") or [] if c.get("ready")
    )
    return f"{ready}/{len(containers)}"


def _restarts(pod: Obj) -> int:
    return sum(
        int(c.get("restartCount", 0))
        for c in (pod.get("status") or {}).get("containerStatuses") or []
    )


def _node_status(node: Obj) -> str:
    ready = "Unknown"
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            ready = "Ready" if c.get("status") == "True" else "NotReady"
    if (node.get("spec") or {}).get("unschedulable"):
        ready += ",SchedulingDisabled"
    return ready


def _roles(node: Obj) -> str:
    labels = (node.get("metadata") or {}).get("labels") or {}
    roles = sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/"))
    return ",".join(roles) or "<none>"


def _get(path: str) -> Callable[[Obj], Any]:
    parts = path.split(".")

    def getter(obj: Obj) -> Any:
        cur: Any = obj
        for p in parts:
            if not isinstance(cur, dict):
                return None
            cur = cur.get(p)
        return cur

    return getter


def _name(obj: Obj) -> Any:
    return obj["metadata"]["name"]


def _age(obj: Obj) -> str:
    return age(obj["metadata"].get("creationTimestamp"))


_NAME: Column = ("Name", "string", "name", 0, _name)
_AGE: Column = ("Age", "string", "", 0, _age)


def _event_seen(obj: Obj) -> str:
    return age(
        obj.get("lastTimestamp")
        or (obj.get("series") or {}).get("lastObservedTime")
        or obj.get("eventTime")
        or obj["metadata"].get("creationTimestamp")
    )


def _event_object(obj: Obj) -> str:
    involved = obj.get("involvedObject") or {}
    return f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"


_BUILTIN: dict[tuple[str, str], list[Column]] = {
    ("", "Event"): [
        ("Last Seen", "string", "", 0, _event_seen),
        ("Type", "string", "", 0, _get("type")),
        ("Reason", "string", "", 0, _get("reason")),
        ("Object", "string", "", 0, _event_object),
        ("Message", "string", "", 0, _get("message")),
        ("Count", "integer", "", 1, lambda o: o.get("count") or 1),
        ("Name", "string", "name", 1, _name),
    ],
    ("", "Pod"): [
        _NAME,
        ("Ready", "string", "", 0, _pod_ready),
        ("Status", "string", "", 0, _pod_status),
        ("Restarts", "integer", "", 0, _restarts),
        _AGE,
        ("IP", "string", "", 1, _get("status.podIP")),
        ("Node", "string", "", 1, _get("spec.nodeName")),
    ],
    ("", "Node"): [
        _NAME,
        ("Status", "string", "", 0, _node_status),
        ("Roles", "string", "", 0, _roles),
        _AGE,
        ("Version", "string", "", 0, _get("status.nodeInfo.kubeletVersion")),
    ],
    ("", "Namespace"): [_NAME, ("Status", "string", "", 0, _get("status.phase")), _AGE],
    ("apps", "Deployment"): [
        _NAME,
        (
            "Ready",
            "string",
            "",
            0,
            lambda o: (
                f"{(o.get('status') or {}).get('readyReplicas', 0)}/"
                f"{(o.get('spec') or {}).get('replicas', 0)}"
            ),
        ),
        (
            "Up-to-date",
            "integer",
            "",
            0,
            lambda o: (o.get("status") or {}).get("updatedReplicas", 0),
        ),
        (
            "Available",
            "integer",
            "",
            0,
            lambda o: (o.get("status") or {}).get("availableReplicas", 0),
        ),
        _AGE,
    ],
    ("batch", "Job"): [
        _NAME,
        (
            "Completions",
            "string",
            "",
            0,
            lambda o: (
                f"{(o.get('status') or {}).get('succeeded', 0)}/"
                f"{(o.get('spec') or {}).get('completions', 1)}"
            ),
        ),
        _AGE,
    ],
}

_INDEX = re.compile(r"^(.*)\[(\d+)\]$")


def _jsonpath(path: str) -> Callable[[Obj], Any]:
    """A getter for the simple JSONPath forms printer columns use (`.a.b`, `.a[0].b`)."""
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    if "?(" in path or "*" in path:
        return lambda _o: None
    steps: list[str | int] = []
    for part in path.lstrip(".").split("."):
        m = _INDEX.match(part)
        if m:
            if m.group(1):
                steps.append(m.group(1))
            steps.append(int(m.group(2)))
        elif part:
            steps.append(part)

    def getter(obj: Obj) -> Any:
        cur: Any = obj
        for s in steps:
            if isinstance(s, int):
                if not isinstance(cur, list) or s >= len(cur):
                    return None
                cur = cur[s]
            else:
                if not isinstance(cur, dict):
                    return None
                cur = cur.get(s)
        return cur

    return getter


def _age_of(getter: Callable[[Obj], Any]) -> Callable[[Obj], Any]:
    def cell(obj: Obj) -> str:
        return age(getter(obj))

    return cell


def columns_for(rt: ResourceType) -> list[Column]:
    cols = _BUILTIN.get((rt.group, rt.kind))
    if cols is not None:
        return cols
    out: list[Column] = [_NAME]
    for c in rt.printer_columns:
        getter = _jsonpath(str(c.get("jsonPath", "")))
        typ = str(c.get("type", "string"))
        if typ == "date":
            out.append(
                (str(c.get("name")), "string", "", int(c.get("priority", 0)), _age_of(getter))
            )
        else:
            out.append(
                (
                    str(c.get("name")),
                    typ,
                    str(c.get("format", "")),
                    int(c.get("priority", 0)),
                    getter,
                )
            )
    if not rt.printer_columns:  # a CRD's columns replace the default Age, as apiextensions'
        out.append(_AGE)
    return out


def column_definitions(cols: list[Column]) -> list[Obj]:
    return [
        {"name": n, "type": t, "format": f, "description": "", "priority": p}
        for n, t, f, p, _g in cols
    ]


def row(cols: list[Column], obj: Obj, include: str) -> Obj:
    cells = []
    for *_rest, getter in cols:
        v = getter(obj)
        cells.append("<none>" if v is None else v)
    out: Obj = {"cells": cells}
    if include == "Object":
        out["object"] = obj
    elif include != "None":
        out["object"] = {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata") or {},
        }
    return out


def table(
    rt: ResourceType,
    objs: list[Obj],
    *,
    rv: str,
    include: str,
    cont: str = "",
    with_columns: bool = True,
) -> Obj:
    cols = columns_for(rt)
    meta: Obj = {"resourceVersion": rv}
    if cont:
        meta["continue"] = cont
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": column_definitions(cols) if with_columns else [],
        "rows": [row(cols, o, include) for o in objs],
    }
