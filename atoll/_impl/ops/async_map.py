"""``map_async``, ``map_async_unordered``, ``map_async_partitioned`` (ordered and unordered) and ``ask``:
Pekko's ``mapAsync`` family (``impl/fusing/Ops.scala`` ``MapAsync``/``MapAsyncUnordered``,
``stream/MapAsyncPartitioned.scala``).

``fn`` returns an awaitable (a plain ``async def`` works), a ``concurrent.futures.Future`` or a
``ray.ObjectRef``; see :mod:`.async_loop` for how each is resolved. It is called on the island thread, in
arrival order. The contract shared by the family:

* **Bound.** The stage holds at most ``parallelism`` elements (in flight plus completed and not yet
  emitted), and pulls upstream only while it holds fewer; the first pull waits for downstream's first pull.
* **Order.** The ordered forms emit in arrival order (a completed element waits for the ones before
  it); the unordered forms emit in completion order.
* **Failures** (``fn`` raising, the future failing, or ``fn`` returning something that is not
  awaitable): the supervision decider is asked once per failure. Stop fails the stage as soon as the
  failure is seen, even while elements before it are still in flight; Resume and Restart drop the
  element (the stages keep no state to reset).
* **None.** A result of ``None`` is dropped (Pekko skips a ``null`` result); it is not a failure.
* **Signals and event time** (Atoll's signal lane, beyond Pekko): a control signal (watermark,
  barrier) goes out once every element that arrived before it has left the stage, and no result of an
  element that arrived after it goes out before it (``_Epochs``); in event-time graphs each result
  carries its own element's timestamp.
"""
from __future__ import annotations

import logging
from collections import deque
from typing import Any, Callable

from ...stage.attributes import LogLevels
from ...stage.supervision import Supervision, decide
from .async_loop import Resolver, outcome
from ...stage.logic import GraphStageLogic
from .base import FlowLogic, FlowStage, decider_of, require_callable, require_int

_NOT_YET = object()
_log = logging.getLogger("atoll.async")


def log_resumed(logic, op: str, exc: BaseException) -> None:
    """Pekko logs a failure that supervision resumed at ``LogLevels.on_failure`` (error by default)."""
    levels = logic.attributes.get(LogLevels) if logic.attributes is not None else None
    level = levels.on_failure if levels is not None else logging.ERROR
    if level and _log.isEnabledFor(level):
        _log.log(level, "Supervision strategy resumed after exception in %s: %r", op, exc)


class _Epoch:
    """The elements that arrived between two control signals, and the signals that followed them."""

    __slots__ = ("pending", "signals")

    def __init__(self):
        self.pending = 0  # elements of this epoch still in the stage
        self.signals: list = []  # the signals that arrived after them


class _Epochs:
    """Keeps control signals (watermarks, barriers) behind the elements that arrived before them: a signal
    goes out once every element before it has left the stage (emitted or dropped). Elements never pass
    a signal that arrived before them either: only the front epoch's results are emitted."""

    __slots__ = ("q",)

    def __init__(self):
        self.q: deque = deque([_Epoch()])

    def arrive(self) -> _Epoch:
        ep = self.q[-1]
        ep.pending += 1
        return ep

    def signal(self, logic, signal) -> None:
        q = self.q
        if len(q) == 1 and q[0].pending == 0:
            GraphStageLogic.on_signal(logic, signal)  # nothing held: on at once
        else:
            q[-1].signals.append(signal)
            q.append(_Epoch())

    def leave(self, logic, ep: _Epoch) -> None:
        ep.pending -= 1
        q = self.q
        while len(q) > 1 and q[0].pending == 0:
            for sig in q.popleft().signals:
                GraphStageLogic.on_signal(logic, sig)

    @property
    def front(self) -> _Epoch:
        return self.q[0]

    # checkpoint state: per epoch the count of its elements still held and the signals after them
    def save(self) -> list:
        return [(ep.pending, list(ep.signals)) for ep in self.q]

    def index(self, ep: _Epoch) -> int:
        for i, e in enumerate(self.q):
            if e is ep:
                return i
        raise ValueError("epoch not held")  # not reached: a held slot's epoch is held

    def restore(self, state: list) -> None:
        self.q = deque()
        for pending, signals in state:
            ep = _Epoch()
            ep.pending, ep.signals = pending, list(signals)
            self.q.append(ep)


