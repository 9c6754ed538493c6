"""Source operators: where elements come from (Pekko's ``Source`` factories)."""
from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from itertools import repeat
from operator import is_
from typing import Any, Callable, Iterable, Optional

from ...errors import PortStateError
from ...markers import NotUsed
from ...stage.handlers import OutHandler
from ...stage._connection import OUT_READY, PUSHING
from ...stage._port_calls import fusable, install_on_pull
from ...stage.logic import GraphStageLogic
from ...stage.timers import TimerGraphStageLogic
from ...stage.supervision import Supervision, decide
from .base import SourceStage, decider_of, require_callable, snapshot_copy

_END = object()


class _SourceLogic(GraphStageLogic, OutHandler):
    def __init__(self, stage: SourceStage):
        super().__init__(stage.shape)
        self.out = stage.out
        self.set_handler(stage.out, self)

    def enable_chunks(self, chunk_size: int) -> None:
        self.set_handler(self.out, OutHandler(on_pull=self.on_pull_chunk, on_downstream_finish=self.on_downstream_finish))

    def _none_error(self) -> PortStateError:
        return PortStateError(
            f"Cannot push None to port ({self.out.name}) of stage {self}: elements must not be None "
            "(Reactive Streams rule 2.13)"
        )


def _first_none(chunk: list) -> int:
    """Index of the first ``None`` in ``chunk`` (identity, never ``==``), or -1."""
    if any(map(is_, chunk, repeat(None))):
        for i, x in enumerate(chunk):
            if x is None:
                return i
    return -1


class SingleSource(SourceStage):
    """Emits one element, then completes.

    **Emits when** downstream pulls. **Completes when** the element was emitted."""

    def __init__(self, elem: Any):
        if elem is None:
            raise ValueError("Source.single: the element must not be None (Reactive Streams rule 2.13)")
        super().__init__("single")
        self.elem = elem

    def create_logic(self, attributes):
        stage = self

        class Logic(_SourceLogic):
            stateless = True  # it completes with its only element: a checkpoint never sees it half done

            def on_pull(self):
                self.push(self.out, stage.elem)
                self.complete(self.out)

        return Logic(self)


class IterableSource(SourceStage):
    """Emits the elements of an iterable (``from_iterable``), or of the iterator ``factory()``
    returns (``from_iterator``). Lazy: the iterator is created at the first pull, once per
    materialization (``iter(iterable)`` again, or ``factory()`` again), and one element is taken
    from it per pull, never ahead of demand. A Python iterator has no ``hasNext``: the stream
    completes at the pull that finds the iterator exhausted, not together with the last element
    (a sized ``Sequence`` such as a list, tuple or range completes with its last element). A
    one-shot iterator given to ``from_iterable`` is exhausted after its first materialization;
    pass a factory to ``from_iterator`` to run a blueprint more than once.

    Supervision (as Pekko's ``IteratorSource``): when creating the iterator fails, Stop fails the
    stream, Resume completes it, Restart tries once more; when ``next()`` fails, Stop fails the
    stream, Resume asks the same iterator again, Restart starts over with a new iterator. A second
    failure in a row fails the stream.

    **Emits when** downstream pulls and the iterator has a next element. **Completes when** a pull
    finds the iterator exhausted. **Fails when** the iterator (or the factory) raises and the
    supervision strategy says Stop."""

    def __init__(self, iterable: Iterable[Any], name: str = "from_iterable", factory: bool = False,
                 replay: Optional[str] = None):
        if replay not in (None, "skip"):
            raise ValueError(f"Source.from_iterator: argument 'replay' must be None or 'skip', got {replay!r}")
        if replay is not None and not factory:
            raise ValueError("Source.from_iterable: 'replay' needs a factory (use Source.from_iterator)")
        if factory:
            require_callable("Source.from_iterator", "factory", iterable)
        elif not hasattr(iterable, "__iter__"):
            raise TypeError(f"Source.from_iterable: argument 'iterable' must be iterable, got {iterable!r}")
        super().__init__(name)
        self.iterable = iterable
        self.factory = factory
        self.replay = replay

    def create_logic(self, attributes):
        source = self.iterable
        if not self.factory and isinstance(source, Sequence) and not isinstance(source, (str, bytes)):
            return _SequenceLogic(self, source)
        if self.replay == "skip":
            return _ReplayIteratorLogic(self, source, self.factory, decider_of(attributes))
        return _IteratorLogic(self, source, self.factory, decider_of(attributes))


