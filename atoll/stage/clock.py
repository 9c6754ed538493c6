"""Clocks: where an island host reads time (``host.now()``) and who decides when timers fire.

Every *semantic* time read of the runtime (a timer's due time, fixed-rate catch-up in
``TimerGraphStageLogic``) goes through the clock of the host that runs the stage, so that a test can
replace time as a whole. Two kinds exist:

* ``RealClock`` (the default of every host, local or Ray): ``now()`` is ``time.monotonic()``, and the
  host itself fires its timers, sleeping on its inbox until the next one is due.
* a *driven* clock (``DrivenClock``; the test kit's ``atoll.testkit.ManualClock``): virtual time. The
  hosts registered with it hand it their timers and report when they are busy or idle; the clock
  fires the timers only when told to (``ManualClock.advance``), so timer tests are exact and never
  wait for wall time.

Time reads that only bound CPU work (adaptive turn slicing in the host, the fused loops' turn budget)
or measure throughput stay on ``time.perf_counter``/``time.monotonic``: they are not stream semantics,
and virtual time must not change how a turn is sliced.
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import Any, Callable, Tuple


class Clock(ABC):
    """Where a host reads time. Subclasses override ``now``; see ``DrivenClock`` for virtual time."""

    #: True when the clock, not the host, decides when the host's timers fire (virtual time)
    drives_timers: bool = False

    @abstractmethod
    def now(self) -> float:
        """The current time in seconds (monotonic; only differences are meaningful)."""


class RealClock(Clock):
    """Wall time: ``time.monotonic()``; the host fires its own timers when they fall due."""

    __slots__ = ()

    def now(self) -> float:
        return time.monotonic()

    def __repr__(self) -> str:
        return "RealClock()"


#: the clock of every host that is not given one
REAL_CLOCK = RealClock()


class DrivenClock(Clock):
    """A clock that owns the timers of its hosts and fires them itself (virtual time).

    A host given a driven clock calls these hooks instead of keeping timers of its own:

    * ``host_started(host)`` on the thread that starts the host, before its loop runs; the host counts
      as busy from then on,
    * ``host_post(host, fn, args)`` for every ``post`` (from any thread): put ``(fn, args)`` in
      ``host.inbox`` and count the host busy,
    * ``host_idle(host)`` on the host's thread before it blocks on its inbox: return False when the
      inbox is not empty (the host goes on), else count the host idle and return True,
    * ``host_schedule(host, handle)`` for every timer (``handle`` has ``due``, ``seq``,
      ``cancelled``); to fire it, the clock posts ``host.fire_scheduled(handle)`` to the host,
    * ``host_ended(host)`` once the host's loop has ended (it is forgotten, with its timers).
    """

    drives_timers = True

    @abstractmethod
    def host_started(self, host: Any) -> None:
        """See the class docstring (``host_started``)."""

    @abstractmethod
    def host_post(self, host: Any, fn: Callable, args: Tuple) -> None:
        """See the class docstring (``host_post``)."""

    @abstractmethod
    def host_idle(self, host: Any) -> bool:
        """See the class docstring (``host_idle``)."""

    @abstractmethod
    def host_schedule(self, host: Any, handle: Any) -> None:
        """See the class docstring (``host_schedule``)."""

    @abstractmethod
    def host_ended(self, host: Any) -> None:
        """See the class docstring (``host_ended``)."""
