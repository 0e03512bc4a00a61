"""Plugin and action base classes and the name -> class tables a session builds them from.

Volcano builds plugins per session from a name -> builder map; Tephra does the same with classes.
The tables are filled from outside the framework: ``batch.scheduler.builtins`` registers the
built-in actions and plugins (it is imported with ``batch.scheduler``), tests and extensions call
``register_plugin``/``register_action`` the same way. The framework never imports an action or a
plugin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from batch.scheduler.framework.arguments import Arg, Arguments
from batch.scheduler.framework.instances import constructed

if TYPE_CHECKING:
    from batch.model.cache import ClusterCache
    from batch.scheduler.framework.conf import PluginOption, SchedulerConfig
    from batch.scheduler.framework.hooks import Hooks
    from batch.scheduler.framework.session import Session


class Plugin:
    """Base class of a scheduler plugin: registers callbacks on session open."""

    name: ClassVar[str] = ""
    #: the ``arguments:`` keys this plugin accepts (``load_config`` refuses any other key and a
    #: value of the wrong kind); None: not declared, nothing is checked (extensions)
    ARGUMENTS: ClassVar[tuple[Arg, ...] | None] = None
    #: decisions may change with time alone (deadlines, minimum runtimes): set True, and
    #: override ``next_change`` to say precisely when, so ``Scheduler`` can keep its memo and
    #: the simulator can sleep until then
    time_dependent: ClassVar[bool] = False

    @classmethod
    def next_change(cls, cache: ClusterCache, arguments: Arguments, since: float) -> float | None:
        """The earliest time after ``since`` at which this plugin could decide differently on
        the same cache: None for never, ``since`` (or earlier) for at any time (a quantity
        that grows continuously, such as attained service or aging). The default is
        conservative: a time-dependent plugin may change at any time."""
        return since if cls.time_dependent else None

    #: the callbacks ``register_kept`` registers read the session only through ``self.ssn``
    #: (set by every session before ``on_session_open``): the hooks a ``Scheduler`` keeps hold
    #: them across sessions, registered once instead of at every open
    keeps_callbacks: ClassVar[bool] = False
    #: the session open now (or last), set before ``on_session_open`` by plugins that use it
    ssn: Session

    def __init__(self, arguments: Arguments) -> None:
        """Parse (and validate) ``arguments``; must raise ConfigError on bad values."""
        self.arguments = arguments
        #: the configuration entry this plugin was built from (set by the session)
        self.option: PluginOption | None = None

    def register_kept(self, hooks: Hooks) -> None:
        """With ``keeps_callbacks``: register the callbacks kept across sessions (once per
        ``hooks``; they depend on the arguments alone and read the session from ``self.ssn``;
        never event handlers)."""

    def on_session_open(self, ssn: Session) -> None:
        """Register extension-point callbacks on ``ssn`` (with ``keeps_callbacks``: those that
        depend on the session's state) and set up the session's state."""

    def on_session_close(self, ssn: Session) -> None:
        """Write per-session results (conditions, metrics) into ``ssn``."""


class Action:
    """Base class of a scheduler action (``Execute(ssn)`` in Volcano)."""

    name: ClassVar[str] = ""
    #: the ``configurations[].arguments`` keys this action accepts (as ``Plugin.ARGUMENTS``)
    ARGUMENTS: ClassVar[tuple[Arg, ...] | None] = None

    def __init__(self, arguments: Arguments) -> None:
        self.arguments = arguments

    def execute(self, ssn: Session) -> None:
        raise NotImplementedError


def changes_by(change: float | None, since: float, now: float) -> bool:
    """Does a ``next_change`` answer given at ``since`` fall in ``(since, now]``?"""
    if change is None:
        return False
    return now > since if change <= since else change <= now


PLUGINS: dict[str, type[Plugin]] = {}
ACTIONS: dict[str, type[Action]] = {}


def register_plugin(cls: type[Plugin]) -> type[Plugin]:
    PLUGINS[cls.name] = cls
    return cls


def register_action(cls: type[Action]) -> type[Action]:
    ACTIONS[cls.name] = cls
    return cls


def build_plugins(config: SchedulerConfig) -> list[list[Plugin]]:
    """The configured plugins built from the table, one list per tier (what ``Session`` opens)."""
    return [
        [
            constructed(PLUGINS[opt.name](Arguments(f"plugin {opt.name}", opt.arguments)))
            for opt in tier.plugins
        ]
        for tier in config.tiers
    ]


def build_actions(config: SchedulerConfig) -> list[tuple[str, Action]]:
    """The configured actions built from the table, in the configuration's order."""
    return [
        (name, constructed(ACTIONS[name](config.action_arguments(name)))) for name in config.actions
    ]


def ensure_builtins() -> None:
    """Kept for callers: the built-ins are registered whenever this module is importable.

    Importing any ``batch.scheduler`` module imports the package, whose ``cycle`` imports
    ``batch.scheduler.builtins``; there is nothing left to do here.
    """
