"""Server-side apply field ownership: `metadata.managedFields` as kube-apiserver keeps it.

A field set is kept as FieldsV1 itself: a nested dict of `f:<field>` and `k:{<key>}` (an element
of a list keyed by `patch.MERGE_KEYS`, built-in kinds only) whose leaves are `{}`; `"."` marks a
map or list element that is owned itself. Every other list is atomic (one leaf), as are the lists
of custom resources. A path is a tuple of those segments.

Apply (`apply`): the applied configuration's fields become the manager's Apply set; a field the
manager applied before and applies no more is removed unless another manager owns it (or a field
under it); a field owned by another manager whose value the apply changes is a conflict (409)
unless forced, which takes it over. An ordinary write (`track_update`) gives the fields it changed
to its manager's Update entry (per subresource) and takes them from the others. Entries whose set
empties are dropped; entries are sorted as the apiserver sorts them (operation, time, manager).

Cost: the sandbox tracks ownership only on objects that carry managedFields, i.e. once an object
has been applied; plain creates and updates of other objects do no bookkeeping (kube-apiserver
records an Update entry for them too: a documented divergence). The first apply to an object
without managedFields gives all it holds to the Update manager "before-first-apply", as
kube-apiserver does for an object whose managedFields were cleared, so applying a different value
over a field set by a plain create is a conflict on both servers (naming another manager).
"""

from __future__ import annotations

import json
from typing import Any

from batch.sandbox.errors import ApiError
from batch.sandbox.patch import MERGE_KEYS

Obj = dict[str, Any]
Path = tuple[str, ...]

# The Update manager that owns the fields of an object first applied without managedFields.
BEFORE_FIRST_APPLY = "before-first-apply"

_STRUCTS = frozenset({("f:metadata",), ("f:spec",), ("f:status",)})
_CR_STRUCTS = frozenset({("f:metadata",)})

# Metadata that is identity or server-owned: never part of a field set.
_STRIPPED_META = frozenset(
    {
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "selfLink",
    }
)


def stripped(obj: Obj, *, subresource: str, status_subresource: bool) -> Obj:
    """The part of obj a field set describes: no apiVersion/kind, no identity metadata, and only
    the half (status or the rest) the request's endpoint owns."""
    if subresource == "status":
        return {"status": obj["status"]} if "status" in obj else {}
    out = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    if status_subresource:
        out.pop("status", None)
    meta = out.get("metadata")
    if isinstance(meta, dict):
        meta = {k: v for k, v in meta.items() if k not in _STRIPPED_META}
        if meta:
            out["metadata"] = meta
        else:
            out.pop("metadata")
    return out


def _key_of(field: str, item: Any, keyed: bool) -> str | None:
    """The `k:` segment of a list element, or None when the list is atomic."""
    if not keyed or not isinstance(item, dict):
        return None
    key = MERGE_KEYS.get(field)
    if field == "ports" and "containerPort" not in item:
        key = "port"  # a Service's ports
    if key is None or key not in item:
        return None
    fields = {key: item[key]}
    if field == "ports":  # ports are keyed with their protocol, TCP by default
        fields["protocol"] = item.get("protocol", "TCP")
    return "k:" + json.dumps(fields, separators=(",", ":"), sort_keys=True)


def _keyed_list(field: str, items: list[Any], keyed: bool) -> bool:
    return (
        keyed
        and field in MERGE_KEYS
        and bool(items)
        and all(_key_of(field, i, keyed) is not None for i in items)
    )


def field_set(obj: Obj, *, keyed: bool) -> Obj:
    """The FieldsV1 set of an applied configuration: every field it names."""
    out: Obj = {}
    for name, value in obj.items():
        out["f:" + name] = _value_set(name, value, keyed)
    return out


def _value_set(name: str, value: Any, keyed: bool) -> Obj:
    if isinstance(value, dict):
        return field_set(value, keyed=keyed)
    if isinstance(value, list) and _keyed_list(name, value, keyed):
        out: Obj = {}
        for item in value:
            out[str(_key_of(name, item, keyed))] = {".": {}, **field_set(item, keyed=keyed)}
        return out
    return {}


