"""A gang is judged by what its pods really ask for (issue 34, finding 6).

training-operator computes a PodGroup's minResources from its pods' requests; a PyTorchJob
whose GPUs are written as limits only gets a group without GPUs, while the API server defaults
the pods' requests from their limits. Such a gang must be judged by the GPUs its pods need:
refused as "can never fit" when its queue can never hold them, instead of admitted to wait for
ever with a quota message.
"""

from __future__ import annotations

from batch.model import fixtures as f
from batch.model.cache import ClusterCache
from batch.scheduler import Decisions, load_config, run_session
from batch.scheduler.config import TEPHRA_DEFAULT_CONFIG

from .util import NOW


def _cluster(capability: dict[str, str] | None = None) -> ClusterCache:
    c = ClusterCache()
    c.apply("Queue", "ADDED", f.queue("root"))
    c.apply("Queue", "ADDED", f.queue("kf", capability=capability))
    for i in range(4):
        c.apply("Node", "ADDED", f.node(f"n{i}", cpu="64", memory="256Gi", gpu=8))
    return c


def _limits_only_gang(c: ClusterCache, pods: int = 2, gpu: int = 8) -> None:
    """The operator's group (minResources without GPUs) and pods whose GPU requests the API
    server defaulted from their limits."""
    c.apply(
        "PodGroup",
        "ADDED",
        f.podgroup("pt", queue="kf", min_member=pods, min_resources={"cpu": str(pods)}),
    )
    for i in range(pods):
        c.apply("Pod", "ADDED", f.pod(f"pt-{i}", group="pt", cpu="1", gpu=gpu))


def _run(c: ClusterCache) -> Decisions:
    return run_session(c, load_config(TEPHRA_DEFAULT_CONFIG), now=NOW)


def test_gang_over_its_queue_capability_by_pod_gpus_can_never_fit() -> None:
    c = _cluster(capability={"nvidia.com/gpu": "8"})
    _limits_only_gang(c)
    d = _run(c)
    status = d.podgroup_status[("default", "pt")]
    assert status["phase"] == "Pending"
    assert d.binds == []
    messages = " ".join(str(x.get("message")) for x in status.get("conditions", []))
    assert "can never fit" in messages
    assert "nvidia.com/gpu" in messages


def test_minimum_is_the_least_any_min_member_pods_need() -> None:
    c = _cluster()
    _limits_only_gang(c, pods=3, gpu=2)
    job = c.jobs["default/pt"]
    assert job.min_resources is not None and job.spec_min_resources is not None
    gpu = c.resources.index("nvidia.com/gpu")
    assert job.spec_min_resources[gpu] == 0
    assert job.min_resources[gpu] == 3 * 2000  # milli-GPUs
    # a named resource is kept as the PodGroup says, and the gang still runs when it fits
    assert (
        job.min_resources[c.resources.index("cpu")]
        == job.spec_min_resources[c.resources.index("cpu")]
    )
    assert len(_run(c).binds) == 3
    c.apply("Pod", "DELETED", f.pod("pt-2", group="pt", cpu="1", gpu=2))
    assert job.min_resources[gpu] == 2 * 2000  # fewer pods than minMember: what is there
