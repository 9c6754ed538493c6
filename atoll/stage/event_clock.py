"""EventClock: one stage's event time - the watermark it heard, its event timers and its watermark hold.

A ``GraphStageLogic`` creates one the first time it hears a watermark, schedules an event timer or
holds the watermark back (``GraphStageLogic.on_watermark`` and friends); stages that never do keep
``None``. Timers are Flink's ``InternalTimerService`` for event time: ``schedule(key, ts)`` arms the
timer ``key`` (replacing an earlier one with the same key); it is due once a watermark ``>= ts``
arrives (``W`` says no element with a timestamp ``< W`` follows). Due timers fire in timestamp order,
equal timestamps in the order they were scheduled.
"""
from __future__ import annotations

import heapq
import itertools
import math
from typing import Any, Dict, List, Optional, Tuple

NEG_INF = -math.inf


class EventClock:
    __slots__ = ("watermark", "forwarded", "hold", "heap", "armed", "_seq")

    def __init__(self):
        self.watermark: Any = NEG_INF  # the last watermark the stage heard
        self.forwarded: Any = NEG_INF  # the last watermark the stage sent on
        self.hold: Optional[Any] = None  # hold_watermark's bound, if any
        self.heap: List[Tuple[Any, int, Any]] = []  # (ts, seq, key); entries no longer armed are skipped
        self.armed: Dict[Any, Tuple[Any, int]] = {}  # key -> (ts, seq) of its live timer
        self._seq = itertools.count()

    def schedule(self, key: Any, ts: Any) -> None:
        seq = next(self._seq)
        self.armed[key] = (ts, seq)
        heapq.heappush(self.heap, (ts, seq, key))

    def cancel(self, key: Any) -> None:
        self.armed.pop(key, None)

    def pop_due(self, watermark: Any) -> Optional[Tuple[Any, Any]]:
        """The next ``(key, ts)`` whose timer is due at ``watermark`` (disarmed), or None."""
        heap, armed = self.heap, self.armed
        while heap and heap[0][0] <= watermark:
            ts, seq, key = heapq.heappop(heap)
            live = armed.get(key)
            if live is not None and live[1] == seq:
                del armed[key]
                return key, ts
        return None

    def outgoing(self) -> Any:
        """The watermark the stage may send on now: the one it heard, bounded by the hold."""
        hold = self.hold
        w = self.watermark
        return w if hold is None or w <= hold else hold