def members(fs: Obj, prefix: Path = ()) -> set[Path]:
    """The paths a field set owns: its leaves and the nodes marked `.`."""
    out: set[Path] = set()
    for seg, sub in fs.items():
        if seg == ".":
            out.add(prefix)
            continue
        path = (*prefix, seg)
        if not sub:
            out.add(path)
        else:
            out |= members(sub, path)
    return out


def from_members(paths: set[Path], *, keyed: bool = True) -> Obj:
    """The FieldsV1 set owning exactly paths, keys sorted as kube-apiserver writes them. A field
    owned itself and with children gets "." if it is a map (labels, data) or list, not if it is
    a struct; without schemas the sandbox takes metadata, spec and status of a built-in kind
    (keyed) and metadata of a custom resource for the structs (kube-apiserver marks a custom
    resource's spec and status) and every other such field for a map (a struct set whole, e.g.
    an affinity, gets a "." here)."""
    structs = _STRUCTS if keyed else _CR_STRUCTS
    tree: Obj = {}
    for path in paths:
        node = tree
        for seg in path:
            node = node.setdefault(seg, {})
    for path in paths:
        if path in structs:
            continue
        node = tree
        for seg in path:
            node = node[seg]
        if node and "." not in node:
            node["."] = {}
    return _sorted_set(tree)


def _sorted_set(fs: Obj) -> Obj:
    return {k: _sorted_set(fs[k]) for k in sorted(fs)}


def _lookup(obj: Any, path: Path) -> tuple[bool, Any]:
    """(found, value) at path in obj."""
    cur = obj
    for seg in path:
        if seg.startswith("f:") and isinstance(cur, dict):
            if seg[2:] not in cur:
                return False, None
            cur = cur[seg[2:]]
        elif seg.startswith("k:") and isinstance(cur, list):
            want = json.loads(seg[2:])
            hit = [i for i in cur if isinstance(i, dict) and _matches(i, want)]
            if not hit:
                return False, None
            cur = hit[0]
        else:
            return False, None
    return True, cur


def _matches(item: Obj, want: Obj) -> bool:
    return all(item.get(k, "TCP" if k == "protocol" else None) == v for k, v in want.items())


def _remove(obj: Any, path: Path) -> None:
    """Remove the field or list element at path from obj (modified in place: obj is a copy)."""
    found, parent = _lookup(obj, path[:-1])
    if not found:
        return
    seg = path[-1]
    if seg.startswith("f:") and isinstance(parent, dict):
        parent.pop(seg[2:], None)
    elif seg.startswith("k:") and isinstance(parent, list):
        want = json.loads(seg[2:])
        parent[:] = [i for i in parent if not (isinstance(i, dict) and _matches(i, want))]


def _under(path: Path, paths: set[Path]) -> bool:
    """Whether some path of paths is path or lies under it."""
    n = len(path)
    return any(p[:n] == path for p in paths)


def entry(manager: str, operation: str, api_version: str, stamp: str, fs: Obj, sub: str) -> Obj:
    out: Obj = {
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "time": stamp,
        "fieldsType": "FieldsV1",
        "fieldsV1": fs,
    }
    if not stamp:
        del out["time"]
    if sub:
        out["subresource"] = sub
    return out


def _sorted(entries: list[Obj]) -> list[Obj]:
    return sorted(
        entries,
        key=lambda e: (
            e.get("operation", ""),
            e.get("time", ""),
            e.get("manager", ""),
            e.get("subresource", ""),
        ),
    )


def _same(e: Obj, manager: str, operation: str, sub: str) -> bool:
    return (
        e.get("manager") == manager
        and e.get("operation") == operation
        and e.get("subresource", "") == sub
    )


def _path_text(path: Path) -> str:
    out = ""
    for seg in path:
        if seg.startswith("f:"):
            out += "." + seg[2:]
        else:
            fields = json.loads(seg[2:])
            out += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in fields.items()) + "]"
    return out


def _printed(e: Obj) -> str:
    if e.get("operation") == "Update":
        return f'"{e.get("manager")}" using {e.get("apiVersion")}'
    return f'"{e.get("manager")}"'


