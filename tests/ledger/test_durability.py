"""Issue 20.1: SIGKILL while the database is down loses at most the last fsync interval.

The events used to wait in memory (up to 50,000) and reach the spill file only on a clean close:
PostgreSQL down, then SIGKILL, and the ledger never learnt of 10 jobs and 40 pods. Now the spill
file is written as events arrive once the database is known to be unreachable. A SIGKILL keeps
what the process wrote (the OS has it); the fsync interval bounds what a machine crash loses.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from batch.ledger.db import make_engine
from tests.waiting import wait_for

from .test_recorder import CLOSED_PORT_URL, _Proxy, proxy  # noqa: F401 (a fixture)

_CHILD = """
import sys, time
from batch.ledger import events as ev
from batch.ledger.recorder import Recorder

spill, fsync, url = sys.argv[1], float(sys.argv[2]), sys.argv[3]
rec = Recorder(url, spill_path=spill, retry_interval=0.2, fsync_interval=fsync)
i = 0
while True:
    rec.record_one(ev.JobObserved(uid=f"j-{i}", namespace="ns", name=f"j{i}"))
    print(i, flush=True)
    i += 1
    time.sleep(0.002)
"""


def _kill_during_outage(
    tmp_path: Path,
    fsync_interval: float,
    seconds: float,
    *,
    url: str = CLOSED_PORT_URL,
    cut: Callable[[], None] | None = None,
) -> tuple[int, set[str]]:
    """Record in a child process, cut the database `seconds` in (if `cut`), SIGKILL it as
    much later; the events it acknowledged and the uids its spill files hold."""
    spill = tmp_path / f"spill-{fsync_interval}.jsonl"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(spill), str(fsync_interval), url],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    acked = int(proc.stdout.readline())  # started (imports take a while)
    for step in [cut, None] if cut is not None else [None]:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            acked = int(line)
        if step is not None:
            step()
    proc.send_signal(signal.SIGKILL)
    rest = proc.stdout.read()  # acknowledged before the kill landed
    proc.wait(10)
    acked = max([acked, *(int(x) for x in rest.split())])
    files = [spill, spill.with_name(spill.name + ".replaying")]
    kept = {
        json.loads(line)["uid"]
        for f in files
        if f.exists()
        for line in f.read_text().splitlines()
        if line.strip()
    }
    return acked + 1, kept


def _lost(recorded: int, kept: set[str]) -> list[int]:
    return [i for i in range(recorded) if f"j-{i}" not in kept]


def test_sigkill_during_an_outage_loses_nothing_the_process_wrote(tmp_path: Path) -> None:
    for fsync_interval in (1.0, 0.0):
        recorded, kept = _kill_during_outage(tmp_path, fsync_interval, seconds=1.5)
        lost = _lost(recorded, kept)
        print(f"fsync_interval={fsync_interval}s: {recorded} recorded, {len(lost)} lost")
        assert recorded > 100
        assert not lost, (fsync_interval, recorded, lost[:10])


@pytest.mark.postgres
def test_sigkill_after_postgresql_went_away(
    proxy: _Proxy,  # noqa: F811
    pg_session_url: str,
    tmp_path: Path,
) -> None:
    """The database answers, then the network to it is cut, then the recorder is SIGKILLed: what
    it acknowledged is in the database or in its spill file, the outage's first moments included
    (they wait in memory only until the failed write notices the outage)."""
    from .conftest import _truncate

    _truncate(pg_session_url)
    via_proxy = make_url(pg_session_url).set(port=proxy.port).render_as_string(False)

    def cut_once_written() -> None:
        # the cut must come after the database took some (a loaded machine may need more than
        # the 1.5 s the child records before the cut)
        wait_for(lambda: _stored(pg_session_url), what="a first write", timeout=60)
        proxy.stop()

    recorded, kept = _kill_during_outage(
        tmp_path, 1.0, seconds=1.5, url=via_proxy, cut=cut_once_written
    )
    stored = _stored(pg_session_url)
    lost = _lost(recorded, kept | stored)
    print(
        f"PostgreSQL cut: {recorded} recorded, {len(stored)} in the database, "
        f"{len(kept)} spilled, {len(lost)} lost"
    )
    assert stored and kept
    assert not lost, lost[:10]


def _stored(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return {str(u) for (u,) in conn.execute(text("SELECT uid FROM jobs"))}
    finally:
        engine.dispose()
