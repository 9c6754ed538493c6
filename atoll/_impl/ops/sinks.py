"""Sink operators: where elements end up (Pekko's ``Sink`` factories).

Every result-bearing sink materializes a ``concurrent.futures.Future`` that completes when the stream
completes and fails with the stream's original exception when it fails; if the sink is torn down
before either, it fails with ``AbruptStageTerminationError``.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Optional

from ...errors import NoSuchElementError, abrupt_termination
from ...markers import Done, NotUsed
from ...stage.handlers import InHandler
from ...stage.chunk_budget import ChunkBudget, now
from ...stage.logic import GraphStageLogic
from ...stage._connection import EMPTY, IN_READY, PULLING
from ...stage._port_calls import fusable, install_on_push
from ...stage.supervision import Supervision, decide
from .base import SinkStage, complete_promise, decider_of, fail_promise, new_promise, require_callable, snapshot_copy

log = logging.getLogger("atoll.sink")


class _PromiseSinkLogic(GraphStageLogic, InHandler):
    """A sink that requests everything and completes a promise at the end."""

    def __init__(self, stage: SinkStage, promise):
        super().__init__(stage.shape)
        self.in_ = stage.in_
        self.promise = promise
        self.set_handler(stage.in_, self)

    def pre_start(self):
        self.pull(self.in_)

    def on_upstream_failure(self, exc):
        fail_promise(self.promise, exc)
        self.fail_stage(exc)

    def post_stop(self):
        if not self.promise.done():
            fail_promise(self.promise, abrupt_termination(self))


class _ChunkSinkLogic(_PromiseSinkLogic):
    """A promise sink with a chunk form: it asks for ``chunk_size`` elements per pull (its demand is
    unbounded) and handles each chunk with ``on_push_chunk``; ``result()`` is the promise's value."""

    budget = None

    def chunk_capable(self) -> bool:
        return True

    def enable_chunks(self, chunk_size: int) -> None:
        self.budget = ChunkBudget(chunk_size)
        self.set_handler(self.in_, InHandler(on_push=self._timed_push_chunk, on_upstream_finish=self.on_upstream_finish,
                                             on_upstream_failure=self.on_upstream_failure))

    def pre_start(self):
        if self.budget is not None:
            self._in_conns[0].demand = self.budget.size
        self.pull(self.in_)

    def _timed_push_chunk(self):
        slot = self._in_conns[0].slot
        n = len(slot) if type(slot) is list else 1
        t0 = now()
        self.on_push_chunk()
        self.budget.update(n, now() - t0)

    def _pull_more(self) -> None:
        self._in_conns[0].demand = self.budget.size
        self.pull(self.in_)

    def result(self) -> Any:
        raise TypeError("subclass must implement result")

    def on_upstream_finish(self):
        complete_promise(self.promise, self.result())
        self.complete_stage()

    def _fail_with(self, exc: BaseException) -> None:
        fail_promise(self.promise, exc)
        self.fail_stage(exc)


class SeqSink(SinkStage):
    """Collects every element into a list: ``Future[list]`` (a new list per materialization).

    **Backpressures** never. **Completes** its future when upstream completes; fails it with
    upstream's failure. **Cancels** never."""

    def __init__(self):
        super().__init__("seq")

    def create_logic_and_materialized_value(self, attributes):
        promise = new_promise()
        return _SeqLogic(self, promise), promise


class _SeqLogic(_ChunkSinkLogic):
    def __init__(self, stage, promise):
        super().__init__(stage, promise)
        self.buf: list = []

    def on_push(self):
        self.buf.append(self.grab(self.in_))
        self.pull(self.in_)

    def on_push_chunk(self):
        self.buf.extend(self.grab(self.in_))
        self._pull_more()

    def result(self):
        return self.buf

    def save_to_snapshot(self):
        return list(self.buf)

    def restore_from_snapshot(self, state) -> None:
        self.buf = list(state)


class IgnoreSink(SinkStage):
    """Consumes and drops every element: ``Future[Done]``.

    **Backpressures** never. **Completes** its future when upstream completes; fails it with
    upstream's failure. **Cancels** never."""

    def __init__(self):
        super().__init__("ignore")

    def create_logic_and_materialized_value(self, attributes):
        promise = new_promise()
        return _IgnoreLogic(self, promise), promise


