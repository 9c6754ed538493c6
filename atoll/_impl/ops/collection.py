"""Small collection operators: collect, fold_while, grouped_weighted, grouped_adjacent_by, take_last.

``collect`` (stateless) and ``fold_while`` and ``take_last`` have chunk forms keeping the per-element
semantics; ``grouped_weighted`` and ``grouped_adjacent_by`` run element-wise (their cost and key
functions may fail in the middle of a chunk and the groups made before must go out first; the
element form does that exactly). The grouping operators hold elements back, so they hold the
control signals that arrived after them too (``_WindowLogic`` of ``aggregate``).
"""
from __future__ import annotations

from collections import deque
from typing import Any, Callable, Optional

from ...stage.supervision import Supervision, decide, supervise, supervise_chunk
from .aggregate import _FoldFlowLogic, _WindowLogic
from .base import FlowLogic, FlowStage, decider_of, require_callable, require_int
from .combined_timestamps import later
from .forms import MAP_CONCAT, StatelessForm
from .transform import _StatelessChunkForm


# ---------------------------------------------------------------------------------------------- collect
class Collect(FlowStage):
    """Pekko's ``collect(pf)``, with a Python function standing for the partial function: ``fn(elem)``
    returning ``None`` means "not defined here" and drops the element; any other result is emitted.

    **Emits when** ``fn`` returns a value for an element. **Backpressures when** ``fn`` returned a
    value and downstream backpressures. **Completes when** upstream completes. **Cancels when**
    downstream cancels. Supervision: Resume and Restart drop the element whose ``fn`` raised."""

    def __init__(self, fn: Callable[[Any], Any]):
        require_callable("collect", "fn", fn)
        super().__init__("collect")
        self.fn = fn

    def stateless_form(self) -> StatelessForm:
        fn = self.fn

        def expand(x):
            y = fn(x)
            return () if y is None else (y,)

        return StatelessForm(MAP_CONCAT, expand, name="collect")

    def create_logic(self, attributes):
        return _CollectLogic(self, decider_of(attributes))


class _CollectLogic(_StatelessChunkForm, FlowLogic):
    stateless = True
    def __init__(self, stage, decider):
        super().__init__(stage)
        self.fn = stage.fn
        self.decider = decider

    def chunk_timestamps(self) -> bool:
        return False  # event-time graphs run collect element-wise

    def on_push(self):
        try:
            y = self.fn(self.grab(self.in_))
        except Exception as e:  # noqa: BLE001
            if supervise(self, self.decider, e):
                self.pull(self.in_)
            return
        if y is None:
            self.pull(self.in_)
        else:
            self.push(self.out, y)

    def on_push_chunk(self):
        fn = self.fn
        it = iter(self.grab(self.in_))
        res: list = []
        ap = res.append
        while True:
            try:
                for x in it:
                    y = fn(x)
                    if y is not None:
                        ap(y)
                break
            except Exception as e:  # noqa: BLE001
                if not supervise_chunk(self, e, res):
                    return
        if res:
            self.push(self.out, res)
        else:
            self.pull_again()


# ---------------------------------------------------------------------------------------------- fold_while
class FoldWhile(FlowStage):
    """Like ``fold``, but completes as soon as ``pred(acc)`` is false after an element was folded
    (Pekko's ``foldWhile``): the accumulator is emitted then and upstream is cancelled.

    **Emits when** upstream completes, or the predicate is false for the accumulated value.
    **Backpressures when** downstream backpressures. **Completes when** upstream completes or the
    predicate is false. **Cancels when** downstream cancels or the predicate is false.
    Supervision (of ``fn`` and ``pred``): Resume skips the element; Restart resets to ``zero``."""

    def __init__(self, zero: Any, pred: Callable[[Any], bool], fn: Callable[[Any, Any], Any]):
        require_callable("fold_while", "pred", pred)
        require_callable("fold_while", "fn", fn)
        if zero is None:
            raise ValueError("fold_while: argument 'zero' must not be None (it may be emitted)")
        super().__init__("fold_while")
        self.zero = zero
        self.pred = pred
        self.fn = fn

    def create_logic(self, attributes):
        return _FoldWhileLogic(self, decider_of(attributes))


