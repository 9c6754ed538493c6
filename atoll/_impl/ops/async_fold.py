"""``fold_async`` and ``scan_async``: Pekko's ``FoldAsync`` and ``ScanAsync`` (``impl/fusing/Ops.scala``).

``fn(acc, elem)`` returns an awaitable, a ``concurrent.futures.Future`` or a ``ray.ObjectRef`` of the
next accumulator; one call is in flight at a time (the next element is pulled once the result is in).
Unlike ``map_async``, a ``None`` result is a failure (``PortStateError``, Pekko's null-element
``NullPointerException``): an accumulator must be a legal element.
"""
from __future__ import annotations

from typing import Any, Callable

from ...errors import PortStateError
from ...stage.logic import GraphStageLogic
from ...stage.supervision import Supervision, decide
from .async_loop import Resolver, outcome
from .async_map import log_resumed
from .base import FlowLogic, FlowStage, decider_of, require_callable, snapshot_copy
from .combined_timestamps import Timed, later


def _none_result(op: str) -> PortStateError:
    return PortStateError(f"{op}: the function's result completed with None: elements must not be None "
                          "(Reactive Streams rule 2.13)")


def _check_zero(op: str, zero: Any) -> None:
    if zero is None:
        raise ValueError(f"{op}: argument 'zero' must not be None (it is emitted as an element)")


class _AsyncAccumulation(FlowStage):
    """What ``fold_async`` and ``scan_async`` share: ``zero`` and ``fn`` checked at build time."""

    op = ""
    logic: type = None

    def __init__(self, zero: Any, fn: Callable[[Any, Any], Any]):
        _check_zero(self.op, zero)
        require_callable(self.op, "fn", fn)
        super().__init__(self.op)
        self.zero = zero
        self.fn = fn

    def create_logic(self, attributes):
        return self.logic(self, decider_of(attributes))


class _AsyncAccumulationLogic(FlowLogic):
    """One call of ``fn(acc, elem)`` in flight at a time; supervision per failed call (Restart: back to zero)."""

    def __init__(self, stage: _AsyncAccumulation, decider):
        super().__init__(stage)
        self.op = stage.op
        self.zero = stage.zero
        self.fn = stage.fn
        self.decider = decider
        self.acc = stage.zero
        self.resolver = Resolver(self, self.op, self._completed)

    def _completed(self, _token, fut) -> None:
        raise TypeError("subclass must implement _completed")

    def _result(self, fut):
        """``(value, exc)`` of a finished call; a None value is a failure."""
        value, exc = outcome(fut)
        if exc is None and value is None:
            exc = _none_result(self.op)
        return value, exc

    def reset_state(self) -> None:
        self.acc = self.zero

    # checkpoint state: the accumulator (a copy); the one call in flight cannot be saved, so the cut waits
    # for it (it ends by itself)
    def save_to_snapshot(self):
        return snapshot_copy(self.acc)

    def restore_from_snapshot(self, state) -> None:
        self.acc = state

    def _supervise(self, exc: BaseException) -> bool:
        """False: Stop failed the stage; else the element is skipped (Restart: from ``zero`` again)."""
        d = decide(self.decider, exc)
        if d == Supervision.STOP:
            self.fail_stage(exc)
            return False
        log_resumed(self, self.op, exc)
        if d == Supervision.RESTART:
            self.reset_state()
        return True

    def post_stop(self) -> None:
        self.resolver.stop()


class FoldAsync(_AsyncAccumulation):
    """Pekko's ``foldAsync``: folds the elements with ``fn(acc, elem)``, whose result arrives
    asynchronously, and emits the final accumulator when upstream completes (``zero`` for an empty
    stream).

    **Emits when** upstream completed and the last result has arrived. **Backpressures when**
    downstream backpressures (and while a result is in flight: one element at a time). **Completes
    when** upstream completes and the final value was emitted. **Cancels when** downstream cancels.
    Supervision (``fn`` raising, its result failing or being None): Stop fails the stream, Resume skips
    the element (the accumulator stays), Restart skips it and starts over from ``zero``."""

    op = "fold_async"


