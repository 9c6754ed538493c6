"""More sources: cycle, iterate, maybe (Pekko's ``Source.cycle``, ``Source.iterate``, ``Source.maybe``)."""
from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Callable, Iterable, Optional

from ...errors import abrupt_termination
from .base import SourceStage, complete_promise, new_promise, require_callable
from .sources import IterableSource, _SourceLogic


def _cycled(factory: Callable[[], Iterable[Any]]):
    """The elements of ``factory()``, then of ``factory()`` again, forever; a cycle that yields
    nothing raises ``ValueError("empty iterator")`` (Pekko's ``IllegalArgumentException``)."""
    while True:
        empty = True
        for x in factory():
            empty = False
            yield x
        if empty:
            raise ValueError("Source.cycle: empty iterator")


class CycleSource(IterableSource):
    """Emits the elements of ``factory()`` and starts over with a fresh ``factory()`` when they run
    out, forever (Pekko's ``Source.cycle``). An empty iterable fails the stream with ``ValueError``
    (also one returned after earlier non-empty cycles).

    **Emits when** downstream pulls. **Completes** never. **Fails when** ``factory`` raises or returns
    an empty iterable."""

    def __init__(self, factory: Callable[[], Iterable[Any]]):
        require_callable("Source.cycle", "factory", factory)
        super().__init__(lambda: _cycled(factory), name="cycle", factory=True)


def _iterated(seed: Any, has_next: Optional[Callable[[Any], bool]], fn: Callable[[Any], Any]):
    acc = seed
    if has_next is None:
        while True:
            yield acc
            acc = fn(acc)
    while has_next(acc):
        yield acc
        acc = fn(acc)


class IterateSource(IterableSource):
    """Emits ``seed``, ``fn(seed)``, ``fn(fn(seed))`` ... (Pekko's ``Source.iterate``); with
    ``has_next`` it completes before the first value for which ``has_next(value)`` is false.

    **Emits when** downstream pulls. **Completes when** ``has_next`` is false for the next value
    (never without ``has_next``). **Fails when** ``fn`` or ``has_next`` raises."""

    def __init__(self, seed: Any, fn: Callable[[Any], Any], has_next: Optional[Callable[[Any], bool]] = None):
        if seed is None:
            raise ValueError("Source.iterate: argument 'seed' must not be None (it is emitted)")
        require_callable("Source.iterate", "fn", fn)
        if has_next is not None:
            require_callable("Source.iterate", "has_next", has_next)
        super().__init__(lambda: _iterated(seed, has_next, fn), name="iterate", factory=True)


class MaybeSource(SourceStage):
    """Materializes a ``concurrent.futures.Future`` (Pekko's ``Promise[Option[T]]``): completing it with a
    value emits that value and completes; with ``None`` completes without an element; failing it fails
    the stream. If downstream cancels first the future is completed with ``None``; if the stream is torn
    down before, it fails with ``AbruptStageTerminationError``.

    **Emits when** the future has a value and downstream pulls. **Completes when** the value was
    emitted or the future completed with ``None``. **Fails when** the future fails."""

    def __init__(self):
        super().__init__("maybe")

    def create_logic_and_materialized_value(self, attributes):
        promise = new_promise()
        return _MaybeLogic(self, promise), promise


_NOTHING = object()


class _MaybeLogic(_SourceLogic):
    def __init__(self, stage, promise: Future):
        super().__init__(stage)
        self.promise = promise
        self.early = _NOTHING

    def pre_start(self):
        cb = self.get_async_callback(self._done)
        self.promise.add_done_callback(cb.invoke)

    def _done(self, f: Future) -> None:
        if f.cancelled():
            self.complete_stage()
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
            self.early = value

    def on_pull(self):
        if self.early is not _NOTHING:
            self.push(self.out, self.early)
            self.complete_stage()

    def on_downstream_finish(self, cause):
        complete_promise(self.promise, None)
        self.complete_stage()

    def post_stop(self):
        if not self.promise.done():
            from .base import fail_promise

            fail_promise(self.promise, abrupt_termination(self))
