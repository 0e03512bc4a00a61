"""Go durations: one grammar for admission, controllers, plugins and the CLI."""

from __future__ import annotations

import pytest

from batch.api.durations import DurationError, duration_or_none, is_go_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("90s", 90.0),
        ("1h30m", 5400.0),
        ("1.5h", 5400.0),
        ("2.5m", 150.0),
        ("500ms", 0.5),
        ("1m30s", 90.0),
        (".5s", 0.5),
        ("1500us", 0.0015),
        ("3\u00b5s", 3e-6),
        (" 5m ", 300.0),
    ],
)
def test_go_grammar(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["", "soon", "5 m", "5", "1h-3m", "1d", "h", "-1s", "+1s", True])
def test_rejected_by_default(bad: object) -> None:
    with pytest.raises(DurationError):
        parse_duration(bad)
    assert duration_or_none(bad) is None


def test_options() -> None:
    assert parse_duration("2d", days=True) == 2 * 86400
    assert parse_duration("1d12h", days=True) == 1.5 * 86400
    assert parse_duration("120", bare_seconds=True) == 120.0
    assert parse_duration(7) == 7.0
    assert parse_duration("-1s", negative=True) == -1.0
    for bad in ("-1", "nan", "inf"):
        with pytest.raises(DurationError):
            parse_duration(bad, bare_seconds=True)
    with pytest.raises(DurationError, match="negative"):
        parse_duration(-3)
    assert duration_or_none(None) is None


def test_is_go_duration_is_exactly_go() -> None:
    for good in ("0", "-1.5h", "+30s", "1h30m", "300ms", "2\u03bcs"):
        assert is_go_duration(good), good
    for bad in ("", "1d", "30", " 30s", "1x", "s"):
        assert not is_go_duration(bad), bad


def test_format_duration_reads_back_to_two_units() -> None:
    from batch.api.durations import format_duration

    cases = {0: "0s", 45: "45s", 600: "10m", 5430: "1h30m", 90061: "1d1h", 86459: "1d"}
    assert {s: format_duration(s) for s in cases} == cases
    assert parse_duration(format_duration(5400), days=True) == 5400