class _IgnoreLogic(_ChunkSinkLogic):
    stateless = True
    def on_push(self):
        self.grab(self.in_)
        self.pull(self.in_)

    def on_push_chunk(self):
        self.grab(self.in_)
        self._pull_more()

    def result(self):
        return Done


class ForeachSink(SinkStage):
    """Calls ``fn(elem)`` for every element: ``Future[Done]``.

    **Backpressures when** ``fn`` is running (it runs synchronously, one element at a time).
    **Completes** its future when upstream completes; fails it with upstream's failure or with what
    ``fn`` raised (Supervision: Resume and Restart skip the element). **Cancels when** ``fn`` raised
    and the supervision strategy says Stop.

    **Checkpoints: at-least-once.** The sink has no state of its own and ``fn``'s effects cannot be
    undone: every element is passed to ``fn``, none is lost, but after a restore (``restore_from`` or an
    automatic recovery) ``fn`` is called again for the elements it had seen after the restored
    checkpoint's cut and before the failure or stop (each in stream order, once per attempt). Elements
    before the cut are not passed again, so a ``stop_with_checkpoint`` followed by a restore repeats
    nothing. The future completes once, with ``Done``, in the attempt that reaches the end (a failed
    attempt's future is the same future, carried over). For exactly-once effects make ``fn``
    idempotent (key its writes by the element) or use a two-phase-commit sink (``Sink.to_parquet``,
    ``Sink.to_spark``, ``Sink.to_spark_stream``). ``Sink.foreach_async`` behaves the same: a checkpoint
    waits for the calls in flight, the calls started after its cut run again after a restore."""

    def __init__(self, fn: Callable[[Any], Any]):
        require_callable("Sink.foreach", "fn", fn)
        super().__init__("foreach")
        self.fn = fn

    def create_logic_and_materialized_value(self, attributes):
        promise = new_promise()
        return _ForeachLogic(self, promise, decider_of(attributes)), promise


class _ForeachLogic(_ChunkSinkLogic):
    """With checkpoints, ``fn``'s effects are at-least-once (see ``ForeachSink``): stateless, since a cut
    falls between interpreter events, so a chunk is either wholly before it or wholly after it."""

    stateless = True
    def __init__(self, stage, promise, decider):
        super().__init__(stage, promise)
        self.fn = stage.fn
        self.decider = decider

    def on_push(self):
        try:
            self.fn(self.grab(self.in_))
        except Exception as e:  # noqa: BLE001
            if not self._supervise(e):
                return
        self.pull(self.in_)

    def on_push_chunk(self):
        fn = self.fn
        it = iter(self.grab(self.in_))
        while True:
            try:
                for x in it:
                    fn(x)
                break
            except Exception as e:  # noqa: BLE001 - supervised at its element, the rest goes on
                if not self._supervise(e):
                    return
        self._pull_more()

    def _supervise(self, exc: BaseException) -> bool:
        if decide(self.decider, exc) == Supervision.STOP:
            self._fail_with(exc)
            return False
        return True

    def result(self):
        return Done


class FoldSink(SinkStage):
    """Folds every element into ``fn(acc, elem)`` starting at ``zero``: ``Future[acc]``.

    **Backpressures when** ``fn`` is running. **Completes** its future with the accumulator when
    upstream completes (``zero`` for an empty stream); fails it with upstream's failure or with what
    ``fn`` raised. **Cancels when** ``fn`` raised and the supervision strategy says Stop (Resume
    skips the element, Restart resets the accumulator to ``zero``)."""

    def __init__(self, zero: Any, fn: Callable[[Any, Any], Any]):
        require_callable("Sink.fold", "fn", fn)
        super().__init__("fold")
        self.zero = zero
        self.fn = fn

    def create_logic_and_materialized_value(self, attributes):
        promise = new_promise()
        return _FoldLogic(self, promise, decider_of(attributes)), promise


