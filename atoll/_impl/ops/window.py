"""The event-time window operator: ``tumbling_window``, ``sliding_window``, ``session_window``, ``window``.

The stage feeds the window engine (``window_engine``) with each element and its timestamp, with the
watermarks of the signal lane, with processing-time ticks (``early_every``) and with the end of the
stream, and emits what the engine produces: ``Window`` results on ``out`` (each stamped with the window's
``max_timestamp``), ``Late`` records on the optional ``late`` outlet. A watermark goes on after the
results it fired, so downstream sees every window of ``[.., W)`` before ``W``.

**Emits when** a window fires (a watermark passes its end, an early or late firing, or upstream
completes) and downstream pulls. **Backpressures when** results are pending and downstream
backpressures: upstream is pulled only once every result and late record is out. **Completes when**
upstream completes and every open window has fired. **Cancels when** downstream cancels (either outlet).
Signals go on ``out`` only; the ``late`` outlet carries late records and no signals.
User functions (key, aggregate) follow supervision: Resume/Restart drop the element (Restart also
forgets every open window). An element without a timestamp fails with ``MissingTimestampError``.
"""
from __future__ import annotations

from collections import deque
from typing import Any

from ...errors import MissingTimestampError, StreamError
from ...stage.graph_stage import GraphStage
from ...stage.handlers import InHandler, OutHandler
from ...stage.ports import Inlet, Outlet
from ...stage.shapes import FlowShape, UniformFanOutShape
from ...stage.attributes import Attributes
from ...stage.signals import Watermark
from ...stage.supervision import supervise
from ...stage.timers import TimerGraphStageLogic
from ...windowing import Late, WindowStats, validate_window_options
from .base import ChunkFlow, decider_of
from .window_engine import WindowEngine


class WindowStage(GraphStage):
    """One window operator; ``late_port`` adds a second outlet for ``Late`` records (``late_to``).
    Materializes its live ``WindowStats``."""

    event_time = True

    def __init__(self, name: str, spec, key, aggregate, *, allowed_lateness=0, accumulate=True, early_count=None,
                 early_every=None, on_late="drop", max_open_windows=None, late_port: bool = False):
        validate_window_options(name, spec, key, aggregate, allowed_lateness, early_count, early_every, on_late,
                                max_open_windows)
        self.in_ = Inlet(f"{name}.in")
        self.out = Outlet(f"{name}.out")
        if late_port:
            self.late = Outlet(f"{name}.late")
            self.shape = UniformFanOutShape(self.in_, [self.out, self.late])
        else:
            self.late = None
            self.shape = FlowShape(self.in_, self.out)
        self.initial_attributes = Attributes.name(name)
        self.window_name = name
        self.spec = spec
        self.key = key
        self.aggregate = aggregate
        self.options = dict(allowed_lateness=allowed_lateness, accumulate=accumulate, early_count=early_count,
                            early_every=early_every, on_late=on_late, max_open_windows=max_open_windows,
                            divert_late=late_port)

    def create_logic_and_materialized_value(self, attributes):
        stats = WindowStats()
        engine = WindowEngine(self.window_name, self.spec, self.key, self.aggregate, stats=stats, **self.options)
        return _WindowLogic(self, engine, decider_of(attributes)), stats


