"""More sources: cycle, iterate, maybe (Pekko's ``Source.cycle``, ``Source.iterate``, ``Source.maybe``)."""
from __future__ import annotations

from concurrent.futures import Future, InvalidStateError
from typing import Any, Callable, Iterable, Optional

from ...errors import abrupt_termination
from .base import SourceStage, complete_promise, fail_promise, new_promise, require_callable
from .sources import IterableSource, _FutureValueLogic


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
        # fn is pure (as every function given to a built-in): a restore replays by skipping the values emitted
        super().__init__(lambda: _iterated(seed, has_next, fn), name="iterate", factory=True, replay="skip")


class MaybePromise:
    """The materialized value of ``Source.maybe()`` (Pekko's ``Promise[Option[T]]``), with the
    ``concurrent.futures.Future`` API for completing and reading it: ``set_result(x)`` emits ``x`` and
    completes the stream, ``set_result(None)`` completes it empty, ``set_exception(e)`` fails it
    (both raise ``InvalidStateError`` once it is done); ``try_complete(x)`` / ``try_fail(e)`` return
    whether they completed it (Pekko's ``trySuccess``/``tryFailure``). Not a ``Future`` itself, so that on
    Ray the driver gets a handle whose calls reach the stage in its island (a Future would travel as a
    read-only copy of its outcome)."""

    __slots__ = ("_future",)

    def __init__(self, future: Optional[Future] = None):
        self._future = future if future is not None else new_promise()

    def set_result(self, value: Any) -> None:
        self._future.set_result(value)

    def set_exception(self, exc: BaseException) -> None:
        self._future.set_exception(exc)

    def try_complete(self, value: Any) -> bool:
        try:
            self._future.set_result(value)
        except InvalidStateError:
            return False
        return True

    def try_fail(self, exc: BaseException) -> bool:
        try:
            self._future.set_exception(exc)
        except InvalidStateError:
            return False
        return True

    def done(self) -> bool:
        return self._future.done()

    def result(self, timeout: Optional[float] = None) -> Any:
        return self._future.result(timeout)

    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        return self._future.exception(timeout)

    def __atoll_detach__(self) -> "MaybePromise":
        """The driver's copy once the island ended: it keeps the outcome; completing it reaches nothing."""
        f = new_promise()
        if self._future.done():
            exc = self._future.exception()
            if exc is None:
                f.set_result(self._future.result())
            else:
                f.set_exception(exc)
        return MaybePromise(f)

    def __reduce__(self):
        return (_restore_maybe, (self.__atoll_detach__()._future_state(),))

    def _future_state(self):
        f = self._future
        if not f.done():
            return ("pending",)
        exc = f.exception()
        return ("failed", exc) if exc is not None else ("done", f.result())

    def __repr__(self):
        return f"MaybePromise({self._future_state()[0]})"


def _restore_maybe(state) -> MaybePromise:
    p = MaybePromise()
    if state[0] == "done":
        p._future.set_result(state[1])
    elif state[0] == "failed":
        p._future.set_exception(state[1])
    return p


class MaybeSource(SourceStage):
    """Materializes a ``MaybePromise`` (Pekko's ``Promise[Option[T]]``): completing it with a value emits
    that value and completes; with ``None`` completes without an element; failing it fails the stream.
    If downstream cancels first the promise is completed with ``None``; if the stream is torn down before,
    it fails with ``AbruptStageTerminationError``.

    **Emits when** the promise has a value and downstream pulls. **Completes when** the value was
    emitted or the promise completed with ``None``. **Fails when** the promise fails."""

    def __init__(self):
        super().__init__("maybe")

    def create_logic_and_materialized_value(self, attributes):
        promise = MaybePromise()
        return _MaybeLogic(self, promise._future), promise


class _MaybeLogic(_FutureValueLogic):
    checkpoint_hint = "the value completed from outside cannot be replayed after a restore; use Source.single"

    def __init__(self, stage, promise: Future):
        super().__init__(stage, promise)
        self.promise = promise

    def on_downstream_finish(self, cause):
        complete_promise(self.promise, None)
        self.complete_stage()

    def post_stop(self):
        if not self.promise.done():
            fail_promise(self.promise, abrupt_termination(self))
