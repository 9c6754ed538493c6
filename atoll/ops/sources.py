"""Source operators: where elements come from (Pekko's ``Source`` factories)."""
from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any, Callable, Iterable, Optional

from ..markers import NotUsed
from ..stage.handlers import OutHandler
from ..stage.logic import GraphStageLogic
from ..stage.timers import TimerGraphStageLogic
from .base import SourceStage, require_callable

_END = object()


class _SourceLogic(GraphStageLogic, OutHandler):
    def __init__(self, stage: SourceStage):
        super().__init__(stage.shape)
        self.out = stage.out
        self.set_handler(stage.out, self)


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
            def on_pull(self):
                self.push(self.out, stage.elem)
                self.complete(self.out)

        return Logic(self)


class IterableSource(SourceStage):
    """Emits the elements of an iterable; a fresh iterator per materialization (lazy).

    **Emits when** downstream pulls and the iterator has a next element. **Completes when** the
    iterator is exhausted (right after its last element). **Fails when** the iterator raises."""

    def __init__(self, iterable: Iterable[Any], name: str = "from_iterable", factory: bool = False):
        if factory:
            require_callable("Source.from_iterator", "factory", iterable)
        elif not hasattr(iterable, "__iter__"):
            raise TypeError(f"Source.from_iterable: expected an iterable, got {iterable!r}")
        super().__init__(name)
        self.iterable = iterable
        self.factory = factory

    def create_logic(self, attributes):
        source = self.iterable
        if not self.factory and isinstance(source, Sequence) and not isinstance(source, (str, bytes)):
            return _SequenceLogic(self, source)
        return _IteratorLogic(self, source, self.factory)


class _SequenceLogic(_SourceLogic):
    def __init__(self, stage, seq):
        super().__init__(stage)
        self.seq = seq
        self.i = 0

    def pre_start(self):
        if len(self.seq) == 0:
            self.complete(self.out)

    def on_pull(self):
        i = self.i
        self.i = i + 1
        self.push(self.out, self.seq[i])
        if self.i >= len(self.seq):
            self.complete(self.out)


class _IteratorLogic(_SourceLogic):
    def __init__(self, stage, source, factory):
        super().__init__(stage)
        self.source = source
        self.factory = factory
        self.it = None
        self.nxt = _END

    def pre_start(self):
        self.it = iter(self.source() if self.factory else self.source)
        self.nxt = next(self.it, _END)
        if self.nxt is _END:
            self.complete(self.out)

    def on_pull(self):
        elem = self.nxt
        self.nxt = next(self.it, _END)
        self.push(self.out, elem)
        if self.nxt is _END:
            self.complete(self.out)


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
        return _SequenceLogic(self, self.range)


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

        class Logic(_SourceLogic):
            def on_pull(self):
                self.push(self.out, elem)

        return Logic(self)


class EmptySource(SourceStage):
    """Completes at once without emitting."""

    def __init__(self):
        super().__init__("empty")

    def create_logic(self, attributes):
        class Logic(_SourceLogic):
            def pre_start(self):
                self.complete(self.out)

            def on_pull(self):  # pragma: no cover - completed before any pull
                self.complete(self.out)

        return Logic(self)


class NeverSource(SourceStage):
    """Never emits, never completes (until cancelled)."""

    def __init__(self):
        super().__init__("never")

    def create_logic(self, attributes):
        class Logic(_SourceLogic):
            def on_pull(self):
                pass

        return Logic(self)


class FailedSource(SourceStage):
    """Fails at once with the given exception."""

    def __init__(self, exc: BaseException):
        if not isinstance(exc, BaseException):
            raise TypeError(f"Source.failed: expected an exception, got {exc!r}")
        super().__init__("failed")
        self.exc = exc

    def create_logic(self, attributes):
        exc = self.exc

        class Logic(_SourceLogic):
            def pre_start(self):
                self.fail(self.out, exc)

            def on_pull(self):  # pragma: no cover - failed before any pull
                pass

        return Logic(self)


class UnfoldSource(SourceStage):
    """Emits ``elem`` for every ``(state, elem) = fn(state)``; completes when ``fn`` returns ``None``.

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

        return Logic(self)


class FutureSource(SourceStage):
    """Emits the result of a ``concurrent.futures.Future`` once it completes, then completes.

    A future that resolves to ``None`` completes the stream without an element.
    **Fails when** the future fails (with its exception)."""

    def __init__(self, future: Future):
        if not isinstance(future, Future):
            raise TypeError(f"Source.from_future: expected a concurrent.futures.Future, got {future!r}")
        super().__init__("from_future")
        self.future = future

    def create_logic(self, attributes):
        fut = self.future

        class Logic(_SourceLogic):
            result = _END

            def pre_start(self):
                cb = self.get_async_callback(self._done)
                fut.add_done_callback(cb.invoke)

            def _done(self, f):
                if f.cancelled():
                    from ..errors import StreamDetachedError

                    self.fail_stage(StreamDetachedError("Source.from_future: the future was cancelled"))
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

        return Logic(self)


class Cancellable:
    """Materialized value of ``Source.tick``: ``cancel()`` stops the ticks and completes the stream."""

    def __init__(self):
        self._callback = None
        self._cancelled = False

    def cancel(self) -> bool:
        first = not self._cancelled
        self._cancelled = True
        if self._callback is not None:
            self._callback.invoke(None)
        return first

    @property
    def is_cancelled(self) -> bool:
        return self._cancelled


class TickSource(SourceStage):
    """Emits ``tick`` after ``initial_delay`` and then every ``interval`` seconds, if downstream is
    ready at that moment (otherwise that tick is dropped, as in Pekko).

    **Completes when** the materialized ``Cancellable`` is cancelled."""

    def __init__(self, initial_delay: float, interval: float, tick: Any):
        if initial_delay < 0:
            raise ValueError(f"Source.tick: argument 'initial_delay' must be >= 0, got {initial_delay}")
        if interval <= 0:
            raise ValueError(f"Source.tick: argument 'interval' must be > 0, got {interval}")
        if tick is None:
            raise ValueError("Source.tick: the tick element must not be None")
        super().__init__("tick")
        self.initial_delay = initial_delay
        self.interval = interval
        self.tick = tick

    def create_logic_and_materialized_value(self, attributes):
        stage = self
        cancellable = Cancellable()

        class Logic(TimerGraphStageLogic, OutHandler):
            def __init__(self):
                super().__init__(stage.shape)
                self.set_handler(stage.out, self)
                cancellable._callback = self.get_async_callback(lambda _: self.complete_stage())

            def pre_start(self):
                if cancellable.is_cancelled:
                    self.complete_stage()
                else:
                    self.schedule_at_fixed_rate("tick", stage.initial_delay, stage.interval)

            def on_timer(self, key):
                if self.is_available(stage.out) and not cancellable.is_cancelled:
                    self.push(stage.out, stage.tick)

            def on_pull(self):
                pass

        return Logic(), cancellable
