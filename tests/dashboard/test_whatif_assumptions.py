"""The dashboard's what-if says what its replay assumed and left out (no cluster needed)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from batch.dashboard.pages import whatif_page, whatif_run_page
from batch.dashboard.whatif import WhatIfRuns
from tests.ledger.helpers import ledger_job, ledger_pod, queue_configs, write_ledger
from tests.waiting import wait_for

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n0"},
    "status": {"allocatable": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "2", "pods": "110"}},
}


def test_a_replay_page_states_the_jobs_it_assumed_a_run_time_for(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    now = dt.datetime.now(dt.UTC)
    ran = ledger_job(
        "ran",
        "team-a",
        now - dt.timedelta(hours=2),
        workers=1,
        started=now - dt.timedelta(hours=2),
        finished=now - dt.timedelta(hours=2) + dt.timedelta(minutes=4),
        phase="Completed",
    )
    stuck = ledger_job("stuck", "team-b", now - dt.timedelta(hours=1), workers=1)
    write_ledger(
        url,
        [ran, ledger_pod(ran, "p0"), stuck, *queue_configs({"team-a": 1, "team-b": 1}, now)],
    )
    runs = WhatIfRuns(url, since="1d")
    run = runs.start(["queue=team-b,weight=3"], [NODE])
    wait_for(lambda: run.state != "running", what="the replay", timeout=120)
    answer = run.as_dict()
    assert answer["state"] == "done", answer["error"]
    line = (
        "1 never-started job replayed with run time = overall median (4m): "
        "its queue has no job that started"
    )
    assert answer["assumptions"] == [line]
    assert {r["queue"]: r["jobs"] for r in answer["rows"]}["team-b"] == 1  # replayed, not dropped
    page = whatif_run_page(answer)
    assert line in page[page.index("<pre id=result>") :]  # under the table, as the CLI prints
    assert "assumed run time" in whatif_page([answer], csrf="c")