class _SequenceLogic(_SourceLogic):
    def __init__(self, stage, seq):
        super().__init__(stage)
        self.seq = seq
        self.i = 0

    def pre_start(self):
        if self.i >= len(self.seq):  # empty, or restored at its end
            self.complete(self.out)

    def on_pull(self):
        i = self.i
        self.i = i + 1
        self.push(self.out, self.seq[i])
        if self.i >= len(self.seq):
            self.complete(self.out)

    def chunk_capable(self) -> bool:
        return True

    def on_pull_chunk(self):
        i = self.i
        seq = self.seq
        j = min(i + self._out_conns[0].demand, len(seq))
        chunk = list(seq[i:j]) if type(seq) is not list else seq[i:j]
        self.i = j
        if type(seq) is not range:
            k = _first_none(chunk)
            if k >= 0:
                if k:
                    self.push(self.out, chunk[:k])
                self.fail_stage(self._none_error())
                return
        self.push(self.out, chunk)
        if j >= len(seq):
            self.complete(self.out)

    def save_to_snapshot(self):
        return self.i

    def restore_from_snapshot(self, state) -> None:
        self.i = state


class _RangeLogic(_SequenceLogic):
    """``Source.range``'s logic: a range never changes, so its length is read once (the per-element
    form runs once per element wherever a neighbour has no chunk form)."""

    def __init__(self, stage, seq: range):
        super().__init__(stage, seq)
        self.n = len(seq)

    def on_pull(self):
        i = self.i
        self.i = j = i + 1
        self.push(self.out, self.seq[i])
        if j >= self.n:
            self.complete(self.out)

    def _bind_fused_handlers(self, interpreter) -> None:
        conn = self._out_conns[0]
        fused = None
        if conn is not None and conn.out_handler is self and fusable(self, _RangeLogic, "on_pull", self.push):
            fused = _fused_range_on_pull(self, interpreter, conn, self.out, self.seq, self.n, self.push)
        install_on_pull(self, conn, fused)


def _fused_range_on_pull(logic, interpreter, conn, out, seq, n, push):
    """``_RangeLogic.on_pull`` with the plain case of its ``push`` inlined (the same check as the port-call
    closure; every other case goes through it, so errors stay its own). Ints are never None."""
    queue, enqueue = interpreter.queue, interpreter.enqueue
    out_ready, pushing = OUT_READY, PUSHING

    def on_pull():
        i = logic.i
        logic.i = j = i + 1
        elem = seq[i]
        if conn.state == out_ready:
            conn.state = pushing
            conn.slot = elem
            if interpreter.chased is None and not queue:
                interpreter.chased = conn
            else:
                enqueue(conn)
        else:
            push(out, elem)
        if j >= n:
            logic.complete(out)

    return on_pull


