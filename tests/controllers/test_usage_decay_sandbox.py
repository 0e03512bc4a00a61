"""Usage-decayed fair share on the sandbox (issue 29, build item 7): with proportion's
``usageHalfLife`` the scheduler service reads each queue's decayed usage from the ledger, so a
queue whose recent history is heavy gets fewer GPUs than an equal-weight queue while both want
more than the cluster; without the argument the same history changes nothing. Real components
over HTTP; budgets in scheduler sessions, never wall-clock time."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("batch.sandbox.testing")
pytest.importorskip("batch.kube.service")

from kubernetes import client

from batch.ledger import events as ev
from batch.ledger.migrate import upgrade
from batch.ledger.recorder import Recorder
from batch.sandbox.components import default_components
from batch.sandbox.nodes import make_nodes
from batch.sandbox.options import SandboxOptions
from batch.sandbox.testing import run_sandbox
from batch.scheduler.config import TEPHRA_DEFAULT_CONFIG
from tests.waiting import wait_for

from .test_fair_share_sandbox import SESSIONS, Live

pytestmark = pytest.mark.xdist_group("controllers-scheduler")

#: of 8 GPUs each: 40 GPUs, so that shares of 1/5 and 4/5 are whole 4-GPU pods
NODES = 5
CONF = TEPHRA_DEFAULT_CONFIG.replace("MinRuntime: 5m", "MinRuntime: 0s")
DECAYED = CONF.replace("fairShare: true", "fairShare: true\n      usageHalfLife: 1d")


def _history(url: str, tmp_path: Path) -> None:
    """Queue heavy ran the whole cluster (40 GPUs) for most of the last day; light nothing."""
    upgrade(url)
    now = dt.datetime.now(dt.UTC)
    pods = [
        ev.PodAttempt(
            pod_uid=f"past-{i}",
            namespace="default",
            name=f"past-{i}",
            queue="heavy",
            gpu_milli=8000,
            cpu_milli=1000,
            created_at=now - dt.timedelta(hours=20),
            started_at=now - dt.timedelta(hours=20),
            finished_at=now - dt.timedelta(minutes=10),
            outcome="Succeeded",
        )
        for i in range(NODES)
    ]
    with Recorder(url, spill_path=tmp_path / "history.jsonl", background=False) as rec:
        rec.record(pods)
        assert rec.flush()


def _live(tmp_path: Path, conf_text: str) -> Iterator[Live]:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    _history(url, tmp_path)
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(conf_text)
    options = SandboxOptions(
        schedule_period=0.2, max_grace_seconds=0.3, scheduler_conf=conf, db_url=url
    )
    nodes = make_nodes(count=NODES, gpus=8, cpu="64", memory="256Gi")
    with run_sandbox(
        nodes=nodes, options=options, components=default_components(options), ready_timeout=120
    ) as sb:
        api = sb.api_client()
        yield Live(sb, client.CustomObjectsApi(api), client.CoreV1Api(api), {})


@pytest.fixture
def decayed(tmp_path: Path) -> Iterator[Live]:
    yield from _live(tmp_path, DECAYED)


@pytest.fixture
def plain(tmp_path: Path) -> Iterator[Live]:
    yield from _live(tmp_path, CONF)


def _both_want_the_cluster(live: Live) -> None:
    """Two weight-1 queues, each submitting 8 jobs of one 4-GPU pod (32 of the 40 GPUs each).
    light's first, and running before heavy's come: heavy's jobs then meet a cluster where
    light's demand is known (usage steers free room; it never evicts a queue below its plain
    weights' share). Without that wait, on a loaded machine the job controller could still be
    creating light's last pods when heavy's were placeable, and heavy took that room (CI: heavy
    12, light 28). The same order without the argument gives 20 : 20, so the order alone does
    not make the difference."""
    live.queue("heavy", 1)
    live.queue("light", 1)
    for i in range(8):
        live.job(f"light-{i}", "light", 1, 4)
    wait_for(lambda: live.gpus_by_queue() == {"light": 32}, what="light's jobs run")
    for i in range(8):
        live.job(f"heavy-{i}", "heavy", 1, 4)


def _settled(live: Live, want: dict[str, int]) -> None:
    wait_for(
        lambda: live.gpus_by_queue() == want,
        what=f"GPUs by queue {want}",
        timeout=120,
        explain=live.state,
    )
    end = live.sessions + SESSIONS
    wait_for(lambda: live.sessions >= end, what=f"{SESSIONS} more sessions")
    assert live.gpus_by_queue() == want


def _usage_annotation(live: Live, queue: str) -> dict[str, float] | None:
    q = live.co.get_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", queue)
    value = (q["metadata"].get("annotations") or {}).get("tephra.io/fair-share")
    usage = json.loads(value).get("usage") if value else None
    return usage if isinstance(usage, dict) else None


def test_a_queue_with_heavy_recent_history_gets_fewer_gpus(decayed: Live) -> None:
    """heavy's usage share is 1 and its weight share 1/2: effective weights 1/4 : 1, deserved
    8 : 32 GPUs (plain weights: 20 : 20)."""
    service = decayed.sb.components[1].service
    wait_for(lambda: service.cache.queue_usage is not None, what="usage read from the ledger")
    _both_want_the_cluster(decayed)
    _settled(decayed, {"heavy": 8, "light": 32})
    wait_for(lambda: _usage_annotation(decayed, "heavy") is not None, what="usage annotation")
    assert _usage_annotation(decayed, "heavy") == {"effectiveWeight": 0.25, "share": 1.0}
    assert _usage_annotation(decayed, "light") == {"effectiveWeight": 1.0, "share": 0.0}


def test_without_the_argument_the_history_changes_nothing(plain: Live) -> None:
    _both_want_the_cluster(plain)
    _settled(plain, {"heavy": 20, "light": 20})
    assert plain.sb.components[1].service.cache.queue_usage is None
    assert _usage_annotation(plain, "heavy") is None
