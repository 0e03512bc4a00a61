"""A wait measured while binds answer all the time (issue 33's swallowed cancellation)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from batch.kube.dispatch import InFlight

T = TypeVar("T")


async def wait_amid_answers(
    flight: InFlight, waiting: Coroutine[Any, Any, T]
) -> asyncio.Task[T] | None:
    """Run `waiting` while another request of `flight` answers at every turn of the event loop
    (its change event set each time), for at most 30 s: its task if it ended meanwhile, else
    None (decided before the answers stop: once they do, a stuck wait may end too)."""
    answering = True

    async def answers() -> None:
        while answering:
            flight._changed.set()
            await asyncio.sleep(0)

    churn = asyncio.create_task(answers())
    task = asyncio.create_task(waiting)
    done, _ = await asyncio.wait({task}, timeout=30)
    answering = False
    await churn
    return task if task in done else None
