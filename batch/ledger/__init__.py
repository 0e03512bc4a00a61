"""The job ledger: SQLAlchemy models, the idempotent recorder, reports and retention."""
