"""Errors a simulator user can cause (bad trace path, bad cluster spec, bad option).

The CLI prints them as one line, never as a traceback.
"""

from __future__ import annotations

from batch.api.errors import UserError

__all__ = ["SimInputError"]


class SimInputError(UserError):
    """Bad input to the simulator; the message names the file/field and the rule."""
