"""The built-in actions and plugins, registered by name: the scheduler's composition root.

A new action or plugin is one folder under ``actions/`` or ``plugins/`` and one line here. The
framework only keeps the name -> class tables (``framework/registry.py``); it never imports an
action or a plugin, so the framework sits below both and nothing imports back up. Importing
``batch.scheduler`` imports this module (through ``cycle``), so the tables are full whenever any
part of the scheduler is in use.
"""

from __future__ import annotations

from batch.scheduler.actions.allocate import Allocate
from batch.scheduler.actions.backfill import Backfill
from batch.scheduler.actions.enqueue import Enqueue
from batch.scheduler.actions.gangpreempt import GangPreempt
from batch.scheduler.actions.gangreclaim import GangReclaim
from batch.scheduler.actions.preempt import Preempt
from batch.scheduler.actions.reclaim import Reclaim
from batch.scheduler.framework.registry import Action, Plugin, register_action, register_plugin
from batch.scheduler.plugins.binpack import BinpackPlugin
from batch.scheduler.plugins.capacity import CapacityPlugin
from batch.scheduler.plugins.conformance import ConformancePlugin
from batch.scheduler.plugins.drf import DrfPlugin
from batch.scheduler.plugins.gang import GangPlugin
from batch.scheduler.plugins.minruntime import MinRuntimePlugin
from batch.scheduler.plugins.network_topology import NetworkTopologyPlugin
from batch.scheduler.plugins.nodeorder import NodeOrderPlugin
from batch.scheduler.plugins.overcommit import OvercommitPlugin
from batch.scheduler.plugins.predicates import PredicatesPlugin
from batch.scheduler.plugins.priority import PriorityPlugin
from batch.scheduler.plugins.proportion import ProportionPlugin
from batch.scheduler.plugins.requeue import RequeuePlugin
from batch.scheduler.plugins.reservation import NominatedPlugin, ReservationPlugin
from batch.scheduler.plugins.sjf import SjfPlugin
from batch.scheduler.plugins.sla import SlaPlugin
from batch.scheduler.plugins.tiresias import TiresiasPlugin

BUILTIN_ACTIONS: tuple[type[Action], ...] = (
    Enqueue,
    Allocate,
    Backfill,
    Preempt,
    Reclaim,
    GangPreempt,
    GangReclaim,
)
BUILTIN_PLUGINS: tuple[type[Plugin], ...] = (
    BinpackPlugin,
    CapacityPlugin,
    ConformancePlugin,
    DrfPlugin,
    GangPlugin,
    MinRuntimePlugin,
    NetworkTopologyPlugin,
    NodeOrderPlugin,
    OvercommitPlugin,
    PredicatesPlugin,
    PriorityPlugin,
    ProportionPlugin,
    RequeuePlugin,
    ReservationPlugin,
    NominatedPlugin,
    SjfPlugin,
    SlaPlugin,
    TiresiasPlugin,
)

for _action in BUILTIN_ACTIONS:
    register_action(_action)
for _plugin in BUILTIN_PLUGINS:
    register_plugin(_plugin)