class _FoldLogic(_ChunkSinkLogic):
    def __init__(self, stage, promise, decider):
        super().__init__(stage, promise)
        self.fn = stage.fn
        self.zero = stage.zero
        self.decider = decider
        self.acc = stage.zero

    def on_push(self):
        try:
            self.acc = self.fn(self.acc, self.grab(self.in_))
        except Exception as e:  # noqa: BLE001
            if not self._supervise(e):
                return
        self.pull(self.in_)

    def on_push_chunk(self):
        fn = self.fn
        it = iter(self.grab(self.in_))
        while True:
            acc = self.acc
            try:
                for x in it:
                    acc = fn(acc, x)
                self.acc = acc
                break
            except Exception as e:  # noqa: BLE001 - supervised at its element, the rest goes on
                self.acc = acc
                if not self._supervise(e):
                    return
        self._pull_more()

    def _supervise(self, exc: BaseException) -> bool:
        d = decide(self.decider, exc)
        if d == Supervision.STOP:
            self._fail_with(exc)
            return False
        if d == Supervision.RESTART:
            self.reset_state()
        return True

    def reset_state(self) -> None:
        self.acc = self.zero

    def _bind_fused_handlers(self, interpreter) -> None:
        conn = self._in_conns[0]
        fused = None
        if conn is not None and conn.in_handler is self and fusable(self, _FoldLogic, "on_push", self.grab, self.pull):
            fused = _fused_fold_on_push(self, interpreter, conn, self.in_, self.fn, self.grab, self.pull)
        install_on_push(self, conn, fused)

    def save_to_snapshot(self):
        return snapshot_copy(self.acc)

    def restore_from_snapshot(self, state) -> None:
        self.acc = state

    def result(self):
        return self.acc


def _fused_fold_on_push(logic, interpreter, conn, in_, fn, grab, pull):
    """``_FoldLogic.on_push`` with the plain case of its ``grab`` and ``pull`` inlined (the same checks as
    the port-call closures; every other case goes through them, so errors stay theirs)."""
    queue, enqueue = interpreter.queue, interpreter.enqueue
    empty, in_ready, pulling = EMPTY, IN_READY, PULLING

    def on_push():
        try:
            elem = conn.slot
            if elem is not empty and conn.state == in_ready:
                conn.slot = empty
            else:
                elem = grab(in_)
            logic.acc = fn(logic.acc, elem)
        except Exception as e:  # noqa: BLE001
            if not logic._supervise(e):
                return
        if conn.state == in_ready:
            conn.state = pulling
            if interpreter.chased is None and not queue:
                interpreter.chased = conn
            else:
                enqueue(conn)
        else:
            pull(in_)

    return on_push


class ReduceSink(SinkStage):
    """Like fold, seeded with the first element: ``Future[acc]``.

    **Backpressures when** ``fn`` is running. **Completes** its future when upstream completes;
    fails it with ``NoSuchElementError`` for an empty stream, with upstream's failure, or with what
    ``fn`` raised. **Cancels when** ``fn`` raised and the supervision strategy says Stop (Resume
    skips the element, Restart forgets the accumulator)."""

    def __init__(self, fn: Callable[[Any, Any], Any]):
        require_callable("Sink.reduce", "fn", fn)
        super().__init__("reduce")
        self.fn = fn

    def create_logic_and_materialized_value(self, attributes):
        promise = new_promise()
        fn = self.fn
        decider = decider_of(attributes)
        empty = object()

        class Logic(_PromiseSinkLogic):
            acc = empty

            def save_to_snapshot(self):
                return None if self.acc is empty else (snapshot_copy(self.acc),)

            def restore_from_snapshot(self, state) -> None:
                self.acc = empty if state is None else state[0]

            def on_push(self):
                elem = self.grab(self.in_)
                if self.acc is empty:
                    self.acc = elem
                else:
                    try:
                        self.acc = fn(self.acc, elem)
                    except Exception as e:  # noqa: BLE001
                        d = decide(decider, e)
                        if d == Supervision.STOP:
                            fail_promise(promise, e)
                            self.fail_stage(e)
                            return
                        if d == Supervision.RESTART:
                            self.acc = empty
                self.pull(self.in_)

            def on_upstream_finish(self):
                if self.acc is empty:
                    exc = NoSuchElementError("reduce over empty stream")
                    fail_promise(promise, exc)
                    self.fail_stage(exc)
                else:
                    complete_promise(promise, self.acc)
                    self.complete_stage()

        return Logic(self, promise), promise


