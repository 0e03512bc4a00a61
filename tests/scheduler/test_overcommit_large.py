"""overcommit on big clusters: cluster totals x factor must not overflow int64."""

from __future__ import annotations

from .util import BASIC, cluster, gang, run


def test_enqueue_on_a_cluster_with_petabytes_of_memory() -> None:
    # 1,200 nodes x 8 TiB: total x 1.2e6 overflows int64 (and wraps negative).
    c = cluster(1200, cpu="64", memory="8Ti")
    job = gang(
        c,
        "mem",
        2,
        phase="Pending",
        min_resources={"cpu": "2", "memory": "64Gi"},
        cpu="1",
        memory="32Gi",
    )
    d = run(c, BASIC)
    assert d.podgroup_status[("default", "mem")]["phase"] != "Pending", d.pending_reasons
    assert {b.job_id for b in d.binds} == {job}