def conflict_error(conflicts: list[tuple[Obj, Path]]) -> ApiError:
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f"conflict with {_printed(e)}",
            "field": _path_text(p),
        }
        for e, p in conflicts
    ]
    if len(conflicts) == 1:
        e, p = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {_printed(e)}: {_path_text(p)}"
    else:
        by: dict[str, list[str]] = {}
        for e, p in conflicts:
            by.setdefault(_printed(e), []).append(_path_text(p))
        lines = []
        for who in sorted(by):
            lines.append(f"conflicts with {who}:")
            lines += [f"- {t}" for t in by[who]]
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return ApiError(409, message, reason="Conflict", details={"causes": causes})


def _changed(before: tuple[bool, Any], after: tuple[bool, Any]) -> bool:
    """Whether a field's value changed; a map or list element present before and after has not
    (its own fields decide), as structured-merge-diff compares."""
    if before[0] and after[0] and isinstance(before[1], dict) and isinstance(after[1], dict):
        return False
    return before != after


def _unchanged(old: Obj, new: Obj) -> bool:
    """Whether new is old but for managedFields."""
    if {k: v for k, v in old.items() if k != "metadata"} != {
        k: v for k, v in new.items() if k != "metadata"
    }:
        return False
    meta = {k: v for k, v in new["metadata"].items() if k != "managedFields"}
    return meta == {k: v for k, v in old["metadata"].items() if k != "managedFields"}


def _prune(obj: Obj, dropped: set[Path], owned: set[Path]) -> None:
    """Remove from obj the fields of dropped that no path of owned is or lies under; a map or
    list the removal empties goes too unless owned."""
    for p in sorted(dropped, key=len):  # an element goes whole before its fields are looked up
        if _under(p, owned):
            continue
        _remove(obj, p)
        parent = p[:-1]
        while parent and parent not in owned:
            found, value = _lookup(obj, parent)
            if not found or value not in ({}, []):
                break
            _remove(obj, parent)
            parent = parent[:-1]


def apply(
    old: Obj,
    merged: Obj,
    applied: Obj,
    *,
    manager: str,
    api_version: str,
    stamp: str,
    subresource: str,
    status_subresource: bool,
    keyed: bool,
    force: bool,
) -> Obj:
    """merged (old with applied merged in) with the fields manager no longer applies removed and
    its managedFields updated; raises the 409 of a conflict unless force."""
    config = stripped(applied, subresource=subresource, status_subresource=status_subresource)
    fs = field_set(config, keyed=keyed)
    mine = members(fs)
    entries = list(old["metadata"].get("managedFields") or [])
    if not entries:
        # an object without managedFields: what it holds belongs to "before-first-apply"
        before: set[Path] = set()
        live = stripped(old, subresource=subresource, status_subresource=status_subresource)
        _diff({}, live, (), "", keyed, before)
        if before:
            fs_before = from_members(before, keyed=keyed)
            entries = [entry(BEFORE_FIRST_APPLY, "Update", api_version, stamp, fs_before, "")]
    own_prev: set[Path] = set()
    own_time: str | None = None
    others: list[tuple[Obj, set[Path]]] = []
    for e in entries:
        paths = members(e.get("fieldsV1") or {})
        if _same(e, manager, "Apply", subresource):
            own_prev = paths
            own_time = e.get("time")
        else:
            others.append((e, paths))
    conflicts: list[tuple[Obj, Path]] = []
    for e, paths in others:
        for p in sorted(mine & paths):
            if _changed(_lookup(old, p), _lookup(merged, p)):
                conflicts.append((e, p))
    if conflicts and not force:
        raise conflict_error(conflicts)
    taken = {p for _e, p in conflicts}
    kept: list[Obj] = []
    owned_by_others: set[Path] = set()
    for e, paths in others:
        left = paths - taken
        owned_by_others |= left
        if left == paths:
            kept.append(e)
        elif left:
            kept.append({**e, "fieldsV1": from_members(left, keyed=keyed)})
    _prune(merged, own_prev - mine, owned_by_others | mine)
    if mine:
        if _unchanged(old, merged):  # a no-op apply leaves the time as it was, or unset
            stamp = own_time or ""
        kept.append(entry(manager, "Apply", api_version, stamp, fs, subresource))
    merged["metadata"] = {**merged["metadata"], "managedFields": _sorted(kept)}
    return merged


