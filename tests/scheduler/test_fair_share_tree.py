"""The fair share down the queue tree (issue 29, Build 1): under Tephra's default the cluster is
water-filled among root's children by weight over each subtree's demand, then each inner
queue's share among its children (docs/scheduler.md#the-fair-share-model).

The tree of these tests, 4 nodes of 8 GPUs (32)::

    root ─┬─ teamA (weight 1) ─┬─ a1 (weight 1)
          │                    └─ a2 (weight 3)
          └─ teamB (weight 1)

Every leaf asks for more than the cluster unless a test says otherwise. Flat over the three
leaves (weights 1, 3, 1) that is 6.4, 19.2 and 6.4 GPUs; down the tree teamA and teamB get half
each and teamA's half is split 1:3 between a1 and a2.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.model.info import QueueInfo
from batch.scheduler import Decisions, load_config, run_session
from batch.scheduler.config import HELM_DEFAULT_CONFIG, TEPHRA_DEFAULT_CONFIG
from batch.scheduler.framework.queue_tree import resolved_parents

from .util import NOW

GPU = 1000  # milli-GPUs
TREE = {"teamA": ("root", 1), "a1": ("teamA", 1), "a2": ("teamA", 3), "teamB": ("root", 1)}


def _cluster(
    queues: Mapping[str, tuple[str, int]] = TREE,
    capability: Mapping[str, Mapping[str, str]] | None = None,
) -> ClusterCache:
    c = ClusterCache()
    c.apply("Queue", "ADDED", f.queue("root"))
    for name, (parent, weight) in queues.items():
        cap = (capability or {}).get(name)
        c.apply("Queue", "ADDED", f.queue(name, weight=weight, parent=parent, capability=cap))
    for i in range(4):
        c.apply("Node", "ADDED", f.node(f"n{i}", cpu="64", memory="256Gi", gpu=8))
    return c


def _asks(c: ClusterCache, queue: str, pods: int, gpu: int = 8) -> None:
    """An admitted gang of ``queue`` whose ``pods`` pods of ``gpu`` GPUs each wait: its queue
    asks for pods x gpu GPUs in Volcano's model and in the fair-share one alike."""
    mr = {"cpu": str(pods), "nvidia.com/gpu": str(pods * gpu)}
    name = f"{queue}-g{len(c.jobs)}"
    pg = f.podgroup(name, queue=queue, min_member=pods, min_resources=mr, phase="Inqueue")
    c.apply("PodGroup", "ADDED", pg)
    for i in range(pods):
        c.apply("Pod", "ADDED", f.pod(f"{name}-{i}", group=name, cpu="1", gpu=gpu))


def _deserved(c: ClusterCache, conf: str = TEPHRA_DEFAULT_CONFIG) -> dict[str, float]:
    d: Decisions = run_session(c, load_config(conf), now=NOW)
    out = {}
    for q, m in d.queue_metrics.items():
        out[q] = round(m.amounts(m.deserved).get("nvidia.com/gpu", 0) / GPU, 3)
    return out


def _every_leaf_asks(c: ClusterCache, queues: tuple[str, ...] = ("a1", "a2", "teamB")) -> None:
    for q in queues:
        _asks(c, q, 4)


def test_the_parent_s_weight_decides_the_subtree_s_share() -> None:
    c = _cluster()
    _every_leaf_asks(c)
    assert _deserved(c) == {"a1": 4.0, "a2": 12.0, "teamB": 16.0, "teamA": 16.0}


def test_volcano_mode_stays_flat() -> None:
    """Volcano's proportion has no hierarchy: the leaves share the cluster by their own weights."""
    c = _cluster()
    _every_leaf_asks(c)
    assert _deserved(c, HELM_DEFAULT_CONFIG) == {"a1": 6.4, "a2": 19.2, "teamB": 6.4}


def test_a_sibling_s_unused_share_stays_in_the_subtree() -> None:
    """a2 asks for 8 only: teamA still deserves 16 (its subtree asks 40), and what a2 leaves of
    its 12 goes to its sibling a1, not to teamB."""
    c = _cluster()
    _asks(c, "a1", 4)
    _asks(c, "a2", 1)
    _asks(c, "teamB", 4)
    assert _deserved(c) == {"a1": 8.0, "a2": 8.0, "teamB": 16.0, "teamA": 16.0}


def test_a_subtree_s_unused_share_goes_to_the_other_subtree() -> None:
    """teamB asks for 4: teamA's subtree gets the other 28, split 1:3."""
    c = _cluster()
    _asks(c, "a1", 4)
    _asks(c, "a2", 4)
    _asks(c, "teamB", 1, gpu=4)
    assert _deserved(c) == {"a1": 7.0, "a2": 21.0, "teamB": 4.0, "teamA": 28.0}


