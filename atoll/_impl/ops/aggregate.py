"""Aggregating operators: scan, fold, reduce, grouped, sliding.

scan, fold, grouped and sliding have chunk forms (``atoll._impl.islands.chunking``) keeping the
per-element semantics: grouped and sliding ask upstream for exactly the elements that make the
windows downstream asked for, user functions are supervised per element. grouped and sliding hold
elements back, so they hold the control signals that arrived after those elements too: a signal
goes out right after the output holding the last element that arrived before it.
"""
from __future__ import annotations

from typing import Any, Callable

from ...errors import NoSuchElementError
from ...stage.supervision import supervise
from .base import FlowLogic, FlowStage, decider_of, require_callable, require_int, snapshot_copy
from ...stage.supervision import supervise_chunk
from .base import ChunkFlow
from .combined_timestamps import FoldedMax, SuffixStamps


# ---------------------------------------------------------------------------------------------- scan
class Scan(FlowStage):
    """Emits ``zero``, then ``acc = fn(acc, elem)`` for every element.

    **Emits when** the function returns a new value (and ``zero`` on the first pull).
    **Backpressures when** downstream backpressures. **Completes when** upstream completes (after
    ``zero`` if nothing else was emitted). **Cancels when** downstream cancels.
    Supervision: Resume skips the element; Restart resets to ``zero`` and emits it."""

    def __init__(self, zero: Any, fn: Callable[[Any, Any], Any]):
        require_callable("scan", "fn", fn)
        if zero is None:
            raise ValueError("scan: argument 'zero' must not be None (it is emitted)")
        super().__init__("scan")
        self.zero = zero
        self.fn = fn

    def create_logic(self, attributes):
        return _ScanLogic(self, decider_of(attributes))


class _ScanLogic(ChunkFlow, FlowLogic):
    def __init__(self, stage: Scan, decider):
        super().__init__(stage)
        self.zero = stage.zero
        self.fn = stage.fn
        self.decider = decider
        self.acc = stage.zero
        self.zero_out = False  # zero goes out on the first pull, before anything is pulled upstream
        self._restarted = False

    def _push_zero(self, item) -> None:
        self.zero_out = True
        self.push(self.out, item)
        if self.is_closed(self.in_):
            self.complete_stage()

    def on_pull(self):
        if not self.zero_out:
            self._push_zero(self.acc)
        else:
            self.pull(self.in_)

    def on_pull_chunk(self):
        if not self.zero_out:
            self._push_zero([self.acc])
        else:
            self.pull_chunk(self.in_, self._out_conns[0].demand)

    def on_upstream_finish(self):
        if self.zero_out:
            self.complete_stage()
        # else: zero still goes out on the first pull, then the stage completes

    def reset_state(self) -> None:
        self.acc = self.zero
        self._restarted = True

    def save_to_snapshot(self):
        return (snapshot_copy(self.acc), self.zero_out)

    def restore_from_snapshot(self, state) -> None:
        self.acc, self.zero_out = state

    def on_push(self):
        try:
            self.acc = self.fn(self.acc, self.grab(self.in_))
            self.push(self.out, self.acc)
        except Exception as e:  # noqa: BLE001
            self._restarted = False
            if supervise(self, self.decider, e):
                if self._restarted:  # Restart emits zero again
                    self.push(self.out, self.acc)
                elif not self.has_been_pulled(self.in_):
                    self.pull(self.in_)

    def on_push_chunk(self):
        fn = self.fn
        res: list = []
        ap = res.append
        acc = self.acc
        for x in self.grab(self.in_):
            try:
                acc = fn(acc, x)
            except Exception as e:  # noqa: BLE001
                self.acc = acc
                self._restarted = False
                if not supervise_chunk(self, e, res):
                    return
                if self._restarted:
                    acc = self.acc
                    ap(acc)
                continue
            ap(acc)
        self.acc = acc
        if res:
            self.push(self.out, res)
        else:
            self.pull_again()


