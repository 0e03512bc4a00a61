"""bus Command admission: the action must be one Volcano knows and fit the target's kind."""

from __future__ import annotations

from batch.api.bus import Command
from batch.api.constants import COMMAND_ACTIONS, JOB_COMMAND_ACTIONS, QUEUE_COMMAND_ACTIONS

from .common import Errors

__all__ = ["validate_command"]


def validate_command(cmd: Command, errors: Errors) -> None:
    action = cmd.action
    if not action:
        errors.add("action", "required", "a command needs an action")
    elif action not in COMMAND_ACTIONS:
        errors.add(
            "action", "action", f"unknown action {action!r} ({', '.join(sorted(COMMAND_ACTIONS))})"
        )
    target = cmd.target
    if target is None:
        errors.add("target", "required", "a command needs a target (Job or Queue)")
        return
    if not target.name:
        errors.add("target.name", "required", "the target needs a name")
    if target.kind == "Job":
        allowed = JOB_COMMAND_ACTIONS
    elif target.kind == "Queue":
        allowed = QUEUE_COMMAND_ACTIONS
    else:
        errors.add("target.kind", "targetKind", f"target kind {target.kind!r} is not Job or Queue")
        return
    if action in COMMAND_ACTIONS and action not in allowed:
        errors.add("action", "action", f"action {action!r} does not apply to a {target.kind}")