def _added(value: Any, path: Path, field: str, keyed: bool, out: set[Path]) -> None:
    """Add to out the paths of a value a write added: itself and all under it."""
    out.add(path)
    if isinstance(value, dict):
        for k, v in value.items():
            _added(v, (*path, "f:" + k), k, keyed, out)
    elif isinstance(value, list) and _keyed_list(field, value, keyed):
        for item in value:
            _added(item, (*path, str(_key_of(field, item, keyed))), "", keyed, out)


def _diff(old: Any, new: Any, prefix: Path, field: str, keyed: bool, out: set[Path]) -> None:
    """Add to out the member paths of new that differ from old."""
    if old == new:
        return
    if isinstance(new, dict) and isinstance(old, dict):
        for k, v in new.items():
            if k not in old:
                _added(v, (*prefix, "f:" + k), k, keyed, out)
            else:
                _diff(old[k], v, (*prefix, "f:" + k), k, keyed, out)
        return
    if (
        isinstance(new, list)
        and isinstance(old, list)
        and _keyed_list(field, new, keyed)
        and _keyed_list(field, old, keyed)
    ):
        olds = {_key_of(field, i, keyed): i for i in old}
        for item in new:
            seg = str(_key_of(field, item, keyed))
            if seg in olds:
                _diff(olds[seg], item, (*prefix, seg), "", keyed, out)
            else:
                _added(item, (*prefix, seg), "", keyed, out)
        return
    out.add(prefix)


def _gone(old: Any, new: Any, prefix: Path, field: str, keyed: bool, out: set[Path]) -> None:
    """Add to out the paths of old that new no longer has."""
    if isinstance(old, dict) and isinstance(new, dict):
        for k, v in old.items():
            if k not in new:
                out.add((*prefix, "f:" + k))
            else:
                _gone(v, new[k], (*prefix, "f:" + k), k, keyed, out)
    elif (
        isinstance(old, list)
        and isinstance(new, list)
        and _keyed_list(field, old, keyed)
        and _keyed_list(field, new, keyed)
    ):
        news = {_key_of(field, i, keyed): i for i in new}
        for item in old:
            seg = _key_of(field, item, keyed)
            if seg not in news:
                out.add((*prefix, str(seg)))
            else:
                _gone(item, news[seg], (*prefix, str(seg)), "", keyed, out)


def track_update(
    old: Obj,
    new: Obj,
    *,
    manager: str,
    api_version: str,
    stamp: str,
    subresource: str,
    status_subresource: bool,
    keyed: bool,
) -> None:
    """Record in new's managedFields the fields an ordinary write changed (new is a fresh copy
    whose metadata may be set)."""
    entries = list(old["metadata"].get("managedFields") or [])
    a = stripped(old, subresource=subresource, status_subresource=status_subresource)
    b = stripped(new, subresource=subresource, status_subresource=status_subresource)
    changed: set[Path] = set()
    gone: set[Path] = set()
    _diff(a, b, (), "", keyed, changed)
    _gone(a, b, (), "", keyed, gone)
    if not changed and not gone:
        new["metadata"]["managedFields"] = entries
        return
    kept: list[Obj] = []
    mine: set[Path] = set()
    for e in entries:
        paths = members(e.get("fieldsV1") or {})
        left = {p for p in paths if p not in changed and not any(p[: len(g)] == g for g in gone)}
        if _same(e, manager, "Update", subresource):
            mine = left
        elif left == paths:
            kept.append(e)
        elif left:
            kept.append({**e, "fieldsV1": from_members(left, keyed=keyed)})
    mine |= changed
    if mine:
        kept.append(
            entry(
                manager, "Update", api_version, stamp, from_members(mine, keyed=keyed), subresource
            )
        )
    new["metadata"]["managedFields"] = _sorted(kept)