# ---------------------------------------------------------------------------------------------- fold
class Fold(FlowStage):
    """Folds every element into ``fn(acc, elem)`` and emits the result when upstream completes.

    **Emits when** upstream completes. **Backpressures when** downstream backpressures.
    **Completes when** upstream completes. **Cancels when** downstream cancels.
    Supervision: Resume skips the element; Restart resets to ``zero``."""

    def __init__(self, zero: Any, fn: Callable[[Any, Any], Any]):
        require_callable("fold", "fn", fn)
        if zero is None:
            raise ValueError("fold: argument 'zero' must not be None (it may be emitted)")
        super().__init__("fold")
        self.zero = zero
        self.fn = fn

    def create_logic(self, attributes):
        return _FoldFlowLogic(self, decider_of(attributes))


class _FoldFlowLogic(FoldedMax, ChunkFlow, FlowLogic):
    pulls_ahead = True  # chunk regions: asks for whole chunks, emits once at the end

    # event time: the result carries the max timestamp folded in (FoldedMax; element form only)
    def __init__(self, stage: Fold, decider):
        super().__init__(stage)
        self.zero = stage.zero
        self.fn = stage.fn
        self.decider = decider
        self.acc = stage.zero

    def _pull_more(self) -> None:
        if self.chunked:
            self.pull_chunk(self.in_, self.chunk_size)
        else:
            self.pull(self.in_)

    def _emit_result(self) -> None:
        self.push(self.out, [self.acc] if self.chunked else self.acc, self.acc_ts)
        self.complete_stage()

    def on_push(self):
        elem = self.grab(self.in_)
        try:
            self.acc = self.fn(self.acc, elem)
        except Exception as e:  # noqa: BLE001
            if not supervise(self, self.decider, e):
                return
        if not self.is_closed(self.in_):
            self.pull(self.in_)

    def on_push_chunk(self):
        fn = self.fn
        acc = self.acc
        for x in self.grab(self.in_):
            try:
                acc = fn(acc, x)
            except Exception as e:  # noqa: BLE001
                self.acc = acc
                if not supervise(self, self.decider, e):
                    return
                acc = self.acc
        self.acc = acc
        if not self.is_closed(self.in_):
            self._pull_more()

    def on_pull(self):
        if self.is_closed(self.in_):
            self._emit_result()
        elif not self.has_been_pulled(self.in_):
            self._pull_more()

    on_pull_chunk = on_pull

    def on_upstream_finish(self):
        if self.is_available(self.out):
            self._emit_result()

    def reset_state(self) -> None:
        self.acc = self.zero
        self.acc_ts = None

    def save_to_snapshot(self):
        return self.timed(snapshot_copy(self.acc))

    def restore_from_snapshot(self, state) -> None:
        self.acc = self.untimed(state)


# ---------------------------------------------------------------------------------------------- reduce
_EMPTY = object()


class Reduce(FlowStage):
    """Like ``fold`` but seeded with the first element; fails with ``NoSuchElementError`` when
    upstream completes without elements.

    **Emits when** upstream completes. **Backpressures when** downstream backpressures.
    **Completes when** upstream completes. **Cancels when** downstream cancels.
    Supervision: Resume skips the element; Restart forgets the accumulator."""

    def __init__(self, fn: Callable[[Any, Any], Any]):
        require_callable("reduce", "fn", fn)
        super().__init__("reduce")
        self.fn = fn

    def create_logic(self, attributes):
        return _ReduceLogic(self, decider_of(attributes))


