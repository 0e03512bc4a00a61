"""Shared helpers for the ledger tests: table snapshots and a small fixture timeline."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import Engine, select

from batch.ledger.models import TABLES

UTC = dt.UTC
VOLATILE = {"id", "updated_at"}


def t(day: int, hour: int = 0, minute: int = 0, second: int = 0) -> dt.datetime:
    """A time in November 2026, UTC."""
    return dt.datetime(2026, 11, day, hour, minute, second, tzinfo=UTC)


def snapshot(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    """Every ledger table's rows (without surrogate ids and write stamps), sorted."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    with engine.connect() as conn:
        for table in TABLES:
            cols = [c for c in table.c if c.name not in VOLATILE]
            rows = [tuple(r) for r in conn.execute(select(*cols))]
            out[table.name] = sorted(rows, key=repr)
    return out


def count(engine: Engine, table_name: str) -> int:
    return len(snapshot(engine)[table_name])


def rows(engine: Engine, table_name: str) -> list[dict[str, Any]]:
    """One table's rows as dicts."""
    table = next(tb for tb in TABLES if tb.name == table_name)
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(select(table))]
