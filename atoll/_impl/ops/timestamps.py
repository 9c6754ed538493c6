"""Timestamp assigners: ``with_timestamps`` (bounded out-of-orderness watermarks) and ``with_watermarks``
(punctuated watermarks). They put an event timestamp beside each element and generate the watermarks
that event-time stages (windows) close on.

Convention (see DESIGN.md, event time): a watermark ``W`` says no element with a timestamp ``< W``
follows. Bounded out-of-orderness ``B`` gives ``W = max timestamp seen - B`` after each element, emitted
right after the element that raised it and only when it grows. The assigner never drops elements:
lateness is decided by the event-time stages downstream. Incoming watermarks and idle markers are
swallowed (a second assigner replaces timestamps and watermarks, as in Flink); other signals pass.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional

from ...errors import MissingTimestampError
from ...stage.signals import IDLE, Idle, Watermark
from ...stage.supervision import supervise
from ...stage.timers import TimerGraphStageLogic
from ...stage.handlers import InHandler, OutHandler
from .base import FlowStage, decider_of, require_callable

_NEG_INF = -math.inf


def _require_number(op: str, arg: str, value: Any, minimum: float, allow_none: bool = False, positive=False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{op}: argument {arg!r} must be a number, got {value!r}")
    if value < minimum or (positive and value <= 0):
        raise ValueError(f"{op}: argument {arg!r} must be {'> 0' if positive else f'>= {minimum}'}, got {value}")


def timestamp_of(op: str, fn: Callable[[Any], Any], elem: Any, index: int) -> Any:
    """``fn(elem)`` checked to be an int or float; otherwise ``MissingTimestampError`` naming ``op``
    and the element's index (the original exception, if any, as its cause)."""
    try:
        ts = fn(elem)
    except Exception as e:  # noqa: BLE001 - any failure of the user's function means no timestamp
        raise MissingTimestampError(f"{op}: the timestamp function raised on element #{index} ({elem!r}): {e!r}") from e
    t = type(ts)
    if t is int or t is float or (not isinstance(ts, bool) and isinstance(ts, (int, float))):
        return ts
    raise MissingTimestampError(
        f"{op}: element #{index} ({elem!r}) has no usable timestamp: the function returned {ts!r} "
        "(expected an int or float)"
    )


class WithTimestamps(FlowStage):
    """Stamps each element with ``ts_fn(elem)`` and emits bounded out-of-orderness watermarks.

    ``max_out_of_orderness`` (B, in timestamp units): after each element the watermark is the highest
    timestamp seen minus B (per partition with ``partition=fn``, then the minimum over the active
    partitions). ``watermark_granularity`` (g): only ``floor(W / g) * g`` is emitted, when it grows.
    ``idle_timeout`` (seconds of processing time): a partition with no element for that long is idle and
    leaves the minimum; when every partition is idle the stream emits an ``Idle`` marker, and its next
    element makes it active again (re-emitting the current watermark first).

    **Emits when** an element arrives and downstream pulls (the element, then the watermark if it grew).
    **Backpressures when** downstream backpressures. **Completes when** upstream completes (the end of
    event time downstream). **Cancels when** downstream cancels.
    A failing or non-numeric timestamp raises ``MissingTimestampError``; supervision Resume/Restart drops
    the element."""

    event_time = True

    def __init__(self, ts_fn: Callable[[Any], Any], max_out_of_orderness=0, idle_timeout: Optional[float] = None,
                 watermark_granularity=None, partition: Optional[Callable[[Any], Any]] = None):
        op = "with_timestamps"
        require_callable(op, "ts_fn", ts_fn)
        _require_number(op, "max_out_of_orderness", max_out_of_orderness, 0)
        _require_number(op, "idle_timeout", idle_timeout, 0, allow_none=True, positive=True)
        _require_number(op, "watermark_granularity", watermark_granularity, 0, allow_none=True, positive=True)
        if partition is not None:
            require_callable(op, "partition", partition)
        super().__init__(op)
        self.ts_fn = ts_fn
        self.bound = max_out_of_orderness
        self.idle_timeout = idle_timeout
        self.granularity = watermark_granularity
        self.partition = partition

    def create_logic(self, attributes):
        return _WithTimestampsLogic(self, decider_of(attributes))


