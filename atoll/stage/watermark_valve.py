"""The fan-in watermark valve: what watermark a stage with several inlets hears (Flink's
``StatusWatermarkValve`` with Jet's ``WatermarkCoalescer``).

Per inlet: its watermark (``-inf`` until one arrives), its status (active or idle), whether it is
*aligned*, and whether it is done (closed). The stage hears:

* the minimum watermark over the inlets that are active, aligned and not done, whenever it grows;
* when no live inlet is active but some are idle: the maximum watermark over the idle ones (if it
  grows), then ``Idle`` once - the output itself is idle;
* nothing when every inlet is done: the stage completes, which downstream reads as the end of time.

A watermark that does not advance its inlet is ignored (replays), except that it makes an idle inlet
active again. An inlet that comes back from idle is *unaligned* until its watermark reaches the last
one the stage heard, and holds nothing back meanwhile (Flink's realignment). A done inlet is left
out, never counted as ``+inf`` while another is idle (FLINK-38477). When the output was idle and an
inlet is active again, the stage hears the current watermark once more, which makes downstream
active again. The feedback inputs of a cycle (``atoll._impl.islands.feedback``) are left out
altogether: their watermarks only echo what this stage already let through.
"""
from __future__ import annotations

import math
from typing import List

from ._connection import IN_CLOSED
from .signals import IDLE, Watermark

_NEG_INF = -math.inf


class WatermarkValve:
    __slots__ = ("logic", "marks", "idle", "aligned", "last", "output_idle", "left_out")

    def __init__(self, logic, inlets: int, feedback=()):
        self.logic = logic
        self.left_out = [i in feedback for i in range(inlets)]  # a cycle's feedback inlets
        self.marks: List[float] = [_NEG_INF] * inlets
        self.idle: List[bool] = [False] * inlets
        self.aligned: List[bool] = [True] * inlets
        self.last = _NEG_INF  # the last watermark the stage heard
        self.output_idle = False

    def on_watermark(self, idx: int, timestamp) -> None:
        """Inlet ``idx`` delivered ``Watermark(timestamp)``."""
        if self.left_out[idx]:
            return
        was_idle = self.idle[idx]
        if was_idle:
            self.idle[idx] = False
            self.aligned[idx] = timestamp >= self.last
        elif not self.aligned[idx] and timestamp >= self.last:
            self.aligned[idx] = True
        if timestamp > self.marks[idx]:
            self.marks[idx] = timestamp
        self._update(reactivated=was_idle)

    def on_idle(self, idx: int) -> None:
        """Inlet ``idx`` went idle."""
        if self.left_out[idx]:
            return
        if not self.idle[idx]:
            self.idle[idx] = True
            self._update(reactivated=False)

    def on_inlet_closed(self) -> None:
        self._update(reactivated=False)

    def _update(self, reactivated: bool) -> None:
        conns = self.logic._in_conns
        low = None
        any_active = False
        idle_high = None
        left_out = self.left_out
        for i, conn in enumerate(conns):
            if conn.state & IN_CLOSED or left_out[i]:
                continue
            if self.idle[i]:
                m = self.marks[i]
                if idle_high is None or m > idle_high:
                    idle_high = m
                continue
            any_active = True
            if self.aligned[i]:
                m = self.marks[i]
                if low is None or m < low:
                    low = m
        logic = self.logic
        if any_active:
            if low is not None and low > self.last:
                self.last = low
                self.output_idle = False
                logic.on_signal(Watermark(low))
            elif self.output_idle and reactivated:
                self.output_idle = False
                if self.last > _NEG_INF:
                    logic.on_signal(Watermark(self.last))  # downstream: this stream is active again
        elif idle_high is not None:
            if idle_high > self.last:
                self.last = idle_high
                logic.on_signal(Watermark(idle_high))
            if not self.output_idle:
                self.output_idle = True
                logic.on_signal(IDLE)
