"""Operators that let through a part of the stream: take, take_while, drop, drop_while, limit.

Each of take, take_while, drop and drop_while has a chunk form (``atoll._impl.islands.chunking``) that
keeps the per-element semantics: take asks upstream for at most ``min(demand, remaining)``
elements, drop asks for what downstream wants plus what is still to be dropped, the predicates are
supervised per element.
"""
from __future__ import annotations

from typing import Any, Callable

from ...errors import StreamLimitReachedError
from ...stage.supervision import supervise, supervise_chunk
from .base import ChunkFlow, FlowLogic, FlowStage, decider_of, require_callable, require_int


# ---------------------------------------------------------------------------------------------- take
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
        return _TakeLogic(self)


class _TakeLogic(ChunkFlow, FlowLogic):
    def __init__(self, stage: Take):
        super().__init__(stage)
        self.n = stage.n
        self.left = stage.n

    def on_push(self):
        if self.left > 0:
            self.push(self.out, self.grab(self.in_))
            self.left -= 1
        if self.left <= 0:
            self.complete_stage()

    def pre_start(self):
        if self.left <= 0 and self.n > 0:  # restored with nothing left to take
            self.complete_stage()

    def on_pull(self):
        if self.left > 0:
            self.pull(self.in_)
        else:
            self.complete_stage()

    def on_pull_chunk(self):
        left = self.left
        if left > 0:
            d = self._out_conns[0].demand
            self.pull_chunk(self.in_, d if d < left else left)
        else:
            self.complete_stage()

    def on_push_chunk(self):
        chunk = self.grab(self.in_)  # at most min(demand, left) elements: it goes on as it is
        self.left -= len(chunk)
        self.push(self.out, chunk)
        if self.left <= 0:
            self.complete_stage()

    def reset_state(self) -> None:
        self.left = self.n

    def save_to_snapshot(self):
        return self.left

    def restore_from_snapshot(self, state) -> None:
        self.left = state


# ---------------------------------------------------------------------------------------------- take_while
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
        return _TakeWhileLogic(self, decider_of(attributes))


class _TakeWhileLogic(ChunkFlow, FlowLogic):
    stateless = True  # once the predicate fails the stage completes: a live one has seen only passing elements

    def __init__(self, stage: TakeWhile, decider):
        super().__init__(stage)
        self.pred = stage.pred
        self.inclusive = stage.inclusive
        self.decider = decider

    def on_push(self):
        try:
            elem = self.grab(self.in_)
            if self.pred(elem):
                self.push(self.out, elem)
            else:
                if self.inclusive:
                    self.push(self.out, elem)
                self.complete_stage()
        except Exception as e:  # noqa: BLE001
            if supervise(self, self.decider, e):
                self.pull(self.in_)

    def on_push_chunk(self):
        pred = self.pred
        chunk = self.grab(self.in_)
        res: list = []
        i, n = 0, len(chunk)
        while i < n:
            x = chunk[i]
            i += 1
            try:
                ok = pred(x)
            except Exception as e:  # noqa: BLE001
                if not supervise_chunk(self, e, res):
                    return
                continue
            if ok:
                res.append(x)
            else:
                if self.inclusive:
                    res.append(x)
                if res:
                    self.push(self.out, res)
                self.complete_stage()
                return
        if res:
            self.push(self.out, res if len(res) < n else chunk)
        else:
            self.pull_again()


# ---------------------------------------------------------------------------------------------- drop
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
        return _DropLogic(self)


class _DropLogic(ChunkFlow, FlowLogic):
    pulls_ahead = True  # chunk regions: asks for the elements it drops on top of the demand

    def __init__(self, stage: Drop):
        super().__init__(stage)
        self.n = stage.n
        self.left = stage.n

    def on_push(self):
        if self.left > 0:
            self.left -= 1
            self.pull(self.in_)
        else:
            self.push(self.out, self.grab(self.in_))

    def on_pull_chunk(self):
        # the element form pulls once per element it drops: ask for those plus downstream's demand
        self.pull_chunk(self.in_, self._out_conns[0].demand + self.left)

    def pull_again(self):
        self.on_pull_chunk()

    def on_push_chunk(self):
        chunk = self.grab(self.in_)
        left = self.left
        if left <= 0:
            self.push(self.out, chunk)
        elif len(chunk) <= left:
            self.left = left - len(chunk)
            self.pull_again()
        else:
            self.left = 0
            self.push(self.out, chunk[left:])

    def reset_state(self) -> None:
        self.left = self.n

    def save_to_snapshot(self):
        return self.left

    def restore_from_snapshot(self, state) -> None:
        self.left = state


# ---------------------------------------------------------------------------------------------- drop_while
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
        return _DropWhileLogic(self, decider_of(attributes))


class _DropWhileLogic(ChunkFlow, FlowLogic):
    def __init__(self, stage: DropWhile, decider):
        super().__init__(stage)
        self.pred = stage.pred
        self.decider = decider
        self.dropping = True

    def on_push(self):
        elem = self.grab(self.in_)
        if not self.dropping:
            self.push(self.out, elem)
            return
        try:
            if self.pred(elem):
                self.pull(self.in_)
            else:
                self.dropping = False
                self.push(self.out, elem)
        except Exception as e:  # noqa: BLE001
            if supervise(self, self.decider, e):
                self.pull(self.in_)

    def on_push_chunk(self):
        chunk = self.grab(self.in_)
        if not self.dropping:
            self.push(self.out, chunk)
            return
        pred = self.pred
        for i, x in enumerate(chunk):
            try:
                if pred(x):
                    continue
            except Exception as e:  # noqa: BLE001
                if not supervise(self, self.decider, e):
                    return
                continue
            self.dropping = False
            self.push(self.out, chunk[i:] if i else chunk)
            return
        self.pull_again()

    def reset_state(self) -> None:
        self.dropping = True

    def save_to_snapshot(self):
        return self.dropping

    def restore_from_snapshot(self, state) -> None:
        self.dropping = state


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
        return _LimitLogic(self, decider_of(attributes))


class _LimitLogic(FlowLogic):
    def __init__(self, stage: Limit, decider):
        super().__init__(stage)
        self.n = stage.n
        self.cost = stage.cost
        self.decider = decider
        self.left = stage.n

    def on_push(self):
        try:
            elem = self.grab(self.in_)
            self.left -= 1 if self.cost is None else self.cost(elem)
            if self.left >= 0:
                self.push(self.out, elem)
            else:
                self.fail_stage(StreamLimitReachedError(self.n))
        except Exception as e:  # noqa: BLE001
            if supervise(self, self.decider, e) and not self.has_been_pulled(self.in_):
                self.pull(self.in_)

    def reset_state(self) -> None:
        self.left = self.n

    def save_to_snapshot(self):
        return self.left

    def restore_from_snapshot(self, state) -> None:
        self.left = state
