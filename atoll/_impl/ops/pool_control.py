"""PoolControl: the materialized value of ``map_pool``.

The stage updates the counters on its island thread; the reads are plain attribute reads, safe from
any thread. ``resize(n)`` goes through an async callback into the stage. On Ray the control stays in
the island actor and the driver gets a ``RemoteHandle`` of it (``actors/exports.py``): the same
methods, called remotely. When the stage stops, the control freezes (size 0, nothing in flight) and
``__atoll_detach__`` hands the driver that final copy; ``resize`` then raises ``StreamDetachedError``.
"""
from __future__ import annotations

import threading
from typing import Optional

from ...errors import StreamDetachedError


class PoolControl:
    """Live view and control of a ``map_pool`` stage's worker pool.

    ``size()``: workers the pool holds now (ready or starting); ``in_flight()``: elements sent to
    workers whose results have not come back; ``restarts()``: workers replaced (after an actor death,
    or a Restart decision); ``resize(n)``: from now on a fixed pool of ``n`` workers (``n = 0`` pauses
    the stage: elements wait until a later ``resize``)."""

    __slots__ = ("_size", "_in_flight", "_restarts", "_resize", "_stopped", "_island_thread")

    #: how long ``resize`` waits for the stage to take the new size (seconds)
    RESIZE_WAIT = 30.0

    def __init__(self):
        self._size = 0
        self._in_flight = 0
        self._restarts = 0
        self._resize = None  # AsyncCallback into the stage, set in pre_start
        self._stopped = False
        self._island_thread: Optional[int] = None

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else "running"
        return f"PoolControl(size={self._size}, in_flight={self._in_flight}, restarts={self._restarts}, {state})"

    def size(self) -> int:
        return self._size

    def in_flight(self) -> int:
        return self._in_flight

    def restarts(self) -> int:
        return self._restarts

    def resize(self, n: int) -> None:
        """Make the pool a fixed pool of ``n >= 0`` workers. Returns once the stage has taken the new
        size (workers are started or stopped then; new ones become ready later). Raises
        ``StreamDetachedError`` once the stage has stopped."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"map_pool: resize needs an int n >= 0, got {n!r}")
        cb = self._resize
        if self._stopped or cb is None:
            raise StreamDetachedError("map_pool: resize: the stage has stopped" if self._stopped
                                      else "map_pool: resize: the stage has not started")
        if threading.get_ident() == self._island_thread:
            cb.invoke(n)  # from the stream's own thread: taken after the current event
            return
        cb.invoke_with_feedback(n).result(self.RESIZE_WAIT)

    def __atoll_detach__(self) -> "PoolControl":
        c = PoolControl()
        c._restarts = self._restarts
        c._stopped = True
        return c
