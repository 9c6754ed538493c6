"""Aggregating operators: scan, fold, reduce, grouped, sliding."""
from __future__ import annotations

from typing import Any, Callable

from ..errors import NoSuchElementError
from ..stage.handlers import InOutHandler
from ..stage.supervision import Supervision, decide
from .base import FlowLogic, FlowStage, decider_of, require_callable, require_int


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
        stage = self
        decider = decider_of(attributes)

        class Logic(FlowLogic):
            def __init__(self):
                super().__init__(stage)
                self.acc = stage.zero
                # until zero is out: pushes cannot happen, completion must still flush zero
                self.set_handler(stage.in_, InOutHandler(on_push=lambda: None, on_upstream_finish=self._finish_before_zero))
                self.set_handler(stage.out, InOutHandler(on_pull=self._push_zero))

            def _finish_before_zero(self):
                def pull_then_done():
                    self.push(self.out, self.acc)
                    self.complete_stage()

                self.set_handler(self.out, InOutHandler(on_pull=pull_then_done))

            def _push_zero(self):
                self.push(self.out, self.acc)
                self.set_handler(self.in_, self)
                self.set_handler(self.out, self)

            def on_push(self):
                try:
                    self.acc = stage.fn(self.acc, self.grab(self.in_))
                    self.push(self.out, self.acc)
                except Exception as e:  # noqa: BLE001
                    d = decide(decider, e)
                    if d == Supervision.STOP:
                        self.fail_stage(e)
                    elif d == Supervision.RESUME:
                        if not self.has_been_pulled(self.in_):
                            self.pull(self.in_)
                    else:
                        self.acc = stage.zero
                        self.push(self.out, self.acc)

        return Logic()


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
        stage = self
        decider = decider_of(attributes)

        class Logic(FlowLogic):
            acc = stage.zero

            def on_push(self):
                elem = self.grab(self.in_)
                try:
                    self.acc = stage.fn(self.acc, elem)
                except Exception as e:  # noqa: BLE001
                    d = decide(decider, e)
                    if d == Supervision.STOP:
                        self.fail_stage(e)
                        return
                    if d == Supervision.RESTART:
                        self.acc = stage.zero
                if not self.is_closed(self.in_):
                    self.pull(self.in_)

            def on_pull(self):
                if self.is_closed(self.in_):
                    self.push(self.out, self.acc)
                    self.complete_stage()
                elif not self.has_been_pulled(self.in_):
                    self.pull(self.in_)

            def on_upstream_finish(self):
                if self.is_available(self.out):
                    self.push(self.out, self.acc)
                    self.complete_stage()

        return Logic(self)


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
        stage = self
        decider = decider_of(attributes)
        empty = object()

        class Logic(FlowLogic):
            acc = empty

            def on_push(self):
                elem = self.grab(self.in_)
                if self.acc is empty:
                    self.acc = elem
                else:
                    try:
                        self.acc = stage.fn(self.acc, elem)
                    except Exception as e:  # noqa: BLE001
                        d = decide(decider, e)
                        if d == Supervision.STOP:
                            self.fail_stage(e)
                            return
                        if d == Supervision.RESTART:
                            self.acc = empty
                self.pull(self.in_)

            def on_upstream_finish(self):
                if self.acc is empty:
                    self.fail_stage(NoSuchElementError("reduce over empty stream"))
                else:
                    self.emit(self.out, self.acc, self.complete_stage)

        return Logic(self)


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
        n = self.n

        class Logic(FlowLogic):
            buf: list

            def pre_start(self):
                self.buf = []

            def on_push(self):
                buf = self.buf
                buf.append(self.grab(self.in_))
                if len(buf) == n:
                    self.buf = []
                    self.push(self.out, buf)
                else:
                    self.pull(self.in_)

            def on_upstream_finish(self):
                if self.buf:
                    self.emit(self.out, self.buf, self.complete_stage)
                else:
                    self.complete_stage()

        return Logic(self)


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
        n, step = self.n, self.step

        class Logic(FlowLogic):
            buf: list

            def pre_start(self):
                self.buf = []

            def on_push(self):
                buf = self.buf
                buf.append(self.grab(self.in_))
                size = len(buf)
                if size < n:
                    self.pull(self.in_)
                elif size == n:
                    self.push(self.out, list(buf))
                elif step <= n:
                    del buf[:step]
                    if len(buf) == n:
                        self.push(self.out, list(buf))
                    else:
                        self.pull(self.in_)
                else:
                    if size == step:
                        del buf[:step]
                    self.pull(self.in_)

            def on_upstream_finish(self):
                if 0 < len(self.buf) < n:
                    self.emit(self.out, list(self.buf), self.complete_stage)
                else:
                    self.complete_stage()

        return Logic(self)
