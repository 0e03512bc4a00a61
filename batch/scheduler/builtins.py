"""Imports every built-in action and plugin so they register themselves."""

from __future__ import annotations

import batch.scheduler.actions.allocate
import batch.scheduler.actions.backfill
import batch.scheduler.actions.enqueue
import batch.scheduler.actions.preempt
import batch.scheduler.actions.reclaim
import batch.scheduler.plugins.binpack
import batch.scheduler.plugins.capacity
import batch.scheduler.plugins.conformance
import batch.scheduler.plugins.drf
import batch.scheduler.plugins.gang
import batch.scheduler.plugins.minruntime
import batch.scheduler.plugins.network_topology
import batch.scheduler.plugins.nodeorder
import batch.scheduler.plugins.overcommit
import batch.scheduler.plugins.predicates
import batch.scheduler.plugins.priority
import batch.scheduler.plugins.proportion
import batch.scheduler.plugins.reservation
import batch.scheduler.plugins.sla  # noqa: F401
