"""The job controller's replayed histories still hash to the recorded digests (see replay.py)."""

from __future__ import annotations

import json

import pytest

from .replay import CORPUS, GOLDEN, histories


def test_replayed_histories_are_unchanged() -> None:
    if not CORPUS.is_dir():
        pytest.skip("shared/corpus is not available")
    recorded = json.loads(GOLDEN.read_text())
    now = histories()
    changed = sorted(k for k in recorded.keys() | now.keys() if recorded.get(k) != now.get(k))
    assert not changed, f"{len(changed)} histories differ, e.g. {changed[:5]}"
    assert len(now) > 150  # the corpus and the fixtures were both replayed