class _FoldWhileLogic(_FoldFlowLogic):
    def __init__(self, stage: FoldWhile, decider):
        super().__init__(stage, decider)
        self.pred = stage.pred

    def on_push(self):
        elem = self.grab(self.in_)
        try:
            self.acc = acc = self.fn(self.acc, elem)
            if not self.pred(acc):
                self._emit_result()
                return
        except Exception as e:  # noqa: BLE001
            if not supervise(self, self.decider, e):
                return
        if not self.is_closed(self.in_):
            self.pull(self.in_)

    def on_push_chunk(self):
        fn, pred = self.fn, self.pred
        acc = self.acc
        for x in self.grab(self.in_):
            try:
                acc = fn(acc, x)
                if not pred(acc):
                    self.acc = acc
                    self._emit_result()
                    return
            except Exception as e:  # noqa: BLE001
                self.acc = acc
                if not supervise(self, self.decider, e):
                    return
                acc = self.acc
        self.acc = acc
        if not self.is_closed(self.in_):
            self._pull_more()


# ---------------------------------------------------------------------------------------------- grouped_weighted
class _ElementWindowLogic(_WindowLogic):
    """A ``_WindowLogic`` run element-wise only (see the module docstring)."""

    def chunk_capable(self) -> bool:
        return False


class GroupedWeighted(FlowStage):
    """Groups elements until their summed ``cost`` reaches ``min_weight`` (Pekko's
    ``groupedWeighted``); the last group may weigh less. A negative cost fails the stream with
    ``ValueError("Negative weight [c] for element [e] is not allowed")``; what ``cost`` raises fails it.

    **Emits when** the accumulated weight reaches ``min_weight``, or upstream completed with
    elements held. **Backpressures when** a group is complete and downstream backpressures.
    **Completes when** upstream completes. **Cancels when** downstream cancels."""

    def __init__(self, min_weight: int, cost: Callable[[Any], int]):
        if isinstance(min_weight, bool) or not isinstance(min_weight, int):
            raise TypeError(f"grouped_weighted: min_weight must be an int, got {min_weight!r}")
        if min_weight <= 0:
            raise ValueError(f"grouped_weighted: min_weight must be > 0, got {min_weight}")
        require_callable("grouped_weighted", "cost", cost)
        super().__init__("grouped_weighted")
        self.min_weight = min_weight
        self.cost = cost

    def create_logic(self, attributes):
        return _GroupedWeightedLogic(self)


class _GroupedWeightedLogic(_ElementWindowLogic):
    def __init__(self, stage: GroupedWeighted):
        self.min_weight = stage.min_weight
        self.cost = stage.cost
        super().__init__(stage)

    def on_push(self):
        elem = self.grab(self.in_)
        try:
            c = self.cost(elem)
            if c < 0:
                raise ValueError(f"Negative weight [{c}] for element [{elem}] is not allowed")
        except Exception as e:  # noqa: BLE001 - not supervised in Pekko either
            self.fail_stage(e)
            return
        self.received += 1
        buf = self.buf
        buf.append(elem)
        self.left -= c
        if self.left <= 0:
            self.buf = []
            self.left = self.min_weight
            self.settled = self.received
            self.push(self.out, buf)
            self._release()
        else:
            self.pull(self.in_)

    def partial(self):
        return self.buf or None

    def reset_state(self) -> None:
        self.buf = []
        self.left = self.min_weight

    def window_state(self):
        return (list(self.buf), self.left)

    def restore_window_state(self, state) -> None:
        buf, self.left = state
        self.buf = list(buf)


# ---------------------------------------------------------------------------------------------- grouped_adjacent_by
_NO_KEY = object()
_UNBOUNDED = float("inf")


def _one(_elem) -> int:
    return 1