class HeadSink(SinkStage):
    """The first element: ``Future``. Empty stream: ``NoSuchElementError("head of empty stream")``,
    or ``None`` for ``head_option``.

    **Backpressures** never. **Completes** its future with the first element, or when upstream
    completes; fails it with upstream's failure. **Cancels when** the first element arrived."""

    def __init__(self, optional: bool):
        super().__init__("head_option" if optional else "head")
        self.optional = optional

    def create_logic_and_materialized_value(self, attributes):
        promise = new_promise()
        optional = self.optional

        class Logic(_PromiseSinkLogic):
            stateless = True  # it completes with the first element

            def on_push(self):
                complete_promise(promise, self.grab(self.in_))
                self.complete_stage()

            def on_upstream_finish(self):
                if optional:
                    complete_promise(promise, None)
                else:
                    fail_promise(promise, NoSuchElementError("head of empty stream"))
                self.complete_stage()

        return Logic(self, promise), promise


class LastSink(SinkStage):
    """The last element: ``Future``. Empty stream: ``NoSuchElementError("last of empty stream")``, or
    ``None`` for ``last_option``.

    **Backpressures** never. **Completes** its future when upstream completes; fails it with
    upstream's failure. **Cancels** never."""

    def __init__(self, optional: bool):
        super().__init__("last_option" if optional else "last")
        self.optional = optional

    def create_logic_and_materialized_value(self, attributes):
        promise = new_promise()
        optional = self.optional
        nothing = object()

        class Logic(_PromiseSinkLogic):
            last = nothing

            def save_to_snapshot(self):
                return None if self.last is nothing else (self.last,)

            def restore_from_snapshot(self, state) -> None:
                self.last = nothing if state is None else state[0]

            def on_push(self):
                self.last = self.grab(self.in_)
                self.pull(self.in_)

            def on_upstream_finish(self):
                if self.last is not nothing:
                    complete_promise(promise, self.last)
                elif optional:
                    complete_promise(promise, None)
                else:
                    fail_promise(promise, NoSuchElementError("last of empty stream"))
                self.complete_stage()

        return Logic(self, promise), promise


class CancelledSink(SinkStage):
    """Cancels upstream immediately; materializes ``NotUsed``.

    **Cancels when** the stream starts."""

    def __init__(self):
        super().__init__("cancelled")

    def create_logic(self, attributes):
        stage = self

        class Logic(GraphStageLogic, InHandler):
            stateless = True

            def __init__(self):
                super().__init__(stage.shape)
                self.set_handler(stage.in_, self)

            def pre_start(self):
                self.cancel(stage.in_)

            def on_push(self):  # pragma: no cover - cancelled before any element
                pass

        return Logic()


class OnCompleteSink(SinkStage):
    """Consumes everything and calls ``fn(None)`` on completion or ``fn(exc)`` on failure (also
    ``fn(AbruptStageTerminationError)`` when the stage is torn down first), exactly once; materializes
    ``NotUsed``. What ``fn`` raises is logged and ignored.

    **Backpressures** never. **Cancels** never."""

    def __init__(self, fn: Callable[[Optional[BaseException]], Any]):
        require_callable("Sink.on_complete", "fn", fn)
        super().__init__("on_complete")
        self.fn = fn

    def create_logic(self, attributes):
        stage = self

        class Logic(GraphStageLogic, InHandler):
            called = False  # set only when the stage ends: a live stage has nothing to save
            stateless = True

            def __init__(self):
                super().__init__(stage.shape)
                self.set_handler(stage.in_, self)

            def _call(self, arg):
                if not self.called:
                    self.called = True
                    try:
                        stage.fn(arg)
                    except Exception as e:  # noqa: BLE001 - a broken callback must not break the island
                        log.error("Sink.on_complete callback raised %r", e, exc_info=e)

            def pre_start(self):
                self.pull(stage.in_)

            def on_push(self):
                self.grab(stage.in_)
                self.pull(stage.in_)

            def on_upstream_finish(self):
                self._call(None)
                self.complete_stage()

            def on_upstream_failure(self, exc):
                self._call(exc)
                self.fail_stage(exc)

            def post_stop(self):
                self._call(abrupt_termination(self))

        return Logic()
