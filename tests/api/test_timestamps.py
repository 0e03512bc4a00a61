"""One reading of Kubernetes timestamps for every layer."""

from __future__ import annotations

import datetime as dt

from batch.api.timestamps import epoch_seconds, format_time, parse_time

T = dt.datetime(2026, 12, 1, 10, 0, tzinfo=dt.UTC)


def test_parse_time_forms() -> None:
    assert parse_time("2026-12-01T10:00:00Z") == T
    assert parse_time("2026-12-01T11:00:00+01:00") == T
    assert parse_time("2026-12-01T10:00:00") == T  # no offset: UTC
    assert parse_time(T.replace(tzinfo=None)) == T
    assert parse_time("2026-12-01T10:00:00Z").tzinfo is dt.UTC  # type: ignore[union-attr]
    for missing in (None, "", "yesterday", 0):
        assert parse_time(missing) is None


def test_epoch_and_format() -> None:
    assert epoch_seconds("2026-12-01T10:00:00Z") == T.timestamp()
    assert epoch_seconds("garbage") == 0.0 == epoch_seconds(None)
    assert format_time(T.replace(microsecond=5)) == "2026-12-01T10:00:00Z"