class _IteratorLogic(_SourceLogic):
    # an iterator cannot be rewound: no checkpoint state (refused with this hint)
    checkpoint_hint = ("an iterator cannot be replayed after a restore; pass a list or tuple to "
                       "Source.from_iterable, or use Source.from_iterator(factory, replay=\"skip\") with a "
                       "deterministic factory")

    def __init__(self, stage, source, factory, decider):
        super().__init__(stage)
        self.source = source
        self.factory = factory
        self.decider = decider
        self.it = None

    def _new_iterator(self):
        return iter(self.source() if self.factory else self.source)

    def on_pull(self):
        if self.it is None:
            try:
                self.it = self._new_iterator()
            except Exception as e:  # noqa: BLE001 - the supervision strategy decides
                d = decide(self.decider, e)
                if d == Supervision.STOP:
                    self.fail_stage(e)
                    return
                if d == Supervision.RESUME:
                    self.complete_stage()
                    return
                self.it = self._new_iterator()  # failing again fails the stage
        try:
            elem = next(self.it, _END)
        except Exception as e:  # noqa: BLE001 - the supervision strategy decides
            d = decide(self.decider, e)
            if d == Supervision.STOP:
                self.fail_stage(e)
                return
            if d == Supervision.RESTART:
                self.it = self._new_iterator()
            elem = next(self.it, _END)  # failing again fails the stage
        if elem is _END:
            self.complete_stage()
        else:
            self.push(self.out, elem)

    def chunk_capable(self) -> bool:
        # the chunk form knows only Stop; Resume/Restart of a failing iterator stay element-wise
        return self.decider is Supervision.stopping_decider

    def on_pull_chunk(self):
        if self.it is None:
            try:
                self.it = self._new_iterator()
            except Exception as e:  # noqa: BLE001 - Stop (the only strategy of the chunk form)
                self.fail_stage(e)
                return
        n = self._out_conns[0].demand
        chunk: list = []
        failure = None
        try:
            chunk.extend(itertools.islice(self.it, n))
        except Exception as e:  # noqa: BLE001 - after the elements before it
            failure = e
        k = _first_none(chunk)
        if k >= 0:
            del chunk[k:]
            failure = self._none_error()
        if chunk:
            self.push(self.out, chunk)
        if failure is not None:
            self.fail_stage(failure)
        elif len(chunk) < n:
            self.complete_stage()  # the iterator is exhausted: no pull would find more


class _ReplayIteratorLogic(_IteratorLogic):
    """``from_iterator(factory, replay="skip")``: the state is how many elements the current iterator
    gave; a restored stage calls ``factory()`` again and skips that many (the factory must be
    deterministic). A supervised Restart starts a new iterator, so the count starts over with it."""

    def __init__(self, stage, source, factory, decider):
        super().__init__(stage, source, factory, decider)
        self.taken = 0  # elements taken from self.it
        self.skip = 0  # after a restore: elements the first iterator skips

    def _new_iterator(self):
        it = super()._new_iterator()
        k, self.skip = self.skip, 0
        self.taken = 0
        for _ in itertools.islice(it, k):  # replay: skip what went out before the checkpoint
            self.taken += 1
        return it

    def push(self, out, elem):
        self.taken += len(elem) if type(elem) is list else 1
        super().push(out, elem)

    def save_to_snapshot(self):
        return self.taken

    def restore_from_snapshot(self, state) -> None:
        self.skip = state


class RangeSource(SourceStage):
    """Emits ``range(start, stop, step)`` (Python semantics, ``stop`` exclusive).

    **Emits when** downstream pulls. **Completes when** the range is exhausted."""

    def __init__(self, start: int, stop: int, step: int = 1):
        for name, v in (("start", start), ("stop", stop), ("step", step)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"Source.range: argument {name!r} must be an int, got {v!r}")
        if step == 0:
            raise ValueError("Source.range: argument 'step' must not be 0")
        super().__init__("range")
        self.range = range(start, stop, step)

    def create_logic(self, attributes):
        return _RangeLogic(self, self.range)


class RepeatSource(SourceStage):
    """Emits the same element forever.

    **Emits when** downstream pulls. **Completes** never."""

    def __init__(self, elem: Any):
        if elem is None:
            raise ValueError("Source.repeat: the element must not be None (Reactive Streams rule 2.13)")
        super().__init__("repeat")
        self.elem = elem

    def create_logic(self, attributes):
        elem = self.elem

        return _RepeatLogic(self, elem)


class _RepeatLogic(_SourceLogic):
    stateless = True

    def __init__(self, stage, elem):
        super().__init__(stage)
        self.elem = elem

    def on_pull(self):
        self.push(self.out, self.elem)

    def chunk_capable(self) -> bool:
        return True

    def on_pull_chunk(self):
        self.push(self.out, [self.elem] * self._out_conns[0].demand)


