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
    def __init__(self, stage: WindowStage, engine, decider):
        super().__init__(stage.shape)
        self.in_, self.out, self.late = stage.in_, stage.out, stage.late
        self.name = stage.window_name
        self.engine = engine
        self.decider = decider
        self.early_every = stage.options["early_every"]
        self.queue = deque()  # (record, ts) results and signals for ``out``, in order
        self.late_queue = deque()  # (Late, ts) for ``late``
        self.queued_signals = 0  # how many signals ``queue`` holds
        self.buf = []  # what the engine produced in the current call
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
        buf = self.buf
        try:
            self.engine.on_element(elem, ts, buf)
        except StreamError as e:  # too many windows, a late element under on_late="fail": not user code
            buf.clear()
            self.fail_stage(e)
            return
        except Exception as e:  # noqa: BLE001 - the key or aggregate function
            buf.clear()
            if not supervise(self, self.decider, e):
                return
        if buf:
            self._take(buf)
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
        buf = self.buf
        on_element = self.engine.on_element
        for i, x in enumerate(chunk):
            t = stamps[i] if stamps is not None else None
            if t is None:
                self._take(buf)
                self.fail_stage(MissingTimestampError(
                    f"{self.name}: element #{index + i} ({x!r}) has no timestamp: put with_timestamps(...) or "
                    "with_watermarks(...) upstream"))
                return
            try:
                on_element(x, t, buf)
            except StreamError as e:
                buf.clear()
                self.fail_stage(e)
                return
            except Exception as e:  # noqa: BLE001 - the key or aggregate function
                if not supervise(self, self.decider, e):
                    buf.clear()
                    return
        if buf:
            self._take(buf)
        self._drain()

    def _push_results(self, q: deque, out, conn, signals: int = 0) -> None:
        """Chunk form: push the results at the head of ``q`` (holding ``signals`` signals) as one chunk of what
        ``out`` accepts."""
        n = conn.demand
        if signals == 0 and len(q) <= n:            # only results, all accepted: the whole queue at once
            recs = [rec for rec, _ in q]
            stamps = [ts for _, ts in q]
            q.clear()
        elif signals == 1 and type(q[-1]) is not tuple and len(q) <= n + 1:   # the results a watermark fired
            signal = q.pop()
            recs = [rec for rec, _ in q]
            stamps = [ts for _, ts in q]
            q.clear()
            q.append(signal)
        else:
            recs, stamps = [], []
            popleft = q.popleft
            while q and len(recs) < n and type(q[0]) is tuple:
                rec, ts = popleft()
                recs.append(rec)
                stamps.append(ts)
        self.push(out, recs, stamps)

    def _take(self, buf: list) -> None:
        """Queue what the engine produced: results for ``out``, late records for ``late``."""
        q, lq = self.queue, self.late_queue
        if self.late is None:   # no late outlet: no Late records (they are dropped or fail)
            q.extend(buf)
            buf.clear()
            return
        for item in buf:
            if type(item[0]) is Late:
                lq.append(item)
            else:
                q.append(item)
        buf.clear()

    def on_pull(self) -> None:
        self._drain()

    def _drain(self) -> None:
        """Push what downstream accepts, emit the signals that reach the head, then pull upstream once
        nothing is pending (or complete after the end of the stream)."""
        q, out = self.queue, self.out
        out_conn = self._out_conns[0]
        while q:
            head = q[0]
            if type(head) is tuple:
                if not self.is_available(out):
                    break
                if out_conn.chunked:
                    self._push_results(q, out, out_conn, self.queued_signals)
                else:
                    q.popleft()
                    self.push(out, head[0], head[1])
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
                        rec, ts = lq.popleft()
                        self.push(late, rec, ts)
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
            if not self._run_engine(self.engine.on_watermark, w):
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
        buf = self.buf
        try:
            step(*args, buf)
        except Exception as e:  # noqa: BLE001
            buf.clear()
            self.fail_stage(e)
            return False
        self._take(buf)
        return True

    def on_timer(self, key) -> None:
        if self._run_engine(self.engine.fire_early):
            self._drain()

    def on_upstream_finish(self) -> None:
        if not self._run_engine(self.engine.on_end):
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
        return {"engine": self.engine.snapshot_state(), "forwarded": self.forwarded, "queue": list(self.queue),
                "late_queue": list(self.late_queue), "index": self.index,
                "stats": {k: getattr(stats, k) for k in self._COUNTERS}}

    def restore_from_snapshot(self, state) -> None:
        self.engine.restore_state(state["engine"])
        self.forwarded = state["forwarded"]
        self.queue = deque(state["queue"])
        self.queued_signals = sum(1 for item in self.queue if type(item) is not tuple)
        self.late_queue = deque(state["late_queue"])
        self.index = state["index"]
        for k, v in state["stats"].items():
            setattr(self.engine.stats, k, v)