class _Slot:
    """One element held by a stage: its result once known, the decider's verdict on its failure (asked
    once, Pekko #23888), its epoch and its event timestamp (None outside event-time graphs)."""

    __slots__ = ("value", "exc", "directive", "elem", "part", "epoch", "ts")

    def __init__(self, epoch: _Epoch, ts: Any, elem: Any = None, part: Any = None):
        self.value = _NOT_YET
        self.exc = None
        self.directive = None
        self.elem = elem
        self.part = part
        self.epoch = epoch
        self.ts = ts

    def set(self, fut) -> None:
        self.value, self.exc = outcome(fut)

    def save(self, epochs: _Epochs) -> tuple:
        """``(epoch index, ts, done, value or element)``: a completed result (a failure that supervision let
        pass is saved as a dropped ``None``) or an element not started yet."""
        if self.value is not _NOT_YET:
            return (epochs.index(self.epoch), self.ts, True, None if self.exc is not None else self.value)
        return (epochs.index(self.epoch), self.ts, False, self.elem)

    @staticmethod
    def restored(epochs: _Epochs, state: tuple, part_of=None) -> "_Slot":
        i, ts, done, x = state
        slot = _Slot(epochs.q[i], ts)
        if done:
            slot.value, slot.elem = x, _NOT_YET
        else:
            slot.elem = x
        if part_of is not None:
            slot.part = part_of(slot)
        return slot


def _check_parallelism(op: str, parallelism: int) -> None:
    require_int(op, "parallelism", parallelism, 1)


class _AsyncFlowLogic(FlowLogic):
    """What the family shares: the resolver, the decider asked once per failure, cleanup at stop."""
    pulls_ahead = True  # asks for as many elements as may run at once

    op = "map_async"

    def __init__(self, stage, decider):
        super().__init__(stage)
        self.fn = stage.fn
        self.parallelism = stage.parallelism
        self.decider = decider
        self.resolver = Resolver(self, self.op, self._completed)
        self.epochs = _Epochs()

    def on_signal(self, signal) -> None:
        self.epochs.signal(self, signal)

    def _directive(self, slot: _Slot) -> str:
        d = slot.directive
        if d is None:
            d = slot.directive = decide(self.decider, slot.exc)
            if d != Supervision.STOP:
                log_resumed(self, self.op, slot.exc)
        return d

    def _thrown(self, exc: BaseException) -> bool:
        """``fn`` raised (or returned no awaitable): Stop fails the stage (False), else the element is dropped."""
        if decide(self.decider, exc) == Supervision.STOP:
            self.fail_stage(exc)
            return False
        log_resumed(self, self.op, exc)
        return True

    def _completed(self, token, fut) -> None:
        raise TypeError("subclass must implement _completed")

    def post_stop(self) -> None:
        self.resolver.stop()


# =========================================================================== map_async
class MapAsync(FlowStage):
    """Pekko's ``mapAsync``: emits the result of ``fn(elem)`` - an awaitable, a Future or an ObjectRef -
    in the order of the elements, with at most ``parallelism`` elements held.

    **Emits when** the result for the oldest element has arrived and downstream is ready (a ``None``
    result is skipped). **Backpressures when** ``parallelism`` elements are held, or the oldest one's
    result is not there and downstream backpressures. **Completes when** upstream completes and every
    held element was emitted. **Cancels when** downstream cancels. Supervision: Stop fails the stream as
    soon as any held element fails, Resume and Restart drop the failed element."""

    op = "map_async"

    def __init__(self, parallelism: int, fn: Callable[[Any], Any], op: str = "map_async"):
        self.op = op
        _check_parallelism(op, parallelism)
        require_callable(op, "fn", fn)
        super().__init__(op.rsplit(".", 1)[-1])
        self.parallelism = parallelism
        self.fn = fn

    def create_logic(self, attributes):
        return _MapAsyncLogic(self, decider_of(attributes))


