"""benchmarks/apiserver_split.py: the difference of two apiserver `/metrics` snapshots, per pod,
by request (verb, resource, subresource) and by watched resource."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from tests.scripts import load_script

REPO = Path(__file__).resolve().parents[1]


def _split() -> ModuleType:
    return load_script(REPO / "benchmarks" / "apiserver_split.py", "apiserver_split")


BEFORE = """\
# HELP apiserver_request_total Counter of apiserver requests
apiserver_request_total{code="201",resource="pods",subresource="binding",verb="POST"} 10
apiserver_request_total{code="200",resource="pods",subresource="status",verb="PATCH"} 5
apiserver_request_duration_seconds_sum{resource="pods",subresource="binding",verb="POST"} 1.0
apiserver_request_body_size_bytes_sum{resource="pods",verb="create"} 1000
apiserver_watch_events_total{group="",resource="pods",version="v1"} 40
apiserver_watch_events_sizes_sum{group="",resource="pods",version="v1"} 40000
"""

AFTER = """\
apiserver_request_total{code="201",resource="pods",subresource="binding",verb="POST"} 110
apiserver_request_total{code="409",resource="pods",subresource="binding",verb="POST"} 2
apiserver_request_total{code="200",resource="pods",subresource="status",verb="PATCH"} 55
apiserver_request_duration_seconds_sum{resource="pods",subresource="binding",verb="POST"} 3.0
apiserver_request_body_size_bytes_sum{resource="pods",verb="create"} 12000
apiserver_watch_events_total{group="",resource="pods",version="v1"} 440
apiserver_watch_events_sizes_sum{group="",resource="pods",version="v1"} 840000
"""


def test_the_difference_is_summed_over_codes_and_named_by_request(tmp_path: Path) -> None:
    split = _split()
    (tmp_path / "0").write_text(BEFORE)
    (tmp_path / "1").write_text(AFTER)
    d = split.diff(tmp_path / "0", tmp_path / "1")
    assert d["apiserver_request_total"] == {"POST pods binding": 102, "PATCH pods status": 50}
    assert d["apiserver_request_duration_seconds_sum"]["POST pods binding"] == 2.0
    assert d["apiserver_watch_events_total"] == {"pods": 400}
    lines = split.report(d, 100)
    binding = next(line for line in lines if "POST pods binding" in line)
    # 1.02 bindings a pod, 20 ms in flight a pod, 110 bytes of body a pod
    assert binding.split()[3:] == ["1.020", "20.00", "ms", "0", "B", "110", "B"]
    watched = next(line for line in lines if line.strip().startswith("pods"))
    assert watched.split() == ["pods", "4.000", "8000", "B"]