class _ReduceLogic(FoldedMax, FlowLogic):
    # event time: the result carries the max timestamp of the elements reduced (FoldedMax)
    def __init__(self, stage: Reduce, decider):
        super().__init__(stage)
        self.fn = stage.fn
        self.decider = decider
        self.acc = _EMPTY

    def on_push(self):
        elem = self.grab(self.in_)
        if self.acc is _EMPTY:
            self.acc = elem
            self.acc_ts = self._ts
        else:
            try:
                self.acc = self.fn(self.acc, elem)
            except Exception as e:  # noqa: BLE001
                if not supervise(self, self.decider, e):
                    return
        self.pull(self.in_)

    def on_upstream_finish(self):
        if self.acc is _EMPTY:
            self.fail_stage(NoSuchElementError("reduce over empty stream"))
        else:
            self.emit(self.out, self.acc, self.complete_stage, self.acc_ts)

    def reset_state(self) -> None:
        self.acc = _EMPTY
        self.acc_ts = None

    def save_to_snapshot(self):
        return None if self.acc is _EMPTY else self.timed((snapshot_copy(self.acc),))

    def restore_from_snapshot(self, state) -> None:
        self.acc = _EMPTY if state is None else self.untimed(state)[0]


# ---------------------------------------------------------------------------------------------- windows
class _WindowLogic(SuffixStamps, ChunkFlow, FlowLogic):
    """grouped and sliding: elements go through ``step(x)`` one by one, which returns a finished
    window or None. ``received`` counts the elements that arrived, ``settled`` the leading ones that
    are out (in a window) or will never be; a signal that arrived after ``received == k`` elements is
    held until ``settled >= k`` and goes out right after the window that settled them. In the chunk
    form the elements of a chunk not yet turned into windows wait in ``inq`` (a window is pushed
    alone when a held signal must follow it). Event time (element form only): an output list carries the
    max timestamp of its elements (``SuffixStamps``: every output is a suffix of what was received)."""
    pulls_ahead = True  # chunk regions: asks for a window's elements per output

    def __init__(self, stage):
        super().__init__(stage)
        self.reset_state()
        self.received = 0
        self.settled = 0
        self.marks: list = []  # [received-count, signal], in arrival order
        self.inq: list = []
        self.pos = 0

    # --- subclass API
    def step(self, x):
        raise TypeError("subclass must implement step")

    def partial(self):
        """The last window when upstream completed (None when there is none)."""
        raise TypeError("subclass must implement partial")

    def need(self, windows: int) -> int:
        """How many elements make the next ``windows`` windows."""
        raise TypeError("subclass must implement need")

    # --- signals
    def on_signal(self, signal) -> None:
        if not self.marks and self.settled >= self.received:
            self.emit_signal(self.out, signal)
        else:
            self.marks.append([self.received, signal])

    def _release(self) -> None:
        marks = self.marks
        while marks and marks[0][0] <= self.settled:
            self.emit_signal(self.out, marks.pop(0)[1])

    def _finish(self) -> None:
        last = self.partial()
        self.settled = self.received
        if last is not None:
            ts = None if self.stamps is None else self.suffix_ts(len(last))
            self.emit(self.out, [last] if self.chunked else last, ts=ts)
        self._release()
        self.complete_stage()

    # --- element form
    def on_push(self):
        self.received += 1
        w = self.step(self.grab(self.in_))
        if w is not None:
            self.push(self.out, w)
            self._release()
        else:
            self.pull(self.in_)

    def on_upstream_finish(self):
        if self.pos >= len(self.inq):
            self._finish()
        # else the elements still waiting in inq go first (on the next pulls)

    # --- chunk form
    def on_push_chunk(self):
        chunk = self.grab(self.in_)
        self.received += len(chunk)
        self.inq, self.pos = chunk, 0
        self._drain()

    def on_pull_chunk(self):
        if self.pos < len(self.inq):
            self._drain()
        elif self.is_closed(self.in_):
            self._finish()
        else:
            self.pull_chunk(self.in_, self.need(self._out_conns[0].demand))

    def _drain(self) -> None:
        d = self._out_conns[0].demand
        inq, pos, n = self.inq, self.pos, len(self.inq)
        marks = self.marks
        step = self.step
        windows: list = []
        while pos < n:
            w = step(inq[pos])
            pos += 1
            if w is not None:
                windows.append(w)
                if len(windows) >= d or (marks and marks[0][0] <= self.settled):
                    break
        self.pos = pos
        if pos >= n:
            self.inq, self.pos = [], 0
        if windows:
            self.push(self.out, windows)
            self._release()
            if self.pos == 0 and self.is_closed(self.in_):
                self._finish()
        elif self.is_closed(self.in_):
            self._finish()
        else:
            self.pull_chunk(self.in_, self.need(d))

    def save_to_snapshot(self):
        # the chunk form's elements not yet stepped (inq[pos:]) and the signals held behind them are state
        state = (self.window_state(), self.received, self.settled, list(self.inq[self.pos:]),
                 [list(m) for m in self.marks])
        stamps = self.stamp_state()  # event time: the timestamps of the elements held
        return state if stamps is None else state + (stamps,)

    def restore_from_snapshot(self, state) -> None:
        ws, self.received, self.settled, inq, marks = state[:5]
        self.restore_window_state(ws)
        if len(state) > 5:
            self.restore_stamp_state(state[5])
        self.inq, self.pos = list(inq), 0
        self.marks = [list(m) for m in marks]


