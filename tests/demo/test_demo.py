"""`tephra demo` end to end: every claim of the story holds, and nothing is left running."""

from __future__ import annotations

import io
import re
import threading
from pathlib import Path

from batch.sandbox.demo import run_demo


def test_demo_story_holds(tmp_path: Path) -> None:
    before = {t.name for t in threading.enumerate()}
    out = io.StringIO()
    # the acts' time limits are for people watching; CI's loaded cores may need more
    code = run_demo(out=out, workdir=tmp_path, patience=4.0)
    text = out.getvalue()
    assert code == 0, text
    assert "FAIL" not in text, text
    for claim in (
        "none of a-train's 16 pods is bound while it cannot run",
        "the gang sits inside one rack",
        "preempted a pod of low-priority b-long",
        "the 3:1 weights",
        "PodGroup 'torch' created automatically with minMember 4",
    ):
        assert claim in text, text
    # the ledger report at the end shows the preemption (columns are padded to the widest)
    assert re.search(r"^preempt +team-b +team-b ", text, re.MULTILINE), text
    leftover = {t.name for t in threading.enumerate() if t.is_alive() and not t.daemon} - before
    assert not leftover, leftover
