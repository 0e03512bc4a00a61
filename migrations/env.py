"""Alembic environment for the Tephra ledger.

Used two ways: programmatically by ``batch.ledger.migrate`` (which passes an open connection in
``config.attributes["connection"]``), and by developers running
``alembic -c migrations/alembic.ini revision --autogenerate -m "..."`` (URL from ``TEPHRA_DB_URL``
or the default SQLite file). SQLite gets batch mode so future ALTERs work there too.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from batch.ledger.db import make_engine
from batch.ledger.models import Base

config = context.config
target_metadata = Base.metadata


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        render_as_batch=connection.dialect.name == "sqlite",
    )


def run_migrations_offline() -> None:
    url = config.get_main_option("sqlalchemy.url")
    context.configure(url=url, target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = make_engine(config.get_main_option("sqlalchemy.url"))
    try:
        with engine.connect() as conn:
            _configure(conn)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