class _WithTimestampsLogic(TimerGraphStageLogic, InHandler, OutHandler):
    def __init__(self, stage: WithTimestamps, decider):
        super().__init__(stage.shape)
        self.in_, self.out = stage.in_, stage.out
        self.ts_fn = stage.ts_fn
        self.bound = stage.bound
        self.granularity = stage.granularity
        self.partition = stage.partition
        self.idle_timeout = stage.idle_timeout
        self.decider = decider
        self.index = 0  # elements seen, for error messages
        self.last = _NEG_INF  # the last watermark emitted
        self.highest = {}  # partition -> highest timestamp seen
        self.active = set()  # partitions not idle
        self.last_seen = {}  # partition -> processing time of its last element (idle_timeout only)
        self.idle = False  # the stream emitted Idle and no element since
        self.set_handler(self.in_, self)
        self.set_handler(self.out, self)

    # ------------------------------------------------------------------ elements
    def on_pull(self) -> None:
        self.pull(self.in_)

    def on_push(self) -> None:
        elem = self.grab(self.in_)
        index = self.index
        self.index = index + 1
        try:
            ts = timestamp_of("with_timestamps", self.ts_fn, elem, index)
            part = self.partition(elem) if self.partition is not None else None
        except Exception as e:  # noqa: BLE001
            if supervise(self, self.decider, e):
                self.pull(self.in_)
            return
        if self.idle:
            self.idle = False
            if self.last > _NEG_INF:
                self.emit_signal(self.out, Watermark(self.last))  # active again
        self.push(self.out, elem, ts)
        high = self.highest.get(part, _NEG_INF)
        if ts > high:
            self.highest[part] = ts
        if self.idle_timeout is not None:
            self._touch(part)
        elif part not in self.active:
            self.active.add(part)
        self._advance()

    def _advance(self) -> None:
        if not self.active:
            return
        highest = self.highest
        low = min(highest.get(p, _NEG_INF) for p in self.active) if len(self.active) > 1 else highest.get(
            next(iter(self.active)), _NEG_INF)
        w = low - self.bound
        g = self.granularity
        if g is not None and w > _NEG_INF:
            w = (w // g) * g
        if w > self.last:
            self.last = w
            self.emit_signal(self.out, Watermark(w))

    # ------------------------------------------------------------------ idleness (processing time)
    def _touch(self, part) -> None:
        now = self.interpreter.host.now()
        self.last_seen[part] = now
        self.active.add(part)
        if not self.is_timer_active("idle"):
            self.schedule_once("idle", self.idle_timeout)

    def on_timer(self, key) -> None:
        now = self.interpreter.host.now()
        timeout = self.idle_timeout
        went_idle = False
        next_due = None
        for part in list(self.active):
            due = self.last_seen[part] + timeout
            if due <= now:
                self.active.discard(part)
                went_idle = True
            elif next_due is None or due < next_due:
                next_due = due
        if next_due is not None:
            self.schedule_once("idle", next_due - now)
        if went_idle:
            if self.active:
                self._advance()  # the idle partitions no longer hold the watermark back
            elif not self.idle:
                self.idle = True
                self.emit_signal(self.out, IDLE)

    # ------------------------------------------------------------------ signals and state
    def on_signal(self, signal) -> None:
        if isinstance(signal, (Watermark, Idle)):
            return  # this assigner's watermarks replace the incoming ones
        self.forward_signal(signal)

    def reset_state(self) -> None:
        """Restart drops the failing element only: the watermark never goes back."""

    def snapshot_state(self):
        return {"last": self.last, "highest": dict(self.highest), "index": self.index}

    def restore_state(self, state) -> None:
        self.last = state["last"]
        self.highest = dict(state["highest"])
        self.active = set(self.highest)
        self.index = state["index"]


class WithWatermarks(FlowStage):
    """Stamps each element with ``ts_fn(elem)`` and emits ``watermark_fn(elem, ts)`` after it when that is
    not None and grows (punctuated watermarks: the stream says when time has advanced).

    **Emits when** an element arrives and downstream pulls. **Backpressures when** downstream
    backpressures. **Completes when** upstream completes. **Cancels when** downstream cancels.
    Failures of either function follow supervision (Resume/Restart drop the element)."""

    event_time = True

    def __init__(self, ts_fn: Callable[[Any], Any], watermark_fn: Callable[[Any, Any], Any]):
        require_callable("with_watermarks", "ts_fn", ts_fn)
        require_callable("with_watermarks", "watermark_fn", watermark_fn)
        super().__init__("with_watermarks")
        self.ts_fn = ts_fn
        self.watermark_fn = watermark_fn

    def create_logic(self, attributes):
        return _WithWatermarksLogic(self, decider_of(attributes))


class _WithWatermarksLogic(_WithTimestampsLogic):
    def __init__(self, stage: WithWatermarks, decider):
        TimerGraphStageLogic.__init__(self, stage.shape)
        self.in_, self.out = stage.in_, stage.out
        self.ts_fn = stage.ts_fn
        self.watermark_fn = stage.watermark_fn
        self.decider = decider
        self.index = 0
        self.last = _NEG_INF
        self.highest = {}
        self.active = set()
        self.idle = False
        self.set_handler(self.in_, self)
        self.set_handler(self.out, self)

    def on_push(self) -> None:
        elem = self.grab(self.in_)
        index = self.index
        self.index = index + 1
        try:
            ts = timestamp_of("with_watermarks", self.ts_fn, elem, index)
            w = self.watermark_fn(elem, ts)
            if w is not None and (isinstance(w, bool) or not isinstance(w, (int, float))):
                raise TypeError(f"with_watermarks: watermark_fn returned {w!r} for element #{index}; expected a number or None")
        except Exception as e:  # noqa: BLE001
            if supervise(self, self.decider, e):
                self.pull(self.in_)
            return
        self.push(self.out, elem, ts)
        if w is not None and w > self.last:
            self.last = w
            self.emit_signal(self.out, Watermark(w))
