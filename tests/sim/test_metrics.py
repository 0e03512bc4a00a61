"""Metric helpers: proportion water-filling (volcano-semantics.md#proportion worked examples),
Jain's index."""

from __future__ import annotations

import pytest

from batch.sim.cluster import QueueSpec
from batch.sim.errors import SimInputError
from batch.sim.metrics import jain_index, water_fill
from batch.sim.whatif import apply_changes, parse_change


def test_water_fill_worked_examples() -> None:
    assert water_fill(12, [2, 1], [100, 100]) == pytest.approx([8, 4])
    assert water_fill(12, [2, 1], [100, 2]) == pytest.approx([10, 2])
    assert water_fill(4, [1, 1, 1], [2, 2, 1]) == pytest.approx([1.5, 1.5, 1])
    assert water_fill(10, [1, 1], [0, 0]) == [0, 0]
    # demand below the total: everyone gets its demand
    assert water_fill(10, [5, 1], [1, 2]) == pytest.approx([1, 2])


def test_jain_index() -> None:
    assert jain_index([1, 1, 1]) == pytest.approx(1.0)
    assert jain_index([1, 0, 0, 0]) == pytest.approx(0.25)
    assert jain_index([]) is None


def test_parse_change() -> None:
    ch = parse_change("queue=q1,weight=3,capability.nvidia.com/gpu=16,reclaimable=false")
    assert ch.queue == "q1" and ch.weight == 3 and ch.reclaimable is False
    assert ch.capability == (("nvidia.com/gpu", "16"),)
    queues = apply_changes([QueueSpec("q1", 1), QueueSpec("q2", 2)], [ch])
    assert queues[0].weight == 3 and queues[0].capability == {"nvidia.com/gpu": "16"}
    assert queues[1] == QueueSpec("q2", 2)
    for bad, msg in [
        ("weight=3", "needs queue"),
        ("queue=q1,weight=0", "weight must be"),
        ("queue=q1,colour=red", "unknown key"),
        ("queue=q1,weight", "not key=value"),
    ]:
        with pytest.raises(SimInputError, match=msg):
            parse_change(bad)
    # a queue the workload lacks is added, after the others
    added = apply_changes([QueueSpec("q1")], [parse_change("queue=zz,weight=2")])
    assert added == [QueueSpec("q1"), QueueSpec("zz", 2)]
