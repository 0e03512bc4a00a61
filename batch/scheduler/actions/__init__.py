"""Scheduler actions, one folder each (Volcano's pkg/scheduler/actions)."""
