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
import numbers
from typing import Any, Callable, Optional

from ...errors import MissingTimestampError
from ...stage.signals import IDLE, Idle, Watermark
from ...stage.supervision import Supervision, decide, supervise
from ...stage.timers import TimerGraphStageLogic
from ...stage.handlers import InHandler, OutHandler
from .base import ChunkFlow, FlowStage, decider_of, require_callable

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
        raise raised_timestamp(op, elem, index, e) from e
    return checked_timestamp(op, ts, elem, index)


def raised_timestamp(op: str, elem: Any, index: int, cause: BaseException) -> MissingTimestampError:
    """The error for a timestamp function that raised ``cause`` on element #``index``."""
    err = MissingTimestampError(f"{op}: the timestamp function raised on element #{index} ({elem!r}): {cause!r}")
    err.__cause__ = cause
    return err


def checked_timestamp(op: str, ts: Any, elem: Any, index: int) -> Any:
    """``ts`` if it is a real number (int, float, numpy scalars; not a bool), else ``MissingTimestampError``."""
    t = type(ts)
    if t is int or t is float or (not isinstance(ts, bool) and isinstance(ts, numbers.Real)):
        return ts
    raise MissingTimestampError(
        f"{op}: element #{index} ({elem!r}) has no usable timestamp: the function returned {ts!r} "
        "(expected an int or float)"
    )


def supervise_quietly(decider, exc: BaseException, logic) -> bool:
    """The decision on ``exc`` for one element of a chunk: True to drop the element and go on (Resume,
    or Restart, which resets ``logic``); False for Stop (the caller fails the stage)."""
    d = decide(decider, exc)
    if d == Supervision.RESTART:
        logic.reset_state()
    return d != Supervision.STOP


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


