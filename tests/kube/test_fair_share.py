"""The scheduler publishes its fair-share figures on each Queue (annotation tephra.io/fair-share).

Issue 29, item 1: the dashboard, the scheduler's metrics and the history showed three different
"deserved" figures for one queue. The annotation carries the session's own figure (what the
`volcano_queue_deserved_*` gauges export) so every surface can read that one figure; it is
written only when the figures change, never just because a new session ran.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from batch.api.fairshare import FAIR_SHARE_ANNOTATION, read_fair_share, same_figures
from batch.kube.config import ClusterAccess
from batch.kube.dispatch import StatusQueue
from batch.kube.fairshare import fair_share_annotations
from batch.kube.metrics import SchedulerMetrics
from batch.kube.service import SchedulerOptions, SchedulerService
from batch.kube.status import StatusWriter
from batch.model import fixtures as f
from tests.scheduler.util import NOW, cluster, gang, run

FPGA = "example.com/fpga"  # asked for by a pod, offered by no node
NO_FAIR_SHARE = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: gang
  - name: predicates
"""


def _session() -> Any:
    c = cluster(2, cpu="8", memory="32Gi", gpu=4, queues=("a", "b"))
    gang(c, "ja", 3, queue="a", cpu="2", memory="1Gi", gpu=1)
    gang(c, "jb", 1, queue="b", cpu="2", memory="1Gi", gpu=1)
    fpga = {"containers": [{"name": "m", "resources": {"requests": {"cpu": "1", FPGA: "1"}}}]}
    c.apply("PodGroup", "ADDED", f.podgroup("jf", queue="b", phase="Inqueue"))
    c.apply("Pod", "ADDED", f.pod("jf-0", group="jf", spec=fpga))
    return c, run(c)


def test_the_annotation_carries_the_sessions_figures_in_kubernetes_form() -> None:
    c, d = _session()
    values = fair_share_annotations(d, c)
    a = json.loads(values["a"] or "")
    assert a == {
        "deserved": {"cpu": "6", "memory": "3Gi", "nvidia.com/gpu": "3"},
        "allocated": {"cpu": "6", "memory": "3Gi", "nvidia.com/gpu": "3"},
        "request": {"cpu": "6", "memory": "3Gi", "nvidia.com/gpu": "3"},
        "session": d.session_uid,
    }
    b = json.loads(values["b"] or "")
    # pods are left out, and so is a resource the cluster does not have
    assert set(b["request"]) == {"cpu", "memory", "nvidia.com/gpu"}, b
    assert b["request"]["cpu"] == "3"
    # the same figure the scheduler's metric exports
    qm = d.queue_metrics["b"]
    metrics = SchedulerMetrics()
    metrics.set_queue_resources("deserved", "b", qm.amounts(qm.deserved))
    text = metrics.render().decode()
    gpu = 'volcano_queue_deserved_scalar_resources{queue_name="b",resource="nvidia.com/gpu"}'
    assert f"{gpu} 1000.0" in text and b["deserved"]["nvidia.com/gpu"] == "1"
    # compact JSON, readable back
    assert " " not in (values["a"] or "")
    obj = {"metadata": {"annotations": {FAIR_SHARE_ANNOTATION: values["a"]}}}
    share = read_fair_share(obj)
    assert share is not None and share.deserved["nvidia.com/gpu"] == 3000
    assert share.session_time == NOW


def test_a_queue_without_figures_gets_none() -> None:
    """root (no jobs of its own) has no entry in the fair-share plugin's figures, and neither
    has any queue under a configuration without proportion or capacity: no annotation."""
    c, d = _session()
    assert fair_share_annotations(d, c)["root"] is None
    assert set(fair_share_annotations(run(c, NO_FAIR_SHARE), c).values()) == {None}