class Grouped(FlowStage):
    """Chunks the stream into lists of ``n`` elements (the last one may be shorter).

    **Emits when** ``n`` elements were collected, or upstream completed with some collected.
    **Backpressures when** a group is complete and downstream backpressures.
    **Completes when** upstream completes. **Cancels when** downstream cancels."""

    def __init__(self, n: int):
        require_int("grouped", "n", n, 1)
        super().__init__("grouped")
        self.n = n

    def create_logic(self, attributes):
        return _GroupedLogic(self)


class _GroupedLogic(_WindowLogic):
    def __init__(self, stage: Grouped):
        self.n = stage.n
        super().__init__(stage)

    def step(self, x):
        buf = self.buf
        buf.append(x)
        if len(buf) == self.n:
            self.buf = []
            self.settled += self.n
            return buf
        return None

    def partial(self):
        return self.buf or None

    def need(self, windows: int) -> int:
        return windows * self.n - len(self.buf)

    def reset_state(self) -> None:
        self.buf = []

    def window_state(self):
        return list(self.buf)

    def restore_window_state(self, state) -> None:
        self.buf = list(state)


class Sliding(FlowStage):
    """Windows of ``n`` elements, each ``step`` elements after the previous one (as Pekko's
    ``sliding``); a last incomplete window is emitted if it holds elements not emitted before.

    **Emits when** a window is full, or upstream completed with an unfinished window.
    **Backpressures when** a window is complete and downstream backpressures.
    **Completes when** upstream completes. **Cancels when** downstream cancels."""

    def __init__(self, n: int, step: int = 1):
        require_int("sliding", "n", n, 1)
        require_int("sliding", "step", step, 1)
        super().__init__("sliding")
        self.n = n
        self.step = step

    def create_logic(self, attributes):
        return _SlidingLogic(self)


class _SlidingLogic(_WindowLogic):
    def __init__(self, stage: Sliding):
        self.n = stage.n
        self.stride = stage.step
        super().__init__(stage)

    def step(self, x):
        buf, n, stride = self.buf, self.n, self.stride
        buf.append(x)
        size = len(buf)
        if size < n:
            return None
        if size == n:
            # elements between this window and the next one (step > n) will never go out
            self.settled = self.base + max(n, stride)
            return list(buf)
        if stride <= n:
            del buf[:stride]
            self.base += stride
            if len(buf) == n:
                self.settled = self.base + n
                return list(buf)
            return None
        if size == stride:
            del buf[:stride]
            self.base += stride
        return None

    def partial(self):
        buf = self.buf
        return list(buf) if 0 < len(buf) < self.n else None

    def need(self, windows: int) -> int:
        size = len(self.buf)
        first = self.n - size if size < self.n else self.stride + self.n - size
        return first + (windows - 1) * self.stride

    def reset_state(self) -> None:
        self.buf = []
        self.base = 0  # index (in the stream) of buf[0]

    def window_state(self):
        return (list(self.buf), self.base)

    def restore_window_state(self, state) -> None:
        buf, self.base = state
        self.buf = list(buf)