def test_an_inner_queue_s_capability_caps_its_subtree() -> None:
    """Each leaf asks for 32 GPUs in four 8-GPU gangs (one 32-GPU gang could never run under
    teamA's 8: ``test_a_gang_larger_than_an_ancestor_s_capability_can_never_fit``)."""
    c = _cluster(capability={"teamA": {"nvidia.com/gpu": "8"}})
    for q in ("a1", "a2", "teamB"):
        for _ in range(4):
            _asks(c, q, 1)
    assert _deserved(c) == {"a1": 2.0, "a2": 6.0, "teamB": 24.0, "teamA": 8.0}


def test_an_inner_queue_s_own_jobs_are_a_leaf_of_its_weight() -> None:
    """Jobs in teamA itself (made without VCJob admission, which refuses non-leaf queues) take
    part in teamA's share as one more child of teamA's own weight: 16 x 1/5, 1/5, 3/5."""
    c = _cluster()
    _every_leaf_asks(c)
    _asks(c, "teamA", 4)
    assert _deserved(c) == {"teamA": 3.2, "a1": 3.2, "a2": 9.6, "teamB": 16.0}


def test_an_inner_queue_without_jobs_publishes_its_subtree_s_share() -> None:
    """teamA holds no job of its own: it had no published deserved (no metric, no annotation;
    the dashboard fell back to a weight share). It now publishes what its subtree deserves,
    and what its subtree asks for."""
    c = _cluster()
    _every_leaf_asks(c)
    d = run_session(c, load_config(TEPHRA_DEFAULT_CONFIG), now=NOW)
    m = d.queue_metrics["teamA"]
    assert m.amounts(m.deserved)["nvidia.com/gpu"] == 16 * GPU
    assert m.amounts(m.request)["nvidia.com/gpu"] == 64 * GPU
    assert "root" not in d.queue_metrics


def test_a_queue_whose_parent_is_missing_hangs_under_root() -> None:
    c = _cluster({"a1": ("gone", 1), "teamB": ("root", 1)})
    _every_leaf_asks(c, ("a1", "teamB"))
    assert _deserved(c) == {"a1": 16.0, "teamB": 16.0}


@pytest.mark.parametrize("weights", [(1, 1), (1, 3)])
def test_a_flat_tree_gives_the_flat_shares(weights: tuple[int, int]) -> None:
    c = _cluster({"x": ("root", weights[0]), "y": ("root", weights[1])})
    _every_leaf_asks(c, ("x", "y"))
    share = 32 / sum(weights)
    assert _deserved(c) == {"x": share * weights[0], "y": share * weights[1]}


def test_parents_that_are_missing_or_cyclic_resolve_to_root() -> None:
    spec = {"root": "", "a": "b", "b": "c", "c": "b", "d": "gone", "e": "", "f": "d"}
    queues = {n: QueueInfo(name=n, uid=n, parent=p) for n, p in spec.items()}
    # b and c are each other's parent: both hang under root; a keeps b
    assert resolved_parents(queues) == {
        "a": "b",
        "b": "root",
        "c": "root",
        "d": "root",
        "e": "root",
        "f": "d",
    }


def test_a_queue_holds_no_more_than_its_ancestors_capability() -> None:
    """teamA may hold 8 GPUs: its child a1, alone on an idle cluster, is admitted one 8-GPU
    gang and not a second, which borrowing would otherwise allow (no other queue is owed the
    room)."""
    c = _cluster(capability={"teamA": {"nvidia.com/gpu": "8"}})
    for i in range(2):
        mr = {"cpu": "1", "nvidia.com/gpu": "8"}
        c.apply("PodGroup", "ADDED", f.podgroup(f"g{i}", queue="a1", min_resources=mr))
    d = run_session(c, load_config(TEPHRA_DEFAULT_CONFIG), now=NOW)
    phases = [d.podgroup_status[("default", f"g{i}")]["phase"] for i in range(2)]
    assert phases == ["Inqueue", "Pending"]
    assert d.pending_reasons["default/g1"].kind == "OverCapability"


def test_a_gang_larger_than_an_ancestor_s_capability_can_never_fit() -> None:
    """teamA may hold 8 GPUs; a1 (no capability of its own) asks for 16: it can never run
    under teamA, so it is "can never fit" (counted in no demand), not a gang waiting for room.
    Before, only a1's own capability was judged."""
    c = _cluster(capability={"teamA": {"nvidia.com/gpu": "8"}})
    mr = {"cpu": "2", "nvidia.com/gpu": "16"}
    c.apply("PodGroup", "ADDED", f.podgroup("wide", queue="a1", min_member=2, min_resources=mr))
    why = run_session(c, load_config(TEPHRA_DEFAULT_CONFIG), now=NOW).pending_reasons
    assert why["default/wide"].kind == "NeverFits", why["default/wide"]
    assert why["default/wide"].message == (
        "can never fit: the gang asks for 16 nvidia.com/gpu, queue 'teamA' may hold 8"
    )
    c.apply(
        "Queue", "MODIFIED", f.queue("teamA", parent="root", capability={"nvidia.com/gpu": "16"})
    )
    why = run_session(c, load_config(TEPHRA_DEFAULT_CONFIG), now=NOW).pending_reasons
    assert why["default/wide"].kind != "NeverFits"  # judged again when the parent changes