class EmptySource(SourceStage):
    """Completes at once without emitting.

    **Completes** when the stream starts, without waiting for demand."""

    def __init__(self):
        super().__init__("empty")

    def create_logic(self, attributes):
        class Logic(_SourceLogic):
            stateless = True

            def pre_start(self):
                self.complete(self.out)

            def on_pull(self):  # pragma: no cover - completed before any pull
                self.complete(self.out)

        return Logic(self)


class NeverSource(SourceStage):
    """Never emits and never completes; only downstream cancellation (or a kill switch, or the
    materializer shutting down) ends it.

    **Emits** never. **Completes** never."""

    def __init__(self):
        super().__init__("never")

    def create_logic(self, attributes):
        class Logic(_SourceLogic):
            stateless = True

            def on_pull(self):
                pass

        return Logic(self)


class FailedSource(SourceStage):
    """Fails at once with the given exception (the same instance in every materialization).

    **Fails** when the stream starts, without waiting for demand."""

    def __init__(self, exc: BaseException):
        if not isinstance(exc, BaseException):
            raise TypeError(f"Source.failed: expected an exception, got {exc!r}")
        super().__init__("failed")
        self.exc = exc

    def create_logic(self, attributes):
        exc = self.exc

        class Logic(_SourceLogic):
            stateless = True

            def pre_start(self):
                self.fail(self.out, exc)

            def on_pull(self):  # pragma: no cover - failed before any pull
                pass

        return Logic(self)


class UnfoldSource(SourceStage):
    """Emits ``elem`` for every ``(state, elem) = fn(state)``; completes when ``fn`` returns ``None``.
    ``fn`` is called once per pull (never ahead of demand), from ``state`` again in every
    materialization.

    **Emits when** downstream pulls and ``fn`` returned a pair. **Completes when** ``fn`` returns None.
    **Fails when** ``fn`` raises."""

    def __init__(self, state: Any, fn: Callable[[Any], Optional[tuple]]):
        require_callable("Source.unfold", "fn", fn)
        super().__init__("unfold")
        self.state = state
        self.fn = fn

    def create_logic(self, attributes):
        stage = self

        class Logic(_SourceLogic):
            state = stage.state

            def on_pull(self):
                r = stage.fn(self.state)
                if r is None:
                    self.complete(self.out)
                    return
                try:
                    self.state, elem = r
                except (TypeError, ValueError):
                    raise TypeError(f"Source.unfold: fn must return (next_state, element) or None, got {r!r}") from None
                self.push(self.out, elem)

            def save_to_snapshot(self):
                return snapshot_copy(self.state)

            def restore_from_snapshot(self, state) -> None:
                self.state = state

        return Logic(self)


class FutureSource(SourceStage):
    """Emits the result of a ``concurrent.futures.Future`` once it completes, then completes.

    A future that resolves to ``None`` completes the stream without an element.
    **Emits when** the future has a result and downstream pulls. **Completes when** the element was
    emitted (or the result was ``None``). **Fails when** the future fails (with its exception) or is
    cancelled (with ``StreamDetachedError``)."""

    def __init__(self, future: Future):
        if not isinstance(future, Future):
            raise TypeError(f"Source.from_future: expected a concurrent.futures.Future, got {future!r}")
        super().__init__("from_future")
        self.future = future

    def create_logic(self, attributes):
        return _FutureValueLogic(self, self.future)


class _FutureValueLogic(_SourceLogic):
    """Emits the value a future completes with, then completes (``None``: completes without an element); fails
    with the future's exception, or ``StreamDetachedError`` if it was cancelled. Shared by ``from_future`` and
    ``maybe``."""

    checkpoint_hint = ("a future's result cannot be replayed after a restore; use Source.single "
                       "with the value, or Source.from_iterator(factory, replay=\"skip\")")

    def __init__(self, stage, future: Future):
        super().__init__(stage)
        self.future = future
        self.source = stage.out.name[: -len(".out")]  # from_future / maybe, for the cancellation message
        self.result = _END  # a value that arrived before downstream pulled

    def pre_start(self):
        cb = self.get_async_callback(self._done)
        self.future.add_done_callback(cb.invoke)

    def _done(self, f: Future) -> None:
        if f.cancelled():
            from ...errors import StreamDetachedError

            self.fail_stage(StreamDetachedError(f"Source.{self.source}: the future was cancelled"))
            return
        exc = f.exception()
        if exc is not None:
            self.fail_stage(exc)
            return
        value = f.result()
        if value is None:
            self.complete_stage()
        elif self.is_available(self.out):
            self.push(self.out, value)
            self.complete_stage()
        else:
            self.result = value

    def on_pull(self):
        if self.result is not _END:
            self.push(self.out, self.result)
            self.complete_stage()


