"""``BINARY_RESULTS``: a statement's rows come back as the same Python values either way."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from sqlalchemy import Engine, event, text

from batch.ledger.db import BINARY_RESULTS

_ROW = (
    "SELECT CAST(1.25 AS double precision), CAST(7 AS bigint), CAST(2.5 AS numeric), "
    "'é', CAST(NULL AS text), DATE '2026-12-07', TIMESTAMPTZ '2026-12-07 01:02:03+00'"
)


def test_binary_rows_hold_the_same_values(engine: Engine) -> None:
    stmt = text(_ROW if engine.dialect.name == "postgresql" else "SELECT 1.25, 7, 'é'")
    formats: list[int] = []

    def seen(_conn: Any, cursor: Any, *_args: Any) -> None:
        formats.append(int(getattr(cursor, "format", 0)))

    event.listen(engine, "after_cursor_execute", seen)
    with engine.connect() as conn:
        plain = conn.execute(stmt).one()
        binary = conn.execute(stmt.execution_options(**{BINARY_RESULTS: True})).one()
    event.remove(engine, "after_cursor_execute", seen)
    assert tuple(binary) == tuple(plain)
    if engine.dialect.name == "postgresql":
        assert formats[-2:] == [0, 1]  # text, then binary
        stamp = dt.datetime(2026, 12, 7, 1, 2, 3, tzinfo=dt.UTC)
        assert tuple(binary) == (1.25, 7, Decimal("2.5"), "é", None, dt.date(2026, 12, 7), stamp)
