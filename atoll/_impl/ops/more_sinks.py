"""More sinks: count, exists, forall, none, take_last (Pekko's ``Sink.count``, ``exists``, ``forall``, ``none``,
``takeLast``).

All have chunk forms (their demand is unbounded); ``exists``/``forall``/``none`` cancel upstream as soon
as the answer is known, as Pekko's (a ``foldWhile`` into ``Sink.head``).
"""
from __future__ import annotations

from collections import deque
from typing import Any, Callable

from ...stage.supervision import Supervision, decide
from .base import SinkStage, complete_promise, decider_of, new_promise, require_callable
from .sinks import _ChunkSinkLogic


class CountSink(SinkStage):
    """Counts the elements: ``Future[int]`` (Pekko's ``Sink.count``).

    **Backpressures** never. **Completes** its future with the count when upstream completes (0 for an
    empty stream); fails it with upstream's failure. **Cancels** never."""

    def __init__(self):
        super().__init__("count")

    def create_logic_and_materialized_value(self, attributes):
        promise = new_promise()
        return _CountLogic(self, promise), promise


class _CountLogic(_ChunkSinkLogic):
    def __init__(self, stage, promise):
        super().__init__(stage, promise)
        self.n = 0

    def on_push(self):
        self.grab(self.in_)
        self.n += 1
        self.pull(self.in_)

    def on_push_chunk(self):
        self.n += len(self.grab(self.in_))
        self._pull_more()

    def result(self):
        return self.n

    def save_to_snapshot(self):
        return self.n

    def restore_from_snapshot(self, state) -> None:
        self.n = state


class _PredicateSink(SinkStage):
    """exists / forall / none: the answer is ``answer`` once ``bool(pred(x)) == trigger`` for an element;
    for an empty stream (or no such element) it is ``not answer``."""

    def __init__(self, name: str, pred: Callable[[Any], bool], trigger: bool, answer: bool):
        require_callable(f"Sink.{name}", "pred", pred)
        super().__init__(name)
        self.pred = pred
        self.trigger = trigger
        self.answer = answer

    def create_logic_and_materialized_value(self, attributes):
        promise = new_promise()
        return _PredicateLogic(self, promise, decider_of(attributes)), promise


class ExistsSink(_PredicateSink):
    """``Future[bool]``: True as soon as ``pred`` holds for an element (then upstream is cancelled);
    False when upstream completes before (also for an empty stream). Pekko's ``Sink.exists``.

    **Backpressures when** ``pred`` is running. **Completes** its future as said; fails it with
    upstream's failure or with what ``pred`` raised. **Cancels when** ``pred`` held, or raised and the
    supervision strategy says Stop (Resume and Restart skip the element)."""

    def __init__(self, pred: Callable[[Any], bool]):
        super().__init__("exists", pred, True, True)


class ForallSink(_PredicateSink):
    """``Future[bool]``: False as soon as ``pred`` fails for an element (then upstream is cancelled);
    True when upstream completes before (also for an empty stream). Pekko's ``Sink.forall``.

    **Backpressures when** ``pred`` is running. **Completes** its future as said; fails it with
    upstream's failure or with what ``pred`` raised. **Cancels when** ``pred`` was false, or raised and
    the supervision strategy says Stop (Resume and Restart skip the element)."""

    def __init__(self, pred: Callable[[Any], bool]):
        super().__init__("forall", pred, False, False)


class NoneSink(_PredicateSink):
    """``Future[bool]``: False as soon as ``pred`` holds for an element (then upstream is cancelled);
    True when upstream completes before (also for an empty stream). Pekko's ``Sink.none``.

    **Backpressures when** ``pred`` is running. **Completes** its future as said; fails it with
    upstream's failure or with what ``pred`` raised. **Cancels when** ``pred`` held, or raised and the
    supervision strategy says Stop (Resume and Restart skip the element)."""

    def __init__(self, pred: Callable[[Any], bool]):
        super().__init__("none", pred, True, False)


class _PredicateLogic(_ChunkSinkLogic):
    stateless = True  # it completes at the first element that decides
    def __init__(self, stage: _PredicateSink, promise, decider):
        super().__init__(stage, promise)
        self.pred = stage.pred
        self.trigger = stage.trigger
        self.answer = stage.answer
        self.decider = decider

    def _decided(self) -> None:
        complete_promise(self.promise, self.answer)
        self.complete_stage()

    def _supervise(self, exc: BaseException) -> bool:
        if decide(self.decider, exc) == Supervision.STOP:
            self._fail_with(exc)
            return False
        return True

    def on_push(self):
        try:
            hit = bool(self.pred(self.grab(self.in_))) == self.trigger
        except Exception as e:  # noqa: BLE001
            if self._supervise(e):
                self.pull(self.in_)
            return
        if hit:
            self._decided()
        else:
            self.pull(self.in_)

    def on_push_chunk(self):
        pred, trigger = self.pred, self.trigger
        it = iter(self.grab(self.in_))
        while True:
            try:
                for x in it:
                    if bool(pred(x)) == trigger:
                        self._decided()
                        return
                break
            except Exception as e:  # noqa: BLE001 - supervised at its element, the rest goes on
                if not self._supervise(e):
                    return
        self._pull_more()

    def result(self):
        return not self.answer


class TakeLastSink(SinkStage):
    """``Future[list]`` of the last ``n`` elements (fewer if the stream is shorter, ``[]`` if empty).
    Pekko's ``Sink.takeLast``.

    **Backpressures** never. **Completes** its future when upstream completes; fails it with upstream's
    failure. **Cancels** never."""

    def __init__(self, n: int):
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"Sink.take_last: n must be an int, got {n!r}")
        if n <= 0:
            raise ValueError(f"Sink.take_last: n must be > 0, got {n}")
        super().__init__("take_last")
        self.n = n

    def create_logic_and_materialized_value(self, attributes):
        promise = new_promise()
        return _TakeLastSinkLogic(self, promise), promise


class _TakeLastSinkLogic(_ChunkSinkLogic):
    def __init__(self, stage: TakeLastSink, promise):
        super().__init__(stage, promise)
        self.buf = deque(maxlen=stage.n)

    def on_push(self):
        self.buf.append(self.grab(self.in_))
        self.pull(self.in_)

    def on_push_chunk(self):
        self.buf.extend(self.grab(self.in_))
        self._pull_more()

    def result(self):
        return list(self.buf)

    def save_to_snapshot(self):
        return list(self.buf)

    def restore_from_snapshot(self, state) -> None:
        self.buf = deque(state, maxlen=self.buf.maxlen)


__all__ = ["CountSink", "ExistsSink", "ForallSink", "NoneSink", "TakeLastSink"]