class _MapAsyncLogic(_AsyncFlowLogic):
    def __init__(self, stage, decider):
        self.op = stage.op
        super().__init__(stage, decider)
        self.buffer: deque = deque()

    def on_push(self) -> None:
        elem = self.grab(self.in_)
        slot = _Slot(self.epochs.q[-1], self._ts)
        try:
            fut = self.resolver.resolve(self.fn(elem), slot)
        except Exception as e:  # noqa: BLE001 - fn raised: supervised, the element is dropped
            if not self._thrown(e):
                return
        else:
            slot.epoch.pending += 1
            self.buffer.append(slot)
            if fut is not None:  # already completed (Pekko #20217): handled right here
                slot.set(fut)
                if slot.exc is not None and self._directive(slot) == Supervision.STOP:
                    self.fail_stage(slot.exc)
                    return
                self._push_next()
                return
        self._pull_if_needed()

    def _completed(self, slot: _Slot, fut) -> None:
        slot.set(fut)
        if slot.exc is not None and self._directive(slot) == Supervision.STOP:
            self.fail_stage(slot.exc)  # fail fast, before the elements ahead of it are out
            return
        self._push_next()

    # checkpoint state: the held elements' results (completed, waiting for the ones before them or for
    # demand) and the signals held behind them; a call in flight cannot be saved, so the cut waits for it
    # (it ends by itself: no call starts while downstream is stalled once ``parallelism`` results are held)
    def ready_for_snapshot(self) -> bool:
        return all(slot.value is not _NOT_YET for slot in self.buffer)

    def save_to_snapshot(self):
        return {"epochs": self.epochs.save(), "slots": [slot.save(self.epochs) for slot in self.buffer]}

    def restore_from_snapshot(self, state) -> None:
        self.epochs.restore(state["epochs"])
        self.buffer = deque(_Slot.restored(self.epochs, x) for x in state["slots"])

    def on_pull(self) -> None:
        self._push_next()

    def on_upstream_finish(self) -> None:
        if not self.buffer:
            self.complete_stage()

    def _push_next(self) -> None:
        buf = self.buffer
        while buf and buf[0].value is not _NOT_YET and self.is_available(self.out):
            slot = buf.popleft()
            if slot.exc is not None:
                if self._directive(slot) == Supervision.STOP:
                    self.fail_stage(slot.exc)
                    return
            elif slot.value is not None:
                self.push(self.out, slot.value, slot.ts)
                self.epochs.leave(self, slot.epoch)
                break
            self.epochs.leave(self, slot.epoch)
        self._pull_if_needed()

    def _pull_if_needed(self) -> None:
        if self.is_closed(self.in_):
            if not self.buffer:
                self.complete_stage()
        elif len(self.buffer) < self.parallelism and not self.has_been_pulled(self.in_):
            self.pull(self.in_)


# =========================================================================== map_async_unordered
class MapAsyncUnordered(FlowStage):
    """Pekko's ``mapAsyncUnordered``: emits the results of ``fn(elem)`` in the order they complete, with
    at most ``parallelism`` elements held.

    **Emits when** any result has arrived and downstream is ready (a ``None`` result is skipped).
    **Backpressures when** ``parallelism`` elements are held and downstream backpressures.
    **Completes when** upstream completes and every held element was emitted. **Cancels when**
    downstream cancels. Supervision: Stop fails the stream as soon as an element fails, Resume and
    Restart drop the failed element."""

    op = "map_async_unordered"

    def __init__(self, parallelism: int, fn: Callable[[Any], Any], op: str = "map_async_unordered"):
        self.op = op
        _check_parallelism(op, parallelism)
        require_callable(op, "fn", fn)
        super().__init__(op.rsplit(".", 1)[-1])
        self.parallelism = parallelism
        self.fn = fn

    def create_logic(self, attributes):
        return _MapAsyncUnorderedLogic(self, decider_of(attributes))


