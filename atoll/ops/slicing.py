"""Operators that let through a part of the stream: take, take_while, drop, drop_while, limit."""
from __future__ import annotations

from typing import Any, Callable

from ..errors import StreamLimitReachedError
from ..stage.handlers import InHandler
from ..stage.supervision import Supervision, decide
from .base import FlowLogic, FlowStage, decider_of, require_callable, require_int


class Take(FlowStage):
    """Passes on the first ``n`` elements, then completes (``take(0)`` completes on the first pull
    without pulling upstream).

    **Emits when** the count is not reached yet and an element arrives. **Backpressures when**
    downstream backpressures. **Completes when** ``n`` elements were passed or upstream completes.
    **Cancels when** the count is reached or downstream cancels."""

    def __init__(self, n: int):
        require_int("take", "n", n, 0)
        super().__init__("take")
        self.n = n

    def create_logic(self, attributes):
        n = self.n

        class Logic(FlowLogic):
            left = n

            def on_push(self):
                if self.left > 0:
                    self.push(self.out, self.grab(self.in_))
                    self.left -= 1
                if self.left <= 0:
                    self.complete_stage()

            def on_pull(self):
                if self.left > 0:
                    self.pull(self.in_)
                else:
                    self.complete_stage()

        return Logic(self)


class TakeWhile(FlowStage):
    """Passes on elements while ``pred`` holds; with ``inclusive`` also the first failing one.

    **Emits when** the predicate holds (or for the first failing element when inclusive).
    **Backpressures when** downstream backpressures. **Completes when** the predicate fails or
    upstream completes. **Cancels when** the predicate fails or downstream cancels.
    Supervision: Resume/Restart skip the element."""

    def __init__(self, pred: Callable[[Any], bool], inclusive: bool = False):
        require_callable("take_while", "pred", pred)
        super().__init__("take_while")
        self.pred = pred
        self.inclusive = bool(inclusive)

    def create_logic(self, attributes):
        stage = self
        decider = decider_of(attributes)

        class Logic(FlowLogic):
            def on_push(self):
                try:
                    elem = self.grab(self.in_)
                    if stage.pred(elem):
                        self.push(self.out, elem)
                    else:
                        if stage.inclusive:
                            self.push(self.out, elem)
                        self.complete_stage()
                except Exception as e:  # noqa: BLE001
                    if decide(decider, e) == Supervision.STOP:
                        self.fail_stage(e)
                    else:
                        self.pull(self.in_)

        return Logic(self)


class Drop(FlowStage):
    """Skips the first ``n`` elements.

    **Emits when** the count was reached and an element arrives. **Backpressures when** the count was
    reached and downstream backpressures. **Completes when** upstream completes. **Cancels when**
    downstream cancels."""

    def __init__(self, n: int):
        require_int("drop", "n", n, 0)
        super().__init__("drop")
        self.n = n

    def create_logic(self, attributes):
        n = self.n

        class Logic(FlowLogic):
            left = n

            def on_push(self):
                if self.left > 0:
                    self.left -= 1
                    self.pull(self.in_)
                else:
                    self.push(self.out, self.grab(self.in_))

        return Logic(self)


class DropWhile(FlowStage):
    """Skips elements while ``pred`` holds, then passes everything on.

    **Emits when** the predicate failed once and an element arrives. **Backpressures when** the
    predicate failed once and downstream backpressures. **Completes when** upstream completes.
    **Cancels when** downstream cancels. Supervision: Resume/Restart skip the element."""

    def __init__(self, pred: Callable[[Any], bool]):
        require_callable("drop_while", "pred", pred)
        super().__init__("drop_while")
        self.pred = pred

    def create_logic(self, attributes):
        stage = self
        decider = decider_of(attributes)

        class Logic(FlowLogic):
            def on_push(self):
                try:
                    elem = self.grab(self.in_)
                    if stage.pred(elem):
                        self.pull(self.in_)
                    else:
                        self.push(self.out, elem)
                        self.set_handler(self.in_, InHandler(on_push=lambda: self.push(self.out, self.grab(self.in_))))
                except Exception as e:  # noqa: BLE001
                    if decide(decider, e) == Supervision.STOP:
                        self.fail_stage(e)
                    else:
                        self.pull(self.in_)

        return Logic(self)


class Limit(FlowStage):
    """Passes elements on but fails with ``StreamLimitReachedError`` once more than ``n`` arrive
    (with ``cost``, once their total cost exceeds ``n``).

    **Emits when** the limit is not exceeded. **Backpressures when** downstream backpressures.
    **Completes when** upstream completes. **Cancels when** the limit is exceeded or downstream
    cancels. Supervision (of ``cost``): Resume skips the element, Restart resets the count."""

    def __init__(self, n: int, cost: Callable[[Any], int] = None):
        op = "limit" if cost is None else "limit_weighted"
        require_int(op, "n", n, 0)
        if cost is not None:
            require_callable(op, "cost", cost)
        super().__init__(op)
        self.n = n
        self.cost = cost

    def create_logic(self, attributes):
        stage = self
        decider = decider_of(attributes)

        class Logic(FlowLogic):
            left = stage.n

            def on_push(self):
                try:
                    elem = self.grab(self.in_)
                    self.left -= 1 if stage.cost is None else stage.cost(elem)
                    if self.left >= 0:
                        self.push(self.out, elem)
                    else:
                        self.fail_stage(StreamLimitReachedError(stage.n))
                except Exception as e:  # noqa: BLE001
                    d = decide(decider, e)
                    if d == Supervision.STOP:
                        self.fail_stage(e)
                        return
                    if d == Supervision.RESTART:
                        self.left = stage.n
                    if not self.has_been_pulled(self.in_):
                        self.pull(self.in_)

        return Logic(self)
