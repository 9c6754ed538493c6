"""TimerGraphStageLogic: a logic with named timers (Pekko's ``TimerGraphStageLogic``).

Timers fire on the island's thread through ``on_timer(key)``. Scheduling with a key that is already
in use replaces the old timer; a firing of a replaced or cancelled timer is ignored (matched by id),
and every timer is cancelled when the stage stops.

Time is the host's (``self.interpreter.host.now()``), never the wall clock read here: under the test
kit's ``ManualClock`` the same logic runs on virtual time, and the host (or the clock driving it)
decides when a timer fires.
"""
from __future__ import annotations

import itertools
from typing import Any, Dict, Optional

from ..errors import IllegalStateError
from .logic import GraphStageLogic

_timer_ids = itertools.count(1)


class _Timer:
    __slots__ = ("id", "key", "handle", "kind", "interval", "due")

    def __init__(self, id, key, kind, interval, due):
        self.id = id
        self.key = key
        self.kind = kind
        self.interval = interval
        self.due = due
        self.handle = None


class TimerGraphStageLogic(GraphStageLogic):
    """Override ``on_timer(key)``; schedule with ``schedule_once`` and friends from ``pre_start`` on."""

    def on_timer(self, key: Any) -> None:
        raise TypeError(f"{type(self).__name__} schedules timers but does not override on_timer")

    # ------------------------------------------------------------------ scheduling
    def schedule_once(self, key: Any, delay: float) -> None:
        """Fire ``on_timer(key)`` once after ``delay`` seconds."""
        self._schedule(key, "once", delay, 0.0)

    def schedule_with_fixed_delay(self, key: Any, initial_delay: float, delay: float) -> None:
        """Fire after ``initial_delay``, then ``delay`` seconds after each firing was handled."""
        if delay <= 0:
            raise ValueError(f"{self}: schedule_with_fixed_delay needs delay > 0, got {delay}")
        self._schedule(key, "delay", initial_delay, delay)

    def schedule_at_fixed_rate(self, key: Any, initial_delay: float, interval: float) -> None:
        """Fire after ``initial_delay``, then every ``interval`` seconds (measured from the schedule)."""
        if interval <= 0:
            raise ValueError(f"{self}: schedule_at_fixed_rate needs interval > 0, got {interval}")
        self._schedule(key, "rate", initial_delay, interval)

    def cancel_timer(self, key: Any) -> None:
        timers = self._timer_map()
        t = timers.pop(key, None)
        if t is not None and t.handle is not None:
            self._interpreter.host.cancel_scheduled(t.handle)

    def is_timer_active(self, key: Any) -> bool:
        return key in self._timer_map()

    # ------------------------------------------------------------------ internals
    def _timer_map(self) -> Dict[Any, _Timer]:
        m = getattr(self, "_timers", None)  # not self.__dict__: see GraphStageLogic's attribute note
        if m is None:
            m = self._timers = {}
        return m

    def _schedule(self, key: Any, kind: str, delay: float, interval: float) -> None:
        if self._interpreter is None:
            raise IllegalStateError(f"{self}: timers can be scheduled from pre_start on, not in the constructor")
        if delay < 0:
            raise ValueError(f"{self}: timer delay must be >= 0, got {delay}")
        self.cancel_timer(key)
        t = _Timer(next(_timer_ids), key, kind, interval, self._interpreter.host.now() + delay)
        self._timer_map()[key] = t
        self._arm(t, delay)

    def _arm(self, t: _Timer, delay: float) -> None:
        interp = self._interpreter
        t.handle = interp.host.schedule(delay, interp.run_async_input, self, self._fire, (t.key, t.id), None)

    def _fire(self, key_and_id) -> None:
        key, tid = key_and_id
        timers = self._timer_map()
        t: Optional[_Timer] = timers.get(key)
        if t is None or t.id != tid:
            return  # cancelled or replaced meanwhile
        if t.kind == "once":
            del timers[key]
        elif t.kind == "rate":
            t.due += t.interval
            self._arm(t, max(0.0, t.due - self._interpreter.host.now()))
        self.on_timer(key)
        if t.kind == "delay" and timers.get(key) is t:
            self._arm(t, t.interval)

    def _after_post_stop(self) -> None:
        timers = getattr(self, "_timers", None)
        if timers and self._interpreter is not None:
            for t in timers.values():
                if t.handle is not None:
                    self._interpreter.host.cancel_scheduled(t.handle)
            timers.clear()
        super()._after_post_stop()