class _MapAsyncUnorderedLogic(_AsyncFlowLogic):
    """Pekko's algorithm; results wait in ``done`` while downstream is not ready. With control signals
    in the stream, results of elements that arrived after a signal wait (in ``later``) until the
    signal is out."""

    def __init__(self, stage, decider):
        self.op = stage.op
        super().__init__(stage, decider)
        self.in_flight = 0
        self.done: deque = deque()  # completed slots of the front epoch, waiting for downstream
        self.later: list = []  # completed slots of later epochs (only with signals held)

    def _todo(self) -> int:
        return self.in_flight + len(self.done) + len(self.later)

    # checkpoint state: the completed results waiting for demand (``done``) or for a signal (``later``) and
    # the signals held; the cut waits for the calls in flight (they end by themselves)
    def ready_for_snapshot(self) -> bool:
        return self.in_flight == 0

    def save_to_snapshot(self):
        ep = self.epochs
        return {"epochs": ep.save(), "done": [x.save(ep) for x in self.done], "later": [x.save(ep) for x in self.later]}

    def restore_from_snapshot(self, state) -> None:
        ep = self.epochs
        ep.restore(state["epochs"])
        self.done = deque(_Slot.restored(ep, x) for x in state["done"])
        self.later = [_Slot.restored(ep, x) for x in state["later"]]

    def on_push(self) -> None:
        elem = self.grab(self.in_)
        slot = _Slot(self.epochs.q[-1], self._ts)
        try:
            fut = self.resolver.resolve(self.fn(elem), slot)
        except Exception as e:  # noqa: BLE001
            if not self._thrown(e):
                return
        else:
            slot.epoch.pending += 1
            self.in_flight += 1
            if fut is not None and not self._completed(slot, fut):
                return
        if self._todo() < self.parallelism and not self.has_been_pulled(self.in_):
            self.try_pull(self.in_)

    def _completed(self, slot: _Slot, fut) -> bool:
        self.in_flight -= 1
        slot.set(fut)
        if slot.exc is None and slot.value is not None:
            if slot.epoch is not self.epochs.front:
                self.later.append(slot)
            elif self.is_available(self.out):
                if not self.has_been_pulled(self.in_):
                    self.try_pull(self.in_)
                self._emit(slot)
                if self.is_closed(self.in_) and self._todo() == 0:
                    self.complete_stage()
            else:
                self.done.append(slot)
            return True
        if slot.exc is not None:
            if decide(self.decider, slot.exc) == Supervision.STOP:
                self.fail_stage(slot.exc)
                return False
            log_resumed(self, self.op, slot.exc)
        self._leave(slot)
        if self.is_closed(self.in_) and self._todo() == 0:
            self.complete_stage()
        elif not self.has_been_pulled(self.in_):
            self.try_pull(self.in_)
        return True

    def _emit(self, slot: _Slot) -> None:
        self.push(self.out, slot.value, slot.ts)
        self._leave(slot)

    def _leave(self, slot: _Slot) -> None:
        front = self.epochs.front
        self.epochs.leave(self, slot.epoch)
        if self.later and self.epochs.front is not front:
            # a signal went out: the results of the elements after it may go now
            new_front = self.epochs.front
            self.done.extend(x for x in self.later if x.epoch is new_front)
            self.later = [x for x in self.later if x.epoch is not new_front]

    def on_pull(self) -> None:
        if self.done:
            self._emit(self.done.popleft())
        todo = self._todo()
        if self.is_closed(self.in_):
            if todo == 0:
                self.complete_stage()
        elif todo < self.parallelism and not self.has_been_pulled(self.in_):
            self.pull(self.in_)

    def on_upstream_finish(self) -> None:
        if self._todo() == 0:
            self.complete_stage()