class _FoldAsyncLogic(_AsyncAccumulationLogic):
    """Event time (spec 1.2: a combining stage stamps its output with the max timestamp of what it combined):
    ``acc_ts`` is the max timestamp of the elements whose call succeeded, so an element skipped by supervision
    does not count; the timestamp of the element in flight waits in ``call_ts`` until its result is in. Only
    event-time graphs keep them (``enable_event_time``); the checkpoint then saves ``Timed(acc, acc_ts)``."""
    pulls_ahead = True  # asks for every element, emits once at the end

    def __init__(self, stage: FoldAsync, decider):
        super().__init__(stage, decider)
        self.busy = False  # a result is in flight
        self.timed = False  # event time: keep acc_ts
        self.acc_ts = None  # the max timestamp folded into acc (event time)
        self.call_ts = None  # the timestamp of the element whose call is in flight (event time)

    def enable_event_time(self) -> None:
        super().enable_event_time()
        self.timed = True

    def ready_for_snapshot(self) -> bool:
        return not self.busy

    def reset_state(self) -> None:
        super().reset_state()
        self.acc_ts = None

    def save_to_snapshot(self):
        acc = snapshot_copy(self.acc)
        return acc if self.acc_ts is None else Timed(acc, self.acc_ts)

    def restore_from_snapshot(self, state) -> None:
        if type(state) is Timed:
            self.acc, self.acc_ts = state.state, state.ts
        else:
            self.acc, self.acc_ts = state, None

    def on_pull(self) -> None:
        if not self.has_been_pulled(self.in_):
            self.try_pull(self.in_)

    def on_push(self) -> None:
        elem = self.grab(self.in_)
        if self.timed:
            self.call_ts = self._ts
        try:
            fut = self.resolver.resolve(self.fn(self.acc, elem), None)
        except Exception as e:  # noqa: BLE001 - fn raised (or returned no awaitable)
            if self._supervise(e):
                self._next()
            return
        self.busy = True
        if fut is not None:
            self._completed(None, fut)

    def _completed(self, _token, fut) -> None:
        self.busy = False
        value, exc = self._result(fut)
        if exc is not None:
            if not self._supervise(exc):
                return
        else:
            self.acc = value
            if self.timed:
                self.acc_ts = later(self.acc_ts, self.call_ts)
        self._next()

    def _next(self) -> None:
        if self.is_closed(self.in_):
            self._finish()
        elif self.is_available(self.out) and not self.has_been_pulled(self.in_):
            self.pull(self.in_)

    def _finish(self) -> None:
        self.emit(self.out, self.acc, None, self.acc_ts)
        self.complete_stage()

    def on_upstream_finish(self) -> None:
        if not self.busy:
            self._finish()


class ScanAsync(_AsyncAccumulation):
    """Pekko's ``scanAsync``: emits ``zero``, then each accumulator ``fn(acc, elem)`` as its result arrives.

    **Emits when** the result of ``fn`` arrives and downstream is ready (``zero`` at the first pull).
    **Backpressures when** downstream backpressures (and while a result is in flight). **Completes
    when** upstream completes and the last result was emitted (the in-flight one, if any, resolved).
    **Cancels when** downstream cancels. Supervision (``fn`` raising, its result failing or being None):
    Stop fails the stream, Resume skips the element, Restart skips it and goes on from ``zero``
    (without emitting ``zero`` again). A control signal that arrives while a result is in flight goes
    out after that result."""

    op = "scan_async"


class _ScanAsyncLogic(_AsyncAccumulationLogic):
    def __init__(self, stage: ScanAsync, decider):
        super().__init__(stage, decider)
        self.zero_pending = True  # zero not emitted yet (Pekko's ZeroHandler)
        self.handled = False  # no result in flight (Pekko's elementHandled)
        self.held_signals: list = []  # signals that arrived while a result was in flight: they follow it

    # checkpoint state: the accumulator and whether zero went out; the cut waits for a call in flight
    def save_to_snapshot(self):
        return (snapshot_copy(self.acc), self.zero_pending)

    def restore_from_snapshot(self, state) -> None:
        self.acc, self.zero_pending = state
        self.handled = not self.zero_pending

    def ready_for_snapshot(self) -> bool:
        return self.handled or self.zero_pending

    def on_signal(self, signal) -> None:
        if self.handled or self.zero_pending:
            GraphStageLogic.on_signal(self, signal)
        else:
            self.held_signals.append(signal)

    def _release_signals(self) -> None:
        if self.held_signals:
            held, self.held_signals = self.held_signals, []
            for signal in held:
                GraphStageLogic.on_signal(self, signal)

    def on_pull(self) -> None:
        if self.zero_pending:
            self.zero_pending = False
            self.handled = True
            self.push(self.out, self.acc)
            if self.is_closed(self.in_):
                self.complete_stage()
            return
        self._safe_pull()

    def _safe_pull(self) -> None:
        if self.is_closed(self.in_):
            self.complete_stage()
        elif self.is_available(self.out) and not self.has_been_pulled(self.in_):
            self.pull(self.in_)

    def on_push(self) -> None:
        self.handled = False
        elem = self.grab(self.in_)
        try:
            fut = self.resolver.resolve(self.fn(self.acc, elem), None)
        except Exception as e:  # noqa: BLE001 - fn raised: Pekko pulls the next element at once
            self.handled = True
            if self._supervise(e):
                self.try_pull(self.in_)
            return
        if fut is not None:
            self._completed(None, fut)

    def _completed(self, _token, fut) -> None:
        value, exc = self._result(fut)
        self.handled = True
        if exc is not None:
            if not self._supervise(exc):
                return
            self._release_signals()
            self._safe_pull()
            return
        self.acc = value
        self.push(self.out, value)
        self._release_signals()
        self._safe_pull()

    def on_upstream_finish(self) -> None:
        if self.zero_pending:
            return  # zero still goes out at the first pull, then the stage completes
        if self.handled:
            self.complete_stage()


FoldAsync.logic = _FoldAsyncLogic
ScanAsync.logic = _ScanAsyncLogic
