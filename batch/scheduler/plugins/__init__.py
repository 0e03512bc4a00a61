"""Scheduler plugins, one folder each (Volcano's pkg/scheduler/plugins)."""
