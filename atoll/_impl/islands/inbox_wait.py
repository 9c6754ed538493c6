"""A timed wait on a ``queue.SimpleQueue`` that cannot turn into a wait without end.

CPython's ``SimpleQueue.get(timeout=t)`` (3.11, 3.12) takes its internal lock once "for free" when the lock
is free while the queue is empty (the state after every ``get`` that found an element), then recomputes the
time left; if the thread was descheduled for longer than ``t`` in between, the time left is negative, and
a negative wait on that lock means "forever": the ``get`` then sleeps until the next ``put``. An island
whose timers were due (a throttle's element) and whose peers had nothing more to send stalled that way
(1 run in 3 of a recovery test on this 2-core machine). A ``get_nowait`` first takes that free lock (and
fails), so the timed ``get`` that follows blocks on the lock with its whole timeout and returns at a
``put`` or at the timeout, nothing else.
"""
from __future__ import annotations

from queue import Empty, SimpleQueue
from typing import Any, Optional


def get_within(q: SimpleQueue, timeout: Optional[float]) -> Any:
    """``q.get(timeout=timeout)`` (None: wait for an element), raising ``queue.Empty`` at the timeout."""
    if timeout is None:
        return q.get()
    try:
        return q.get_nowait()
    except Empty:
        pass
    if timeout <= 0:
        raise Empty
    return q.get(timeout=timeout)