class GroupedAdjacentBy(FlowStage):
    """Groups adjacent elements with equal keys ``fn(elem)`` (Pekko's ``groupedAdjacentBy`` and, with
    ``max_weight``/``cost``, ``groupedAdjacentByWeighted``): a group is emitted when an element's key
    differs (``!=``) from the previous element's, or when adding the element would make the group
    weigh more than ``max_weight`` (an element weighing ``max_weight`` or more forms a group alone).
    A ``None`` key fails the stream with ``ValueError("Element key must not be null")``, a negative cost
    with ``ValueError("Negative weight [c] for element [e] is not allowed")``.

    **Emits when** the key function returns a different value than the previous element's, or the
    weight would exceed ``max_weight``. **Backpressures when** a group has been assembled and
    downstream backpressures. **Completes when** upstream completes (after the last groups).
    **Cancels when** downstream cancels. Supervision (of ``fn`` and ``cost``): Resume skips the
    element; Restart drops the group being assembled."""

    def __init__(self, fn: Callable[[Any], Any], max_weight: Optional[int] = None,
                 cost: Optional[Callable[[Any], int]] = None):
        name = "grouped_adjacent_by" if max_weight is None else "grouped_adjacent_by_weighted"
        require_callable(name, "fn", fn)
        if max_weight is not None:
            if isinstance(max_weight, bool) or not isinstance(max_weight, int):
                raise TypeError(f"{name}: max_weight must be an int, got {max_weight!r}")
            if max_weight <= 0:
                raise ValueError(f"{name}: max_weight must be > 0, got {max_weight}")
            require_callable(name, "cost", cost)
        elif cost is not None:
            raise ValueError(f"{name}: cost needs a max_weight")
        super().__init__(name)
        self.fn = fn
        self.max_weight = _UNBOUNDED if max_weight is None else max_weight
        self.cost = _one if cost is None else cost

    def create_logic(self, attributes):
        return _GroupedAdjacentByLogic(self, decider_of(attributes))


