"""The pod annotations that drive the sandbox's emulated containers, read by the emulator and
validated at admission (one home, so admission need not import the emulator)."""

from __future__ import annotations

__all__ = ["EXIT_CODE", "RUN_SECONDS"]

#: how long an emulated container runs before it exits (seconds; absent: until deleted)
RUN_SECONDS = "sandbox.tephra.io/run-seconds"
#: the exit code it then exits with (default 0)
EXIT_CODE = "sandbox.tephra.io/exit-code"
