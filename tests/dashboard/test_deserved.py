"""The queues page shows the scheduler's deserved share (issue 29, item 1).

It showed a weight share of its own (3.2 GPUs) while the scheduler's metric said 22: the page
now reads the figure the scheduler published on the Queue (`tephra.io/fair-share`) and falls
back to spec.deserved or the weight share only while there is none, saying so.
"""

from __future__ import annotations

from typing import Any

from batch.api.fairshare import FAIR_SHARE_ANNOTATION, fair_share_value
from batch.dashboard.pages import queues_page
from batch.dashboard.state import LiveState
from batch.dashboard.views import queues
from batch.sandbox.nodes import make_nodes

GPU = "nvidia.com/gpu"
SESSION = "session-7-1800000000000"


def _queue(name: str, weight: int, annotation: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": name}
    if annotation is not None:
        meta["annotations"] = {FAIR_SHARE_ANNOTATION: annotation}
    return {"metadata": meta, "spec": {"weight": weight}, "status": {"state": "Open"}}


def _state() -> LiveState:
    state = LiveState()
    for node in make_nodes(count=4, gpus=8):
        state.sink("Node", "ADDED", node)
    published = fair_share_value(
        deserved={GPU: 22000, "cpu": 5000},
        allocated={GPU: 4000},
        request={GPU: 30000},
        session=SESSION,
    )
    state.sink("Queue", "ADDED", _queue("root", 1))
    state.sink("Queue", "ADDED", _queue("team-a", 1, published))
    state.sink("Queue", "ADDED", _queue("team-b", 9))
    return state


def test_the_queue_page_shows_the_schedulers_deserved_share() -> None:
    rows = {q["name"]: q for q in queues(_state())["queues"]}
    a = rows["team-a"]
    assert a["deserved"][GPU]["text"] == "22" and a["deserved"]["cpu"]["text"] == "5"
    assert a["deserved_source"] == "scheduler"
    assert a["deserved_session"] == SESSION
    assert a["deserved_at"] == "2027-01-15T08:00:00Z"
    b = rows["team-b"]  # no figures published: the weight share, and the page says so
    assert b["deserved"][GPU]["text"] == "28.8"
    assert b["deserved_source"] == "not computed by the scheduler yet: weight share"
    assert b["deserved_session"] is None and b["deserved_at"] is None


def test_the_page_names_where_each_deserved_share_comes_from() -> None:
    html = queues_page(queues(_state()))
    assert "not computed by the scheduler yet: weight share" in html
    assert "tephra.io/fair-share" in html  # the explanation names the source
    assert ">scheduler" in html


def test_the_page_shows_the_usage_decayed_weight() -> None:
    """With proportion's usageHalfLife the scheduler publishes the weight it used."""
    state = _state()
    decayed = fair_share_value(
        deserved={GPU: 8000},
        allocated={GPU: 8000},
        request={GPU: 32000},
        session=SESSION,
        usage=(0.25, 1.0),
    )
    state.sink("Queue", "MODIFIED", _queue("team-a", 1, decayed))
    rows = {q["name"]: q for q in queues(state)["queues"]}
    assert (rows["team-a"]["effective_weight"], rows["team-a"]["usage_share"]) == (0.25, 1.0)
    assert rows["team-b"]["effective_weight"] is None
    html = queues_page(queues(state))
    assert "1 (effective 0.25, usage share 100%)" in html
