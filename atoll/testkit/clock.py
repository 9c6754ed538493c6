"""ManualClock: virtual time for tests of timers (Pekko's ``ManualTime``/explicitly triggered scheduler).

``Materializer.local(clock=ManualClock())`` gives every island host of the materializer this clock:
``host.now()`` returns virtual seconds, and the hosts hand their timers to the clock instead of
firing them by wall time. ``clock.advance(seconds)`` then moves time forward in due order: it sets
time to the earliest due timer of *any* host on the clock, has that timer run on its host's thread,
waits until every host on the clock is quiescent (inbox empty, no interpreter event queued: the
firing's effects were handled, including those that crossed to other islands), and goes on with the
next due timer - timers scheduled meanwhile inside the window included - until none is due; then
time is the target and ``advance`` returns. The probes' ``expect_no_message(d)`` advance such a clock
by ``d`` instead of sleeping.

Quiescence is tracked exactly, with no polling: a host counts as busy from ``start`` on; every
``post`` to it (from any thread) marks it busy under the clock's lock before the message is queued;
the host marks itself idle, under the same lock, only when its inbox is empty right before it
blocks on it. A message's effects are posted while the host handling it is still busy, so "no host
busy" means nothing is left to do. Work done by threads that are not hosts of this clock (thread
pools completing futures, background sources) is not seen.

Timers due exactly at the current time fire on the next ``advance`` (``advance(0)`` fires them).
"""
from __future__ import annotations

import heapq
import math
import threading
from typing import Any, Callable, List, Optional, Tuple

from ..stage.clock import DrivenClock

#: due times within this many seconds past the target count as due (float rounding of sums of delays)
_EPSILON = 1e-9


class ManualClock(DrivenClock):
    """Virtual time that moves only when ``advance`` is called.

    ``start``: the initial time (seconds). ``settle_timeout``: how long (real seconds) ``advance``
    waits for the hosts to become quiescent before it raises ``TimeoutError`` (a graph that is
    never idle, e.g. an endless source with unbounded demand, cannot be advanced)."""

    def __init__(self, start: float = 0.0, settle_timeout: float = 10.0):
        self._now = float(start)
        self.settle_timeout = settle_timeout
        self._cond = threading.Condition(threading.Lock())
        self._hosts: set = set()  # started and not ended
        self._busy: set = set()  # of those, the ones with work
        self._timers: List[Tuple[float, int, Any, Any]] = []  # (due, seq, handle, host)
        self._advancing = False

    def __repr__(self) -> str:
        return f"ManualClock(now={self._now!r})"

    # ------------------------------------------------------------------ the clock
    def now(self) -> float:
        return self._now

    # ------------------------------------------------------------------ test API
    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, firing every timer that falls due, in due order, each
        after the effects of the previous one were handled; returns once the effects of the last one
        were handled too. Call from the test's thread, never from a stage."""
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"ManualClock.advance: seconds must be a finite number >= 0, got {seconds!r}")
        with self._cond:
            self._check_caller()
            if self._advancing:
                raise RuntimeError("ManualClock.advance is already running in another thread")
            self._advancing = True
            try:
                end = self._now + seconds
                self._settle()
                while True:
                    entry = self._pop_due(end)
                    if entry is None:
                        break
                    due, _, handle, host = entry
                    if due > self._now:
                        self._now = due
                    self._busy.add(host)
                    host.inbox.put((host.fire_scheduled, (handle,)))
                    self._settle()
                if end > self._now:
                    self._now = end
            finally:
                self._advancing = False

    def settle(self, timeout: Optional[float] = None) -> None:
        """Wait (without moving time) until every host on this clock is quiescent."""
        with self._cond:
            self._check_caller()
            self._settle(timeout)

    @property
    def pending_timers(self) -> int:
        """How many timers are scheduled and neither cancelled nor fired."""
        with self._cond:
            return sum(1 for _, _, h, host in self._timers if not h.cancelled and host in self._hosts)

    @property
    def next_due(self) -> Optional[float]:
        """When the next timer is due (None: no timer)."""
        with self._cond:
            due = [d for d, _, h, host in self._timers if not h.cancelled and host in self._hosts]
            return min(due) if due else None

    @property
    def hosts(self) -> List[Any]:
        """The running hosts on this clock."""
        with self._cond:
            return list(self._hosts)

    # ------------------------------------------------------------------ internals (lock held)
    def _check_caller(self) -> None:
        me = threading.current_thread()
        for h in self._hosts:
            if getattr(h, "thread", None) is me:
                raise RuntimeError("ManualClock: advance/settle from an island's own thread would wait for itself")

    def _settle(self, timeout: Optional[float] = None) -> None:
        limit = self.settle_timeout if timeout is None else timeout
        if not self._cond.wait_for(lambda: not self._busy, timeout=limit):
            names = sorted(getattr(h, "name", repr(h)) for h in self._busy)
            raise TimeoutError(f"ManualClock: islands still busy after {limit}s of real time: {names}")

    def _pop_due(self, end: float) -> Optional[Tuple[float, int, Any, Any]]:
        timers = self._timers
        while timers:
            due, _, handle, host = timers[0]
            if handle.cancelled or host not in self._hosts:
                heapq.heappop(timers)
                continue
            if due > end + _EPSILON:
                return None
            return heapq.heappop(timers)
        return None

    # ------------------------------------------------------------------ host hooks (DrivenClock)
    def host_started(self, host: Any) -> None:
        with self._cond:
            self._hosts.add(host)
            self._busy.add(host)

    def host_post(self, host: Any, fn: Callable, args: Tuple) -> None:
        with self._cond:
            if host in self._hosts:
                self._busy.add(host)
            host.inbox.put((fn, args))

    def host_idle(self, host: Any) -> bool:
        with self._cond:
            if not host.inbox.empty():
                return False
            self._busy.discard(host)
            if not self._busy:
                self._cond.notify_all()
            return True

    def host_schedule(self, host: Any, handle: Any) -> None:
        with self._cond:
            heapq.heappush(self._timers, (handle.due, handle.seq, handle, host))

    def host_ended(self, host: Any) -> None:
        with self._cond:
            self._hosts.discard(host)
            self._busy.discard(host)
            if not self._busy:
                self._cond.notify_all()