class _WindowLogic(ChunkFlow, TimerGraphStageLogic, InHandler, OutHandler):
    pulls_ahead = True  # chunk regions: asks for whole chunks while windows are open

    def __init__(self, stage: WindowStage, engine, decider):
        super().__init__(stage.shape)
        self.in_, self.out, self.late = stage.in_, stage.out, stage.late
        self.name = stage.window_name
        self.engine = engine
        self.decider = decider
        self.early_every = stage.options["early_every"]
        # what goes out on ``out``, in order: signals, and batches of results ``[records, stamps, pos]`` (one
        # per engine step: the engine's two parallel lists, taken as they are; ``pos``: the first not yet out)
        self.queue = deque()
        self.late_queue = deque()  # batches of Late records for ``late``
        self.queued_signals = 0  # how many signals ``queue`` holds
        self.recs = []  # what the engine produced in the current step, and the timestamps
        self.stamps = []
        self.index = 0
        self.forwarded = None  # the last watermark sent on
        self.upstream_done = False
        self.set_handler(self.in_, self)
        self.set_handler(self.out, self)
        if self.late is not None:
            self.set_handler(self.late, OutHandler(on_pull=self._drain, on_downstream_finish=self.on_downstream_finish))

    def pre_start(self) -> None:
        if self.early_every is not None:
            self.schedule_at_fixed_rate("early", self.early_every, self.early_every)
        self._drain()  # pulls upstream

    # ------------------------------------------------------------------ elements
    def on_push(self) -> None:
        elem = self.grab(self.in_)
        ts = self._ts
        index = self.index
        self.index = index + 1
        if ts is None:
            self.fail_stage(MissingTimestampError(
                f"{self.name}: element #{index} ({elem!r}) has no timestamp: put with_timestamps(...) or "
                "with_watermarks(...) upstream"))
            return
        recs = self.recs
        try:
            self.engine.element(elem, ts, recs, self.stamps)
        except StreamError as e:  # too many windows, a late element under on_late="fail": not user code
            self._discard()
            self.fail_stage(e)
            return
        except Exception as e:  # noqa: BLE001 - the key or aggregate function
            self._discard()
            if not supervise(self, self.decider, e):
                return
        if recs:
            self._take()
        self._drain()

    # ------------------------------------------------------------------ the chunk form (ChunkFlow's plumbing)
    def chunk_timestamps(self) -> bool:
        return True

    def on_pull_chunk(self) -> None:
        self._drain()

    def on_push_chunk(self) -> None:
        """Every element of the chunk into the engine, in order; then the results go out as chunks."""
        chunk = self.grab(self.in_)
        stamps = self._ts
        index = self.index
        self.index = index + len(chunk)
        recs, out_stamps = self.recs, self.stamps
        element = self.engine.element
        for i, x in enumerate(chunk):
            t = stamps[i] if stamps is not None else None
            if t is None:
                self._take()
                self.fail_stage(MissingTimestampError(
                    f"{self.name}: element #{index + i} ({x!r}) has no timestamp: put with_timestamps(...) or "
                    "with_watermarks(...) upstream"))
                return
            try:
                element(x, t, recs, out_stamps)
            except StreamError as e:
                self._discard()
                self.fail_stage(e)
                return
            except Exception as e:  # noqa: BLE001 - the key or aggregate function
                if not supervise(self, self.decider, e):
                    self._discard()
                    return
                del out_stamps[len(recs):]  # a step that raised may have left a record without its timestamp
                del recs[len(out_stamps):]
        if recs:
            self._take()
        self._drain()

    def _push_results(self, q: deque, out, conn) -> None:
        """Chunk form: push the results of the batches at the head of ``q`` (up to the first signal) as one chunk of
        what ``out`` accepts; a whole batch that fits goes as it is (its lists are not copied)."""
        n = conn.demand
        head = q[0]
        recs, stamps, pos = head
        size = len(recs) - pos
        if size >= n or len(q) == 1 or type(q[1]) is not list:
            if pos == 0 and size <= n:                 # the common case: one batch, all accepted
                q.popleft()
                self.push(out, recs, stamps)
                return
            take = min(size, n)
            if take == size:
                q.popleft()
            else:
                head[2] = pos + take
            self.push(out, recs[pos:pos + take], stamps[pos:pos + take])
            return
        out_recs, out_stamps = [], []            # several batches before the next signal
        while q and type(q[0]) is list and len(out_recs) < n:
            head = q[0]
            recs, stamps, pos = head
            take = min(len(recs) - pos, n - len(out_recs))
            out_recs.extend(recs[pos:pos + take])
            out_stamps.extend(stamps[pos:pos + take])
            if pos + take == len(recs):
                q.popleft()
            else:
                head[2] = pos + take
        self.push(out, out_recs, out_stamps)

    def _push_one(self, q: deque, out) -> None:
        """Element form: push the next result of the batch at the head of ``q``."""
        head = q[0]
        recs, stamps, pos = head
        if pos + 1 == len(recs):
            q.popleft()
        else:
            head[2] = pos + 1
        self.push(out, recs[pos], stamps[pos])

    def _take(self) -> None:
        """Queue what the engine produced (a batch for ``out``; Late records as a batch for ``late``) and give the
        engine fresh lists."""
        recs, stamps = self.recs, self.stamps
        self.recs, self.stamps = [], []
        if self.late is not None:   # with no late outlet there are no Late records (they are dropped or fail)
            lates = [i for i, r in enumerate(recs) if type(r) is Late]
            if lates:
                self.late_queue.append([[recs[i] for i in lates], [stamps[i] for i in lates], 0])
                if len(lates) == len(recs):
                    return
                keep = [type(r) is not Late for r in recs]
                recs = [r for r, k in zip(recs, keep) if k]
                stamps = [t for t, k in zip(stamps, keep) if k]
        self.queue.append([recs, stamps, 0])

    def _discard(self) -> None:
        """Drop what a failed engine step produced."""
        self.recs.clear()
        self.stamps.clear()

    def on_pull(self) -> None:
        self._drain()

    def _drain(self) -> None:
        """Push what downstream accepts, emit the signals that reach the head, then pull upstream once
        nothing is pending (or complete after the end of the stream)."""
        q, out = self.queue, self.out
        out_conn = self._out_conns[0]
        while q:
            head = q[0]
            if type(head) is list:
                if not self.is_available(out):
                    break
                if out_conn.chunked:
                    self._push_results(q, out, out_conn)
                else:
                    self._push_one(q, out)
            else:
                q.popleft()
                self.queued_signals -= 1
                self.emit_signal(out, head)
        lq = self.late_queue
        if lq:
            late = self.late
            late_conn = self._out_conns[1]
            if self.is_closed(late):
                lq.clear()
            else:
                while lq and self.is_available(late):
                    if late_conn.chunked:
                        self._push_results(lq, late, late_conn)
                    else:
                        self._push_one(lq, late)
        if not q and not lq:
            if self.upstream_done:
                if not self.is_closed(out):
                    self.complete_stage()
            elif not self.has_been_pulled(self.in_) and not self.is_closed(self.in_):
                if self.chunked:
                    self.pull_chunk(self.in_, self.chunk_size)
                else:
                    self.pull(self.in_)

    # ------------------------------------------------------------------ time
    def on_signal(self, signal) -> None:
        if type(signal) is Watermark:
            w = signal.timestamp
            if not self._run_engine(self.engine.advance, w):
                return
            if self.forwarded is not None and w <= self.forwarded:
                self._drain()
                return
            self.forwarded = w
        self.queue.append(signal)
        self.queued_signals += 1
        self._drain()

    def _run_engine(self, step, *args) -> bool:
        """Run an engine step that fires windows (its results go to the queue); a raising aggregate
        function (result/merge at firing time) fails the stage: False."""
        try:
            step(*args, self.recs, self.stamps)
        except Exception as e:  # noqa: BLE001
            self._discard()
            self.fail_stage(e)
            return False
        if self.recs:
            self._take()
        return True

    def on_timer(self, key) -> None:
        if self._run_engine(self.engine.early):
            self._drain()

    def on_upstream_finish(self) -> None:
        if not self._run_engine(self.engine.end):
            return
        self.upstream_done = True
        if self.early_every is not None:
            self.cancel_timer("early")
        self._drain()

    def on_downstream_finish(self, cause: BaseException) -> None:
        self.cancel_stage(cause)

    # ------------------------------------------------------------------ state
    def reset_state(self) -> None:
        self.engine.reset_state()

    # checkpoint state: the engine (windows, watermark), the last watermark sent on, the results and
    # signals waiting for demand on either outlet, the element counter and the late counters (open_windows
    # and the watermark are restored with the engine). Whether upstream ended is re-derived: the restored
    # upstream ends again, and an engine that fired everything fires nothing more.
    _COUNTERS = ("late_dropped", "late_diverted", "partially_late")

    def save_to_snapshot(self):
        stats = self.engine.stats
        return {"engine": self.engine.snapshot_state(), "forwarded": self.forwarded, "queue": _pairs(self.queue),
                "late_queue": _pairs(self.late_queue), "index": self.index,
                "stats": {k: getattr(stats, k) for k in self._COUNTERS}}

    def restore_from_snapshot(self, state) -> None:
        self.engine.restore_state(state["engine"])
        self.forwarded = state["forwarded"]
        self.queue = _batches(state["queue"])
        self.queued_signals = sum(1 for item in self.queue if type(item) is not list)
        self.late_queue = _batches(state["late_queue"])
        self.index = state["index"]
        for k, v in state["stats"].items():
            setattr(self.engine.stats, k, v)


def _pairs(q: deque) -> list:
    """A queue as checkpoint data: ``(record, ts)`` pairs and signals, in order (the batches are an in-memory
    form only)."""
    items: list = []
    for item in q:
        if type(item) is list:
            recs, stamps, pos = item
            items.extend(zip(recs[pos:], stamps[pos:]))
        else:
            items.append(item)
    return items


def _batches(items: list) -> deque:
    """The queue from ``_pairs`` data: consecutive pairs become one batch."""
    q: deque = deque()
    for item in items:
        if type(item) is tuple:
            if q and type(q[-1]) is list:
                q[-1][0].append(item[0])
                q[-1][1].append(item[1])
            else:
                q.append([[item[0]], [item[1]], 0])
        else:
            q.append(item)
    return q