# =========================================================================== map_async_partitioned
class MapAsyncPartitioned(FlowStage):
    """Pekko's ``mapAsyncPartitioned`` (``ordered=False``: ``mapAsyncPartitionedUnordered``): like
    ``map_async``, but ``fn(elem, partition)`` runs for at most one element per partition
    (``partition = partitioner(elem)``) at a time, and for at most ``parallelism`` partitions at once.
    An element whose partition is busy waits in the stage (it counts towards the ``parallelism``
    elements held) and starts, in arrival order, once its partition's earlier element has left the stage.

    **Emits when** (ordered) the oldest held element's result has arrived, (unordered) any result has
    arrived, and downstream is ready (a ``None`` result is skipped). **Backpressures when**
    ``parallelism`` elements are held. **Completes when** upstream completes and every held element
    was emitted. **Cancels when** downstream cancels. Supervision: Stop fails the stream as soon as an
    element fails, Resume and Restart drop it; a ``partitioner`` that raises is supervised the same way
    (the element is dropped)."""

    def __init__(self, parallelism: int, partitioner: Callable[[Any], Any], fn: Callable[[Any, Any], Any],
                 ordered: bool = True):
        self.op = "map_async_partitioned" if ordered else "map_async_partitioned_unordered"
        _check_parallelism(self.op, parallelism)
        require_callable(self.op, "partitioner", partitioner)
        require_callable(self.op, "fn", fn)
        super().__init__(self.op)
        self.parallelism = parallelism
        self.partitioner = partitioner
        self.fn = fn
        self.ordered = ordered

    def create_logic(self, attributes):
        return _MapAsyncPartitionedLogic(self, decider_of(attributes))


class _MapAsyncPartitionedLogic(_AsyncFlowLogic):
    """Pekko's algorithm: ``buffer`` holds every element in arrival order; ``busy`` the partitions with
    an element started and not yet out of the buffer (a partition stays busy until its element is
    emitted or dropped, as in Pekko)."""

    def __init__(self, stage, decider):
        self.op = stage.op
        super().__init__(stage, decider)
        self.partitioner = stage.partitioner
        self.ordered = stage.ordered
        self.buffer: deque = deque()
        self.busy: set = set()

    # checkpoint state: every held element in arrival order - its result once completed, the element itself
    # while its partition is busy (the partition is recomputed on restore) - and the signals held. A
    # partition stays busy until its element is out, so the completed ones keep theirs busy again.
    def ready_for_snapshot(self) -> bool:
        return all(slot.value is not _NOT_YET or slot.elem is not _NOT_YET for slot in self.buffer)

    def save_to_snapshot(self):
        ep = self.epochs
        return {"epochs": ep.save(), "slots": [(slot.save(ep), slot.part) for slot in self.buffer]}

    def restore_from_snapshot(self, state) -> None:
        ep = self.epochs
        ep.restore(state["epochs"])
        self.buffer = deque()
        for saved, part in state["slots"]:
            slot = _Slot.restored(ep, saved)
            slot.part = part
            if slot.value is not _NOT_YET:
                self.busy.add(part)
            self.buffer.append(slot)

    def on_push(self) -> None:
        elem = self.grab(self.in_)
        try:
            part = self.partitioner(elem)
            slot = _Slot(self.epochs.q[-1], self._ts, elem, part)
            slot.epoch.pending += 1
            self.buffer.append(slot)
            if part not in self.busy and len(self.busy) < self.parallelism:
                self._start(slot)
        except Exception as e:  # noqa: BLE001 - the partitioner raised
            if not self._thrown(e):
                return
        self._pull_if_needed()

    def _start(self, slot: _Slot) -> None:
        """Call ``fn`` for ``slot``; a raising ``fn`` (or a non-awaitable result) is that element's
        failure, supervised like a failed future."""
        self.busy.add(slot.part)
        slot.directive = None
        try:
            fut = self.resolver.resolve(self.fn(slot.elem, slot.part), slot)
        except Exception as e:  # noqa: BLE001
            slot.value, slot.exc = None, e
            fut = None
            self._after_result(slot)
            return
        slot.elem = _NOT_YET  # started: the element is no longer needed
        if fut is not None:
            slot.set(fut)
            self._after_result(slot)

    def _after_result(self, slot: _Slot) -> None:
        if slot.exc is not None and self._directive(slot) == Supervision.STOP:
            self.fail_stage(slot.exc)
            return
        self._push_next()

    def _completed(self, slot: _Slot, fut) -> None:
        slot.set(fut)
        self._after_result(slot)

    def on_pull(self) -> None:
        self._push_next()

    def on_upstream_finish(self) -> None:
        if not self.buffer:
            self.complete_stage()

    def _push_next(self) -> None:
        buf = self.buffer
        if self.ordered:
            while buf and buf[0].value is not _NOT_YET and self.is_available(self.out):
                slot = buf.popleft()
                self.busy.discard(slot.part)
                if not self._emit(slot):
                    return
        else:
            kept: deque = deque()
            for slot in buf:
                if slot.value is _NOT_YET or not self.is_available(self.out) or slot.epoch is not self.epochs.front:
                    kept.append(slot)
                    continue
                self.busy.discard(slot.part)
                if not self._emit(slot):
                    return
            self.buffer = kept
        self._drain()
        if not self.is_closed(self.out):
            self._pull_if_needed()

    def _emit(self, slot: _Slot) -> bool:
        if slot.exc is not None:
            if self._directive(slot) == Supervision.STOP:
                self.fail_stage(slot.exc)
                return False
        elif slot.value is not None:
            self.push(self.out, slot.value, slot.ts)
        self.epochs.leave(self, slot.epoch)
        return True

    def _drain(self) -> None:
        """Start the waiting elements whose partition is free, oldest first."""
        for slot in list(self.buffer):
            if self.is_closed(self.out):
                return  # a synchronous failure stopped the stage
            if slot.value is _NOT_YET and slot.elem is not _NOT_YET and slot.part not in self.busy \
                    and len(self.busy) < self.parallelism:
                self._start(slot)

    def _pull_if_needed(self) -> None:
        if self.is_closed(self.out):
            return  # stopped meanwhile (a synchronous failure, or downstream cancelled)
        if self.is_closed(self.in_):
            if not self.buffer:
                self.complete_stage()
        elif len(self.buffer) < self.parallelism and not self.has_been_pulled(self.in_):
            self.pull(self.in_)


