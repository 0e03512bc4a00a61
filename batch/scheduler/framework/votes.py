"""Vote values of Volcano's voting extension points (Permit 1, Abstain 0, Reject -1)."""

from __future__ import annotations

PERMIT = 1
ABSTAIN = 0
REJECT = -1