class Cancellable:
    """Materialized value of ``Source.tick``: ``cancel()`` stops the ticks and completes the stream.

    ``cancel()`` returns True for the call that cancelled, False for every later one (thread-safe);
    ``is_cancelled()`` tells whether it was called. Both are methods (as Pekko's ``cancel`` and
    ``isCancelled``), so they also work on the driver's handle of a tick source in a Ray island."""

    def __init__(self):
        self._lock = threading.Lock()
        self._callback = None
        self._cancelled = False

    def cancel(self) -> bool:
        with self._lock:
            if self._cancelled:
                return False
            self._cancelled = True
            callback = self._callback
        if callback is not None:
            callback.invoke(None)
        return True

    def _attach(self, callback) -> bool:
        """Link the running stage; returns True if ``cancel()`` was called already."""
        with self._lock:
            self._callback = callback
            return self._cancelled

    def is_cancelled(self) -> bool:
        return self._cancelled

    def __atoll_detach__(self) -> "Cancellable":
        """The driver's copy once the island ended: it keeps the state; cancelling it is harmless."""
        return _restore_cancellable(self._cancelled)

    def __reduce__(self):
        # only the state travels (a copy is not linked to the stage)
        return (_restore_cancellable, (self._cancelled,))

    def __repr__(self):
        return f"Cancellable(cancelled={self._cancelled})"


def _restore_cancellable(cancelled: bool) -> Cancellable:
    c = Cancellable()
    c._cancelled = cancelled
    return c


def _require_seconds(op: str, arg: str, value: Any, minimum: float, inclusive: bool) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{op}: argument {arg!r} must be a number of seconds, got {value!r}")
    if value < minimum or (not inclusive and value == minimum):
        raise ValueError(f"{op}: argument {arg!r} must be {'>=' if inclusive else '>'} {minimum}, got {value}")


class TickSource(SourceStage):
    """Emits ``tick`` after ``initial_delay`` seconds and then every ``interval`` seconds (with a
    fixed delay between firings, as Pekko), if downstream is ready at that moment; a tick that finds
    downstream not ready is dropped, not kept for later. Materializes a ``Cancellable``.

    **Emits when** a tick is due and downstream has pulled. **Backpressures** never (ticks are
    dropped instead). **Completes when** the ``Cancellable`` is cancelled (also before the stream
    started: then it completes at once). **Cancels when** downstream cancels."""

    def __init__(self, initial_delay: float, interval: float, tick: Any):
        _require_seconds("Source.tick", "initial_delay", initial_delay, 0, inclusive=True)
        _require_seconds("Source.tick", "interval", interval, 0, inclusive=False)
        if tick is None:
            raise ValueError("Source.tick: argument 'tick' must not be None (Reactive Streams rule 2.13)")
        super().__init__("tick")
        self.initial_delay = initial_delay
        self.interval = interval
        self.tick = tick

    def create_logic_and_materialized_value(self, attributes):
        stage = self
        cancellable = Cancellable()

        class Logic(TimerGraphStageLogic, OutHandler):
            stateless = True  # ticks carry no position; a restored tick source starts its timer again

            def __init__(self):
                super().__init__(stage.shape)
                self.set_handler(stage.out, self)

            def pre_start(self):
                if cancellable._attach(self.get_async_callback(lambda _: self.complete_stage())):
                    self.complete_stage()
                else:
                    self.schedule_with_fixed_delay("tick", stage.initial_delay, stage.interval)

            def on_timer(self, key):
                if self.is_available(stage.out) and not cancellable._cancelled:
                    self.push(stage.out, stage.tick)

            def on_pull(self):
                pass

        return Logic(), cancellable