# =========================================================================== ask
class _AskCall:
    """``fn`` of ``ask``: ``getattr(actor, method).remote(elem)`` (picklable, unlike a lambda over a handle)."""

    __slots__ = ("actor", "method")

    def __init__(self, actor: Any, method: str):
        self.actor = actor
        self.method = method

    def __call__(self, elem: Any) -> Any:
        return getattr(self.actor, self.method).remote(elem)

    def __reduce__(self):
        return (_AskCall, (self.actor, self.method))


def ask_stage(actor: Any, parallelism: int, method: str = "__call__", ordered: bool = True) -> FlowStage:
    """Pekko's ``ask``: ``map_async(parallelism, lambda x: actor.<method>.remote(x))`` for a Ray actor
    handle (or anything whose ``getattr(actor, method).remote(x)`` returns an ObjectRef, a Future or an
    awaitable). The actor's exceptions reach the decider as Ray raises them (a ``RayTaskError`` that is
    also an instance of the original exception's class); a dead actor fails the element with Ray's
    ``ActorDiedError``."""
    _check_parallelism("ask", parallelism)
    if not isinstance(method, str) or not method:
        raise TypeError(f"ask: argument 'method' must be a method name, got {method!r}")
    if not isinstance(ordered, bool):
        raise TypeError(f"ask: argument 'ordered' must be a bool, got {ordered!r}")
    bound = getattr(actor, method, None)
    if bound is None or not hasattr(bound, "remote"):
        raise TypeError(f"ask: {actor!r} has no remote method {method!r} (expected a Ray actor handle)")
    return (MapAsync if ordered else MapAsyncUnordered)(parallelism, _AskCall(actor, method), op="ask")
