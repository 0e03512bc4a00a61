"""Trace-driven simulator on a virtual clock, and what-if replay from the ledger."""
