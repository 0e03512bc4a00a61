"""Required inter-pod affinity and anti-affinity (kube-scheduler's InterPodAffinity filter).

Three checks per task, over topology domains (the value of ``topologyKey`` on a node): the task's
required pod affinity (a node passes when its domain holds a matching pod; a task whose term
matches nothing anywhere but matches itself may go anywhere with the key — the first pod of a
group), its required anti-affinity (a node fails when its domain holds a matching pod), and
existing pods' required anti-affinity against the task (symmetry). Pods placed earlier in the
same session count, so a gang with self anti-affinity spreads one per domain.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from batch.api.selectors import label_selector_matches as labels_match
from batch.model.info import TaskInfo
from batch.model.nodes import BoolVec
from batch.model.status import ON_NODE_STATUS, TaskStatus
from batch.scheduler.framework.session import Session

R_POD_AFFINITY = "node(s) didn't match pod affinity rules"
R_POD_ANTI = "node(s) didn't match pod anti-affinity rules"
R_EXISTING_ANTI = "node(s) didn't satisfy existing pods anti-affinity rules"

_HOLDING = ON_NODE_STATUS | {TaskStatus.PIPELINED}


class PodAffinity:
    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.cache = ssn.cache

    def _namespaces(self, term: Mapping[str, Any], own_ns: str) -> set[str] | None:
        """Namespaces a term applies to (None = all)."""
        names = {str(n) for n in (term.get("namespaces") or [])}
        sel = term.get("namespaceSelector")
        if sel is not None:
            if not sel.get("matchLabels") and not sel.get("matchExpressions"):
                return None
            for name, ns in self.cache.namespaces.items():
                labels = (ns.get("metadata") or {}).get("labels") or {}
                if labels_match(sel, labels):
                    names.add(name)
            return names
        return names or {own_ns}

    def _assigned(self) -> Iterator[TaskInfo]:
        nd = self.ssn.nodes
        seen: set[str] = set()
        for idx in range(nd.n):
            for uid in self.cache.node_tasks[idx]:
                t = self.cache.tasks.get(uid)
                if t is not None and t.node_idx >= 0 and t.status in _HOLDING:
                    seen.add(uid)
                    yield t
        for tasks in nd.placed.values():
            for t in tasks:
                if t.uid not in seen and t.node_idx >= 0 and t.status in _HOLDING:
                    yield t

    def _domain_mask(self, key: str, values: set[int]) -> BoolVec:
        nd = self.ssn.nodes
        col = nd.arrays.labels.get(key)
        if col is None or not values:
            return np.zeros(nd.n, dtype=np.bool_)
        return np.isin(col.codes[: nd.n], list(values))

    def _code(self, key: str, node_idx: int) -> int:
        col = self.ssn.nodes.arrays.labels.get(key)
        if col is None:
            return -1
        return int(col.codes[node_idx])

    def filters(self, task: TaskInfo) -> list[tuple[str, BoolVec]]:
        """(reason, failing-node mask) for each of the three checks that rejects a node."""
        tmpl = task.template
        has_symmetric = bool(self.cache.anti_affinity_tasks) or self.ssn.nodes.placed_anti > 0
        if not (tmpl.pod_affinity or tmpl.pod_anti_affinity or has_symmetric):
            return []
        out: list[tuple[str, BoolVec]] = []
        assigned: list[TaskInfo] = []
        if tmpl.pod_affinity or tmpl.pod_anti_affinity:
            assigned = [t for t in self._assigned() if t.uid != task.uid]
        if tmpl.pod_affinity:
            ok = self._affinity_ok(task, assigned)
            if not ok.all():
                out.append((R_POD_AFFINITY, ~ok))
        if tmpl.pod_anti_affinity:
            fail = self._anti_affinity_fail(task, assigned)
            if fail.any():
                out.append((R_POD_ANTI, fail))
        if has_symmetric:
            fail = self._existing_anti_fail(task)
            if fail.any():
                out.append((R_EXISTING_ANTI, fail))
        return out

    def _affinity_ok(self, task: TaskInfo, assigned: list[TaskInfo]) -> BoolVec:
        """Nodes passing the task's required pod affinity.

        kube-scheduler's InterPodAffinity: only pods matching *all* required terms count; a node
        passes when, for every term, such a pod runs in the node's domain. When no pod matches
        them all, the first pod of a group whose terms match itself may go to any node that has
        every topology label."""
        nd = self.ssn.nodes
        terms = [
            (str(t.get("topologyKey") or ""), self._namespaces(t, task.namespace), t)
            for t in task.template.pod_affinity
        ]

        def matches_all(namespace: str, labels: Any) -> bool:
            return all(
                (nss is None or namespace in nss) and labels_match(t.get("labelSelector"), labels)
                for _key, nss, t in terms
            )

        matching = [t for t in assigned if matches_all(t.namespace, t.labels)]
        ok = np.ones(nd.n, dtype=np.bool_)
        labelled = np.ones(nd.n, dtype=np.bool_)
        counted = False
        for key, _nss, _t in terms:
            col = nd.arrays.labels.get(key)
            labelled &= (col.codes[: nd.n] >= 0) if col is not None else False
            values = {self._code(key, t.node_idx) for t in matching}
            values.discard(-1)
            counted = counted or bool(values)
            ok &= self._domain_mask(key, values)
        if not counted and matches_all(task.namespace, task.labels):
            return labelled
        return ok

    def _anti_affinity_fail(self, task: TaskInfo, assigned: list[TaskInfo]) -> BoolVec:
        """Nodes whose domain holds a pod matching one of the task's required anti-affinity
        terms."""
        fail = np.zeros(self.ssn.nodes.n, dtype=np.bool_)
        for term in task.template.pod_anti_affinity:
            key = str(term.get("topologyKey") or "")
            nss = self._namespaces(term, task.namespace)
            sel = term.get("labelSelector")
            values = {
                self._code(key, t.node_idx)
                for t in assigned
                if (nss is None or t.namespace in nss) and labels_match(sel, t.labels)
            }
            values.discard(-1)
            fail |= self._domain_mask(key, values)
        return fail

    def _existing_anti_fail(self, task: TaskInfo) -> BoolVec:
        """Nodes in the domain of an assigned pod whose required anti-affinity matches the task
        (symmetry)."""
        nd = self.ssn.nodes
        fail = np.zeros(nd.n, dtype=np.bool_)
        for t in self._anti_affinity_holders(task):
            for term in t.template.pod_anti_affinity:
                nss = self._namespaces(term, t.namespace)
                if nss is not None and task.namespace not in nss:
                    continue
                if not labels_match(term.get("labelSelector"), task.labels):
                    continue
                key = str(term.get("topologyKey") or "")
                code = self._code(key, t.node_idx)
                if code >= 0:
                    fail |= self._domain_mask(key, {code})
        return fail

    def _anti_affinity_holders(self, task: TaskInfo) -> Iterator[TaskInfo]:
        """Pods with required anti-affinity holding a node (cache and this session), each once,
        the task itself left out."""
        nd = self.ssn.nodes
        anti = [self.cache.tasks[u] for u in self.cache.anti_affinity_tasks]
        anti += [t for ts in nd.placed.values() for t in ts if t.template.pod_anti_affinity]
        seen: set[str] = set()
        for t in anti:
            if t.uid in seen or t.uid == task.uid:
                continue
            seen.add(t.uid)
            if t.node_idx >= 0 and t.status in _HOLDING:
                yield t