class _GroupedAdjacentByLogic(_ElementWindowLogic):
    """Port of Pekko's ``GroupedAdjacentByWeighted`` logic; ``pending`` is a finished group waiting
    for demand (at most one). ``settled`` is the stream index of the oldest element still held.
    Event time: a group carries the max timestamp of its elements (``buf_ts``, ``pending_ts``); the
    element that closes a group belongs to the next one, so the suffix rule of ``_WindowLogic`` does not
    apply."""

    pending_ts = None
    timed = False  # event time is on (checkpoints then save the groups' timestamps)

    def enable_event_time(self) -> None:
        FlowLogic.enable_event_time(self)  # plain stamped grab/push: groups are stamped here
        self.timed = True

    def stamp_state(self):
        return (self.buf_ts, self.pending_ts) if self.timed else None

    def restore_stamp_state(self, state) -> None:
        self.buf_ts, self.pending_ts = state

    def __init__(self, stage: GroupedAdjacentBy, decider):
        self.fn = stage.fn
        self.cost = stage.cost
        self.max_weight = stage.max_weight
        self.decider = decider
        self.pending = None
        self.pending_start = 0
        super().__init__(stage)

    def _settle(self) -> None:
        if self.pending is not None:
            s = self.pending_start
        elif self.buf:
            s = self.buf_start
        else:
            s = self.received
        if s > self.settled:
            self.settled = s
            self._release()

    def on_push(self):
        elem = self.grab(self.in_)
        index = self.received
        self.received += 1
        try:
            c = self.cost(elem)
        except Exception as e:  # noqa: BLE001
            self._supervise(e)
            return
        if c < 0:
            self.fail_stage(ValueError(f"Negative weight [{c}] for element [{elem}] is not allowed"))
            return
        try:
            key = self.fn(elem)
        except Exception as e:  # noqa: BLE001
            self._supervise(e)
            return
        if key is None:
            self.fail_stage(ValueError("Element key must not be null"))
            return
        mw = self.max_weight
        if c >= mw and not self.buf:
            self.push(self.out, [elem])
            self._settle()
        elif self.key is not _NO_KEY and (key != self.key or self.weight + c > mw):
            self._emit_current()
            if c > mw:
                self._push_or_queue([elem], index, self._ts)
            else:
                self._add(elem, c, key, index)
            self._settle()
            self._try_pull()
        else:
            self._add(elem, c, key, index)
            self._try_pull()

    def _supervise(self, exc: BaseException) -> None:
        if supervise(self, self.decider, exc):  # Restart: reset_state dropped the open group
            self._settle()
            self._try_pull()

    def _add(self, elem, c, key, index) -> None:
        if not self.buf:
            self.buf_start = index
        if self._ts is not None:
            self.buf_ts = later(self.buf_ts, self._ts)
        self.buf.append(elem)
        self.weight += c
        self.key = key

    def _emit_current(self) -> None:
        if self.buf:
            group, start, ts = self.buf, self.buf_start, self.buf_ts
            self.reset_state()
            self._push_or_queue(group, start, ts)

    def _push_or_queue(self, group: list, start: int, ts) -> None:
        if self.pending is not None:
            self.push(self.out, self.pending, self.pending_ts)
            self.pending, self.pending_start, self.pending_ts = group, start, ts
        elif self.is_available(self.out):
            self.push(self.out, group, ts)
        else:
            self.pending, self.pending_start, self.pending_ts = group, start, ts

    def _try_pull(self) -> None:
        if self.pending is None and not self.has_been_pulled(self.in_) and self.is_available(self.out):
            self.pull(self.in_)

    def on_pull(self):
        if self.pending is not None:
            group, self.pending = self.pending, None
            self.push(self.out, group, self.pending_ts)
            self._settle()
        elif not self.has_been_pulled(self.in_):
            self.pull(self.in_)

    def on_upstream_finish(self):
        groups = [(g, t) for g, t in ((self.pending, self.pending_ts), (self.buf, self.buf_ts)) if g]
        self.pending = None
        self.reset_state()
        self.settled = self.received
        for group, ts in groups:
            self.emit(self.out, group, ts=ts)
        self._release()
        self.complete_stage()

    def partial(self):
        return None

    def reset_state(self) -> None:
        self.buf = []
        self.buf_start = 0
        self.buf_ts = None
        self.weight = 0
        self.key = _NO_KEY

    def window_state(self):
        return (list(self.buf), self.buf_start, self.weight, None if self.key is _NO_KEY else (self.key,),
                self.pending, self.pending_start)

    def restore_window_state(self, state) -> None:
        buf, self.buf_start, self.weight, key, self.pending, self.pending_start = state
        self.buf = list(buf)
        self.key = _NO_KEY if key is None else key[0]


# ---------------------------------------------------------------------------------------------- take_last
class TakeLast(FlowStage):
    """Keeps the last ``n`` elements and emits them as one list when upstream completes (the Flow form
    of Pekko's ``Sink.takeLast``; an empty stream emits ``[]``). A failure fails the stream.

    **Emits when** upstream completes. **Backpressures when** downstream backpressures (after
    completion). **Completes when** upstream completes and the list was emitted. **Cancels when**
    downstream cancels."""

    def __init__(self, n: int):
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"take_last: n must be an int, got {n!r}")
        if n <= 0:
            raise ValueError(f"take_last: n must be > 0, got {n}")
        super().__init__("take_last")
        self.n = n

    def create_logic(self, attributes):
        return _TakeLastLogic(self)


class _TakeLastLogic(_WindowLogic):
    def __init__(self, stage: TakeLast):
        self.n = stage.n
        super().__init__(stage)

    def new_stamps(self) -> deque:
        return deque(maxlen=self.n)  # event time: the timestamps of the elements in buf

    def step(self, x):
        self.buf.append(x)
        return None

    def on_push(self):
        self.received += 1
        self.buf.append(self.grab(self.in_))
        self.pull(self.in_)

    def partial(self):
        return list(self.buf)

    def need(self, windows: int) -> int:
        return self.chunk_size  # every element is read: ask for a full chunk, as fold does

    def reset_state(self) -> None:
        self.buf = deque(maxlen=self.n)

    def window_state(self):
        return list(self.buf)

    def restore_window_state(self, state) -> None:
        self.buf = deque(state, maxlen=self.n)
