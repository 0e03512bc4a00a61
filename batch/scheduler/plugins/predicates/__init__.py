"""predicates: Volcano's predicates plugin, as vector filters (docs/volcano-semantics.md#plugins).

Filters, in kube-scheduler's order, each reported with kube-scheduler's reason text so the
"0/N nodes are available: ..." message reads the same: NodeUnschedulable ("node(s) were
unschedulable"), TaintToleration ("node(s) had untolerated taint {k: v}"), NodeAffinity —
nodeSelector and required node affinity ("node(s) didn't match Pod's node affinity/selector");
the allocate action then checks resources and pod count ("Insufficient <r>", "Too many pods");
NodePorts ("node(s) didn't have free ports for the requested pod ports") and required
InterPodAffinity (pod affinity, pod anti-affinity, and existing pods' anti-affinity) depend on
in-session placements and are evaluated per task. Scheduling gates are honoured by the actions.

Arguments: ``predicate.NodeAffinityEnable``, ``predicate.NodePortsEnable``,
``predicate.TaintTolerationEnable``, ``predicate.PodAffinityEnable`` (default true); Volcano's
volume/DRA/topology-spread switches are accepted (validated as booleans) but those filters are
not implemented.
"""

from __future__ import annotations

import numpy as np

from batch.model.info import TaskInfo, TaskTemplate
from batch.model.nodes import BoolVec
from batch.scheduler.framework.arguments import Arg, Arguments
from batch.scheduler.framework.hooks import Hooks
from batch.scheduler.framework.nodes import SessionNodes
from batch.scheduler.framework.registry import Plugin
from batch.scheduler.framework.session import Session
from batch.scheduler.pluginlib.matching import (
    selector_mask,
    terms_mask,
    tolerates,
)
from batch.scheduler.plugins.predicates.podaffinity import PodAffinity

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
R_UNSCHEDULABLE = "node(s) were unschedulable"
R_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
R_PORTS = "node(s) didn't have free ports for the requested pod ports"

_IGNORED = (
    "predicate.NodeVolumeLimitsEnable",
    "predicate.VolumeZoneEnable",
    "predicate.PodTopologySpreadEnable",
    "predicate.VolumeBindingEnable",
    "predicate.DynamicResourceAllocationEnable",
    "predicate.CacheEnable",
    "predicate.GPUSharingEnable",
    "predicate.GPUNumberEnable",
)


def taint_reason(key: str, value: str) -> str:
    return f"node(s) had untolerated taint {{{key}: {value}}}"


class PredicatesPlugin(Plugin):
    name = "predicates"
    ARGUMENTS = (
        Arg("predicate.NodeAffinityEnable", "bool", True, "node affinity and node selectors"),
        Arg("predicate.NodePortsEnable", "bool", True, "host ports"),
        Arg("predicate.TaintTolerationEnable", "bool", True, "taints and tolerations"),
        Arg("predicate.PodAffinityEnable", "bool", True, "inter-pod affinity"),
        *(Arg(key, "bool", None, "accepted (Volcano); no effect") for key in _IGNORED),
        Arg("predicate.ProportionalEnable", "bool", None, "accepted (Volcano); no effect"),
        Arg("predicate.NodeLockEnable", "bool", None, "accepted (Volcano); no effect"),
        Arg("predicate.resources", "list", None, "accepted (Volcano); no effect"),
        Arg("predicate.resources.<resource>.cpu", "float", None, "accepted (Volcano); no effect"),
        Arg(
            "predicate.resources.<resource>.memory", "float", None, "accepted (Volcano); no effect"
        ),
    )

    def __init__(self, arguments: Arguments) -> None:
        super().__init__(arguments)
        self.node_affinity = arguments.get_bool("predicate.NodeAffinityEnable", True)
        self.node_ports = arguments.get_bool("predicate.NodePortsEnable", True)
        self.taints = arguments.get_bool("predicate.TaintTolerationEnable", True)
        self.pod_affinity = arguments.get_bool("predicate.PodAffinityEnable", True)
        for key in _IGNORED:
            arguments.get_bool(key, False)

    keeps_callbacks = True

    def register_kept(self, hooks: Hooks) -> None:
        hooks.add_batch_predicate(self.static_filters)
        if self.node_ports or self.pod_affinity:
            hooks.add_dynamic_predicate(self.dynamic_filters)

    def on_session_open(self, ssn: Session) -> None:
        if self.node_ports or self.pod_affinity:
            self.affinity = PodAffinity(ssn)

    def static_filters(self, tmpl: TaskTemplate, nd: SessionNodes) -> list[tuple[str, BoolVec]]:
        arrays = nd.arrays
        n = nd.n
        out: list[tuple[str, BoolVec]] = []
        unsched = arrays.unschedulable[:n]
        if unsched.any() and not tolerates(tmpl.tolerations, UNSCHEDULABLE_TAINT, "", "NoSchedule"):
            out.append((R_UNSCHEDULABLE, unsched.copy()))
        if self.taints:
            for (key, value, effect), mask in sorted(arrays.taints.items()):
                if effect not in ("NoSchedule", "NoExecute"):
                    continue
                m = mask[:n]
                if not m.any() or tolerates(tmpl.tolerations, key, value, effect):
                    continue
                out.append((taint_reason(key, value), m.copy()))
        if self.node_affinity:
            ok = np.ones(n, dtype=np.bool_)
            if tmpl.node_selector:
                ok &= selector_mask(arrays, n, tmpl.node_selector)
            if tmpl.required_terms is not None:
                ok &= terms_mask(arrays, n, tmpl.required_terms)
            if not ok.all():
                out.append((R_AFFINITY, ~ok))
        return out

    def dynamic_filters(self, task: TaskInfo, nd: SessionNodes) -> list[tuple[str, BoolVec]]:
        tmpl = task.template
        out: list[tuple[str, BoolVec]] = []
        if self.node_ports and tmpl.host_ports:
            fail = np.zeros(nd.n, dtype=np.bool_)
            for ip, proto, port in tmpl.host_ports:
                for key in list(nd.arrays.ports) + list(nd._ports):
                    kip, kproto, kport = key
                    if kport != port or kproto != proto:
                        continue
                    if ip != kip and "0.0.0.0" not in (ip, kip):
                        continue
                    cnt = nd.port_counts(key)
                    if cnt is not None:
                        fail |= cnt > 0
            if fail.any():
                out.append((R_PORTS, fail))
        if self.pod_affinity:
            out.extend(self.affinity.filters(task))
        return out