def test_a_new_session_alone_is_no_change() -> None:
    c, d = _session()
    again = run(c, now=NOW + 5)
    assert again.session_uid != d.session_uid
    old, new = fair_share_annotations(d, c)["a"], fair_share_annotations(again, c)["a"]
    assert old != new and same_figures(old, new)
    assert not same_figures(old, None)


class _Client:
    """Records the patches the writer sends."""

    def __init__(self) -> None:
        self.patches: list[tuple[str, str, Any, str | None]] = []

    async def patch(self, res: Any, name: str, patch: Any, **kw: Any) -> dict[str, Any]:
        self.patches.append((res.kind, name, patch, kw.get("sub")))
        return {}


def _queue_obj(name: str, value: str | None) -> dict[str, Any]:
    annotations = {FAIR_SHARE_ANNOTATION: value} if value is not None else {}
    return {"metadata": {"name": name, "annotations": annotations}, "status": {}}


def test_unchanged_figures_are_not_written_and_stale_ones_are_removed() -> None:
    c, d = _session()
    again = run(c, now=NOW + 5)
    values, later = fair_share_annotations(d, c), fair_share_annotations(again, c)

    async def main() -> list[tuple[str, str, Any, str | None]]:
        client = _Client()
        writer = StatusWriter(client)  # type: ignore[arg-type]
        writer.observe("Queue", "ADDED", _queue_obj("a", None))
        writer.observe("Queue", "ADDED", _queue_obj("b", values["b"]))
        writer.observe("Queue", "ADDED", _queue_obj("root", values["a"]))  # stale
        statuses = StatusQueue(writer)
        statuses.offer(fair_shares=values)
        await statuses.flush()
        statuses.offer(fair_shares=later)  # a new session, the same figures
        await statuses.flush()
        return client.patches

    patches = sorted(asyncio.run(main()), key=lambda p: p[1])
    assert patches == [
        ("Queue", "a", {"metadata": {"annotations": {FAIR_SHARE_ANNOTATION: values["a"]}}}, None),
        ("Queue", "root", {"metadata": {"annotations": {FAIR_SHARE_ANNOTATION: None}}}, None),
    ]


def test_the_service_offers_the_figures_with_the_statuses() -> None:
    """The service hands each session's annotations to the status queue (leader-only, batched,
    coalesced per queue): a queue is offered its figures once per session at most."""
    c, d = _session()
    service = SchedulerService(SchedulerOptions(), access=ClusterAccess(server="http://x"))
    service.cache = c
    offered: dict[str, Any] = {}

    class _Statuses:
        def offer(self, **kw: Any) -> None:
            offered.update(kw)

    service._offer_statuses(_Statuses(), d)  # type: ignore[arg-type]
    assert offered["fair_shares"] == fair_share_annotations(d, c)


def test_the_metric_forgets_a_queue_the_annotation_leaves() -> None:
    """A queue that leaves the fair-share figures (its jobs ended, or the configuration lost
    its fair-share plugin) loses its annotation; its `volcano_queue_deserved_*` (and share)
    series go too, instead of repeating the last figure forever."""
    c, d = _session()
    service = SchedulerService(SchedulerOptions(), access=ClusterAccess(server="http://x"))
    service.gauges.export(d)
    text = service.metrics.render().decode()
    assert 'volcano_queue_deserved_milli_cpu{queue_name="b"}' in text
    service.gauges.export(run(c, NO_FAIR_SHARE, now=NOW + 5))
    text = service.metrics.render().decode()
    for series in (
        'volcano_queue_deserved_milli_cpu{queue_name="b"}',
        'volcano_queue_deserved_scalar_resources{queue_name="b",resource="nvidia.com/gpu"}',
        'volcano_queue_request_milli_cpu{queue_name="b"}',
        'volcano_queue_share{queue_name="b"}',
        'volcano_queue_overused{queue_name="b"}',
    ):
        assert series not in text, series
    assert 'volcano_queue_allocated_milli_cpu{queue_name="b"}' in text  # status, not a share