class _WithTimestampsLogic(ChunkFlow, TimerGraphStageLogic, InHandler, OutHandler):
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

    # ------------------------------------------------------------------ the chunk form
    # Without partitions and idle timeout: a chunk goes out with its timestamps and one watermark after
    # it. That is the element form's output with watermarks coalesced, except where an element lies
    # behind the watermark the element form would have emitted before it: there the chunk is cut and
    # that watermark goes out first, so every element meets the same watermark as element-wise and
    # lateness downstream does not depend on chunk sizes (see DESIGN.md, event time).
    pending = None  # segments still to push: [(elements, timestamps, watermark or None), ...]
    finishing = False
    fail_after = None  # a Stop failure that waits for the segments before it

    def chunk_capable(self) -> bool:
        return self.partition is None and self.idle_timeout is None and type(self) is _WithTimestampsLogic

    def chunk_timestamps(self) -> bool:
        return True

    def on_pull_chunk(self) -> None:
        if self.pending:
            self._push_segment()
        else:
            self.pull_chunk(self.in_, self.demand_of(self.out))

    def on_push_chunk(self) -> None:
        chunk = self.grab(self.in_)
        ts_fn = self.ts_fn
        index = self.index
        self.index = index + len(chunk)
        elems, stamps = [], []
        failure = None
        for i, x in enumerate(chunk):
            try:
                t = ts_fn(x)
                if type(t) is not int and type(t) is not float:
                    t = checked_timestamp("with_timestamps", t, x, index + i)
            except Exception as e:  # noqa: BLE001
                if type(e) is not MissingTimestampError:
                    e = raised_timestamp("with_timestamps", x, index + i, e)
                if supervise_quietly(self.decider, e, self):
                    continue
                failure = e
                break
            elems.append(x)
            stamps.append(t)
        segments = self._segments(elems, stamps) if elems else []
        if failure is not None:
            if not segments:
                self.fail_stage(failure)
                return
            self.fail_after = failure  # the elements before the failure go out first, as element-wise
        elif not segments:
            self.pull_chunk(self.in_, self.demand_of(self.out))
            return
        self.pending = segments
        self._push_segment()

    def _segments(self, elems, stamps):
        """Cut ``elems`` where an element lies behind the watermark the element form would have emitted
        before it; each segment carries the watermark to emit after it (None: unchanged)."""
        bound, g = self.bound, self.granularity
        seen = self.last  # the watermark downstream has seen before the current segment
        wm = seen  # the element form's watermark so far
        high = self.highest.get(None, _NEG_INF)
        segments = []
        start = 0
        for i, t in enumerate(stamps):
            if t < wm and wm > seen:
                segments.append((elems[start:i], stamps[start:i], wm))
                seen = wm
                start = i
            if t > high:
                high = t
                w = high - bound
                if g is not None:
                    w = (w // g) * g
                if w > wm:
                    wm = w
        segments.append((elems[start:] if start else elems, stamps[start:] if start else stamps,
                         wm if wm > seen else None))
        self.highest[None] = high
        self.active.add(None)
        self.last = wm
        return segments

    def _push_segment(self) -> None:
        """Push the next segment, or as much of it as the pull accepts (a later pull may accept less than the
        chunk the segments were cut from, and restored segments meet a new demand); its watermark follows the
        segment's last element."""
        pending = self.pending
        seg_e, seg_t, w = pending[0]
        n = self.demand_of(self.out)
        if len(seg_e) > n:
            pending[0] = (seg_e[n:], seg_t[n:], w)
            self.push(self.out, seg_e[:n], seg_t[:n])
            return
        pending.pop(0)
        self.push(self.out, seg_e, seg_t)
        if w is not None:
            self.emit_signal(self.out, Watermark(w))
        if not self.pending:
            self.pending = None
            if self.fail_after is not None:
                self.fail_stage(self.fail_after)
            elif self.finishing:
                self.complete_stage()

    def on_upstream_finish(self) -> None:
        if self.pending:  # chunk form: segments of the last chunk still to push
            self.finishing = True
        else:
            self.complete_stage()

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

    # checkpoint state: the watermark sent, the highest timestamp per partition, which partitions are
    # active and whether the stream is idle, the element counter, and the chunk form's segments not pushed
    # yet (elements taken from upstream). Idleness is processing time: the active partitions' idle timer
    # starts again from the restore (``pre_start``).
    def save_to_snapshot(self):
        pending = [(list(e), list(t), w) for e, t, w in self.pending] if self.pending else None
        return {"last": self.last, "highest": dict(self.highest), "index": self.index,
                "active": list(self.active), "idle": self.idle, "pending": pending}

    def restore_from_snapshot(self, state) -> None:
        self.last = state["last"]
        self.highest = dict(state["highest"])
        self.active = set(state.get("active", self.highest))
        self.idle = state.get("idle", False)
        self.index = state["index"]
        if state.get("pending"):
            self.pending = [(list(e), list(t), w) for e, t, w in state["pending"]]

    def ready_for_snapshot(self) -> bool:
        return self.fail_after is None  # a failure waiting behind the segments cannot be saved

    def pre_start(self) -> None:
        if self.idle_timeout is not None and self.active:
            now = self.interpreter.host.now()
            for part in self.active:
                self.last_seen[part] = now
            self.schedule_once("idle", self.idle_timeout)


class WithWatermarks(FlowStage):
    """Stamps each element with ``ts_fn(elem)`` and emits ``watermark_fn(elem, ts)`` after it when that is
    not None and grows (punctuated watermarks: the stream says when time has advanced).

    **Emits when** an element arrives and downstream pulls. **Backpressures when** downstream
    backpressures. **Completes when** upstream completes. **Cancels when** downstream cancels.
    Failures of either function follow supervision (Resume/Restart drop the element)."""

    event_time = True

    #: the assigner's options a punctuated stream does not use
    bound, granularity, partition, idle_timeout = 0, None, None, None

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
        super().__init__(stage, decider)
        self.watermark_fn = stage.watermark_fn

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
