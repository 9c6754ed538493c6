"""Fan-out junctions: one inlet, several outlets (Pekko's ``Broadcast``, ``Balance``, ``Partition``,
``Unzip`` and ``UnzipWith`` from ``scaladsl/Graph.scala`` and the ``UnzipWith`` boilerplate).

Each junction is a ``GraphStage`` with more than one port, so it gets an atomic traversal builder and
is imported into a graph with ``b.add(Broadcast(3))`` inside a GraphDSL build function. Ports are named
as in Pekko (``Broadcast.in``, ``Broadcast.out0`` ...); the stage exposes them as ``in_`` and
``outs`` (``out(i)`` on the shape).
"""
from __future__ import annotations

import operator
from collections import deque
from typing import Any, Callable, Iterable

from ...errors import PartitionOutOfBoundsError
from ...stage.attributes import Attributes
from ...stage.graph_stage import GraphStage
from ...stage.handlers import InHandler, OutHandler
from ...stage.logic import GraphStageLogic
from ...stage.ports import Inlet, Outlet
from ...stage.shapes import FanOutShapeN, UniformFanOutShape
from ...stage.supervision import Supervision, decide, supervise
from .base import decider_of, require_bool, require_callable, require_int


class _FanOutStage(GraphStage):
    """Common part: ``in_`` named ``<prefix>.in`` and ``n`` outlets named ``<prefix>.out<i>``."""

    def __init__(self, prefix: str, n: int, attr_name: str, shape_type=UniformFanOutShape):
        self.in_ = Inlet(f"{prefix}.in")
        self.outs = tuple(Outlet(f"{prefix}.out{i}") for i in range(n))
        self.shape = shape_type(self.in_, self.outs)
        self.initial_attributes = Attributes.name(attr_name)

    def out(self, i: int) -> Outlet:
        return self.outs[i]


# ---------------------------------------------------------------------------------------------- Broadcast
class Broadcast(_FanOutStage):
    """Emits every upstream element to all ``n`` outlets.

    **Emits when** all of the outputs stop backpressuring and there is an input element available.
    **Backpressures when** any of the outputs backpressures. **Completes when** upstream completes.
    **Cancels when** ``eager_cancel`` is false: all downstreams cancel; ``eager_cancel`` is true: any
    downstream cancels, except the outlets listed in ``non_eager_cancel_outputs``, which are simply
    dropped from the broadcast when they cancel (the cause of the last cancellation is passed upstream).
    """

    def __init__(self, n: int, eager_cancel: bool = False, non_eager_cancel_outputs: Iterable[int] = ()):
        require_int("Broadcast", "n", n, 1)
        require_bool("Broadcast", "eager_cancel", eager_cancel)
        non_eager = frozenset(non_eager_cancel_outputs)
        if non_eager and not eager_cancel:
            raise ValueError(
                f"Broadcast: argument 'non_eager_cancel_outputs' {sorted(non_eager)} requires eager_cancel=True "
                "(with eager_cancel=False all outputs already behave non-eagerly)"
            )
        bad = [i for i in non_eager if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < n]
        if bad:
            raise ValueError(
                f"Broadcast: argument 'non_eager_cancel_outputs' must hold outlet indices in [0, {n - 1}], got {bad}"
            )
        super().__init__("Broadcast", n, "broadcast")
        self.n = n
        self.eager_cancel = eager_cancel
        self.non_eager_cancel_outputs = non_eager

    def create_logic(self, attributes):
        return _BroadcastLogic(self)

    def __repr__(self):
        return f"Broadcast({self.n})"


class _BroadcastLogic(GraphStageLogic, InHandler):
    stateless = True  # what it pushed waits in its output connections (saved there as in flight)

    def __init__(self, stage: Broadcast):
        super().__init__(stage.shape)
        self.in_ = stage.in_
        self.outs = stage.outs
        n = len(stage.outs)
        # every outlet counts as "waiting for a pull" until it pulls for the first time
        self.pending = [True] * n
        self.pending_count = n
        self.running = n
        self.set_handler(stage.in_, self)
        for i, o in enumerate(stage.outs):
            self.set_handler(o, _BroadcastOut(self, i, stage.eager_cancel and i not in stage.non_eager_cancel_outputs))

    def on_push(self):
        self.pending_count = self.running
        elem = self.grab(self.in_)
        for i, o in enumerate(self.outs):
            if not self.is_closed(o):
                self.push(o, elem)
                self.pending[i] = True

    def pull_if_all_pulled(self):
        if self.pending_count == 0 and not self.has_been_pulled(self.in_):
            if self.chunked:  # ask for what every open outlet accepts
                self._in_conns[0].demand = min(
                    [c.demand for o, c in zip(self.outs, self._out_conns) if not self.is_closed(o)] or [1]
                )
            self.pull(self.in_)

    # chunk form: the same chunk (a list nobody mutates) goes to every open outlet
    chunked = False

    def chunk_capable(self) -> bool:
        return True

    def enable_chunks(self, chunk_size: int) -> None:
        self.chunked = True


class _BroadcastOut(OutHandler):
    def __init__(self, logic: _BroadcastLogic, i: int, eager: bool):
        self.logic = logic
        self.i = i
        self.eager = eager

    def on_pull(self):
        logic = self.logic
        logic.pending[self.i] = False
        logic.pending_count -= 1
        logic.pull_if_all_pulled()

    def on_downstream_finish(self, cause):
        logic = self.logic
        if self.eager:
            logic.cancel_stage(cause)
            return
        logic.running -= 1
        if logic.running == 0:
            logic.cancel_stage(cause)
        elif logic.pending[self.i]:
            logic.pending[self.i] = False
            logic.pending_count -= 1
            logic.pull_if_all_pulled()


# ---------------------------------------------------------------------------------------------- Balance
class Balance(_FanOutStage):
    """Emits each upstream element to one of the outlets that has demand, the outlets being served in
    the order in which they pulled.

    With ``wait_for_all_downstreams=True`` nothing is requested from upstream until every outlet has
    pulled once (or cancelled).

    **Emits when** any of the outputs stops backpressuring; the element goes to one of them.
    **Backpressures when** all of the outputs backpressure. **Completes when** upstream completes.
    **Cancels when** ``eager_cancel`` is false: all downstreams cancel; ``eager_cancel`` is true: any
    downstream cancels.
    """

    def __init__(self, n: int, wait_for_all_downstreams: bool = False, eager_cancel: bool = False):
        require_int("Balance", "n", n, 1)
        require_bool("Balance", "wait_for_all_downstreams", wait_for_all_downstreams)
        require_bool("Balance", "eager_cancel", eager_cancel)
        super().__init__("Balance", n, "balance")
        self.n = n
        self.wait_for_all_downstreams = wait_for_all_downstreams
        self.eager_cancel = eager_cancel

    def create_logic(self, attributes):
        return _BalanceLogic(self)

    def __repr__(self):
        return f"Balance({self.n})"


class _BalanceLogic(GraphStageLogic, InHandler):
    """Element form as Pekko's. Chunk form: upstream is asked for what the outlets waiting in line
    accept together; a received chunk is shared among them in pull order (evenly, as one element
    per pull would be), each piece one chunk to one outlet and never beyond its demand. What the
    outlets cannot take (one cancelled meanwhile) waits in ``rest`` for the next pulls, and signals
    arriving while it waits are held behind it."""

    def __init__(self, stage: Balance):
        super().__init__(stage.shape)
        self.in_ = stage.in_
        self.outs = stage.outs
        self.eager_cancel = stage.eager_cancel
        n = len(stage.outs)
        self.pending_queue: deque = deque()  # outlets that pulled, in pull order
        self.need_downstream_pulls = n if stage.wait_for_all_downstreams else 0
        self.running = n
        self.chunked = False
        self.rest: list = []  # chunk form: elements received, not dispatched yet
        self.held_signals: list = []
        self.set_handler(stage.in_, self)
        for o in stage.outs:
            self.set_handler(o, _BalanceOut(self, o))

    def on_push(self):
        if self.chunked:
            self.rest = self.grab(self.in_)
            self.dispatch_chunk()
        else:
            self.dequeue_and_dispatch()

    # checkpoint state: the chunk form's elements not dispatched yet and the signals held behind them
    def save_to_snapshot(self):
        return (list(self.rest), list(self.held_signals))

    def restore_from_snapshot(self, state) -> None:
        rest, held = state
        self.rest, self.held_signals = list(rest), list(held)

    def dequeue_and_dispatch(self):
        queue = self.pending_queue
        while queue:
            out = queue.popleft()
            if not self.is_closed(out):
                self.push(out, self.grab(self.in_))
                if queue:
                    self.pull(self.in_)
                return
            # that outlet cancelled after it pulled: try the next one waiting

    # ------------------------------------------------------------------ chunk form
    def chunk_capable(self) -> bool:
        return True

    def enable_chunks(self, chunk_size: int) -> None:
        self.chunked = True

    def pull_in(self) -> None:
        """Ask upstream for what the open outlets in line accept together."""
        in_ = self.in_
        if self.has_been_pulled(in_) or self.is_closed(in_):
            return
        if not self.chunked:
            self.pull(in_)
            return
        total = sum(self.demand_of(out) for out in self.pending_queue if not self.is_closed(out))
        if total:
            self.pull_chunk(in_, total)

    def dispatch_chunk(self) -> None:
        """Share ``rest`` among the outlets in line, in pull order, evenly and each within its
        demand; every piece is one chunk to one outlet."""
        queue, rest = self.pending_queue, self.rest
        while rest and queue:
            waiting = sum(1 for out in queue if not self.is_closed(out))
            out = queue.popleft()
            if self.is_closed(out):
                continue
            take = min(self.demand_of(out), -(-len(rest) // waiting))
            if take >= len(rest):
                self.push_chunk(out, rest)
                rest = []
            else:
                self.push_chunk(out, rest[:take])
                rest = rest[take:]
        self.rest = rest
        if not rest:
            for sig in self.held_signals:
                self.forward_signal(sig)
            self.held_signals = []
            if self.is_closed(self.in_):
                self.complete_stage()
                return
            if queue:
                self.pull_in()

    def on_upstream_finish(self):
        if not self.rest:
            self.complete_stage()
        # else the elements left over go to the next outlets that pull, then the stage completes

    def on_signal(self, signal) -> None:
        if self.rest:
            self.held_signals.append(signal)
        else:
            self.forward_signal(signal)


class _BalanceOut(OutHandler):
    def __init__(self, logic: _BalanceLogic, out: Outlet):
        self.logic = logic
        self.out = out
        self.has_pulled = False

    def on_pull(self):
        logic = self.logic
        if not self.has_pulled:
            self.has_pulled = True
            if logic.need_downstream_pulls > 0:
                logic.need_downstream_pulls -= 1
        if logic.chunked:
            logic.pending_queue.append(self.out)
            if logic.need_downstream_pulls == 0:
                if logic.rest:
                    logic.dispatch_chunk()
                else:
                    logic.pull_in()
            return
        if logic.need_downstream_pulls == 0:
            in_ = logic.in_
            if logic.is_available(in_):
                if not logic.pending_queue:
                    logic.push(self.out, logic.grab(in_))
            else:
                if not logic.has_been_pulled(in_):
                    logic.pull(in_)
                logic.pending_queue.append(self.out)
        else:
            logic.pending_queue.append(self.out)

    def on_downstream_finish(self, cause):
        logic = self.logic
        if logic.eager_cancel:
            logic.cancel_stage(cause)
            return
        logic.running -= 1
        if logic.running == 0:
            logic.cancel_stage(cause)
        elif not self.has_pulled and logic.need_downstream_pulls > 0:
            # an outlet that will never pull no longer holds the others back
            logic.need_downstream_pulls -= 1
            if logic.need_downstream_pulls == 0:
                if logic.chunked and logic.rest:
                    logic.dispatch_chunk()
                else:
                    logic.pull_in()


# ---------------------------------------------------------------------------------------------- Partition
class Partition(_FanOutStage):
    """Emits each upstream element to the outlet whose index ``fn(element)`` returns.

    An index outside ``0 .. n-1`` fails the stage with ``PartitionOutOfBoundsError`` (subject to
    supervision, like an exception raised by ``fn``). An element routed to a cancelled outlet is
    dropped.

    **Emits when** an element is available from the input and the chosen output has demand.
    **Backpressures when** the chosen output backpressures. **Completes when** upstream completes
    (after the element waiting for its outlet, if any, went out). **Cancels when** ``eager_cancel``
    is false: all downstreams cancel; ``eager_cancel`` is true: any downstream cancels.

    Adheres to the supervision strategy: Resume and Restart drop the element and go on.
    """

    def __init__(self, n: int, fn: Callable[[Any], int], eager_cancel: bool = False):
        require_int("Partition", "n", n, 1)
        require_callable("Partition", "fn", fn)
        require_bool("Partition", "eager_cancel", eager_cancel)
        super().__init__("Partition", n, "partition")
        self.n = n
        self.fn = fn
        self.eager_cancel = eager_cancel

    def create_logic(self, attributes):
        return _PartitionLogic(self, decider_of(attributes))

    def __repr__(self):
        return f"Partition({self.n})"


_NONE = object()  # no element waiting for its outlet


class _PartitionLogic(GraphStageLogic, InHandler):
    """Element form as Pekko's, holding signals behind the element waiting for its outlet. Chunk
    form: upstream is asked for the smallest demand among the outlets that pulled; a chunk is split
    by the partitioner in order, each outlet getting at most its demand, until an element's outlet
    lacks demand: that element and the rest of the chunk wait (``rest``, ``pos``; the element's
    index in ``held_idx``) for that outlet's pull, and so do the signals that arrive meanwhile."""

    def __init__(self, stage: Partition, decider):
        super().__init__(stage.shape)
        self.in_ = stage.in_
        self.outs = stage.outs
        self.fn = stage.fn
        self.n = stage.n
        self.eager_cancel = stage.eager_cancel
        self.decider = decider
        self.pending_elem: Any = _NONE
        self.pending_idx = -1
        self.running = stage.n
        self.chunked = False
        self.rest: list = []
        self.pos = 0
        self.held_idx = -1
        self.held_signals: list = []
        self.set_handler(stage.in_, self)
        for i, o in enumerate(stage.outs):
            self.set_handler(o, _PartitionOut(self, i))

    def index_of(self, elem) -> int:
        raw = self.fn(elem)
        try:
            idx = operator.index(raw)  # ints, bools, numpy integers
        except TypeError:
            raise TypeError(f"Partition: fn must return an int, returned {raw!r} for input {elem!r}") from None
        if not 0 <= idx < self.n:
            raise PartitionOutOfBoundsError(
                f"partitioner must return an index in the range [0,{self.n - 1}]. returned: [{idx}] "
                f"for input [{type(elem).__name__}]."
            )
        return idx

    def holding(self) -> bool:
        return self.pending_elem is not _NONE or bool(self.rest)

    # checkpoint state: the element waiting for its outlet (element form) or the chunk's elements not
    # routed yet (chunk form; routed again from the start of the rest), and the signals held behind them
    def save_to_snapshot(self):
        pending = None if self.pending_elem is _NONE else (self.pending_elem, self.pending_idx)
        return (pending, list(self.rest[self.pos:]), list(self.held_signals))

    def restore_from_snapshot(self, state) -> None:
        pending, rest, held = state
        if pending is not None:
            self.pending_elem, self.pending_idx = pending
        self.rest, self.pos, self.held_idx = list(rest), 0, -1
        self.held_signals = list(held)

    def on_signal(self, signal) -> None:
        if self.holding():
            self.held_signals.append(signal)
        else:
            self.forward_signal(signal)

    def release_signals(self) -> None:
        if self.held_signals and not self.holding():
            sigs, self.held_signals = self.held_signals, []
            for sig in sigs:
                self.forward_signal(sig)

    def on_push(self):
        if self.chunked:
            self.rest, self.pos, self.held_idx = self.grab(self.in_), 0, -1
            self.route()
            return
        elem = self.grab(self.in_)
        try:
            idx = self.index_of(elem)
        except Exception as e:  # noqa: BLE001
            if supervise(self, self.decider, e):
                self.pull(self.in_)
            return
        out = self.outs[idx]
        if self.is_closed(out):
            self.pull_if_any_out_is_available()
        elif self.is_available(out):
            self.push(out, elem)
            self.pull_if_any_out_is_available()
        else:
            self.pending_elem = elem
            self.pending_idx = idx

    def pull_if_any_out_is_available(self):
        if not self.chunked:
            for o in self.outs:
                if self.is_available(o):
                    self.pull(self.in_)
                    return
            return
        if self.has_been_pulled(self.in_) or self.is_closed(self.in_):
            return
        demands = [self.demand_of(o) for o in self.outs if self.is_available(o)]
        if demands:
            self.pull_chunk(self.in_, min(demands))

    def on_upstream_finish(self):
        if not self.holding():
            self.complete_stage()

    # ------------------------------------------------------------------ chunk form
    def chunk_capable(self) -> bool:
        return True

    def enable_chunks(self, chunk_size: int) -> None:
        self.chunked = True

    def route(self) -> None:
        """Split ``rest`` from ``pos`` on among the outlets until one lacks demand."""
        rest, pos, n = self.rest, self.pos, len(self.rest)
        outs = self.outs
        batches: dict = {}
        while pos < n:
            x = rest[pos]
            idx = self.held_idx
            if idx < 0:
                try:
                    idx = self.index_of(x)
                except Exception as e:  # noqa: BLE001 - supervised per element
                    d = decide(self.decider, e)
                    if d == Supervision.STOP:
                        for i, b in batches.items():
                            self.push_chunk(outs[i], b)
                        self.fail_stage(e)
                        return
                    if d == Supervision.RESTART:
                        self.reset_state()
                    pos += 1
                    continue
            out = outs[idx]
            if self.is_closed(out):  # routed to a cancelled outlet: dropped
                self.held_idx = -1
                pos += 1
                continue
            b = batches.get(idx)
            if b is None:
                if not self.is_available(out):
                    self.held_idx = idx
                    break
                b = batches[idx] = []
            elif len(b) >= self.demand_of(out):
                self.held_idx = idx
                break
            b.append(x)
            self.held_idx = -1
            pos += 1
        for i, b in batches.items():
            self.push_chunk(outs[i], b)
        if pos >= n:
            self.rest, self.pos, self.held_idx = [], 0, -1
            self.release_signals()
            if self.is_closed(self.in_):
                self.complete_stage()
            else:
                self.pull_if_any_out_is_available()
        else:
            self.pos = pos


class _PartitionOut(OutHandler):
    def __init__(self, logic: _PartitionLogic, idx: int):
        self.logic = logic
        self.idx = idx

    def on_pull(self):
        logic = self.logic
        in_ = logic.in_
        if logic.chunked:
            if logic.rest:
                logic.route()
            else:
                logic.pull_if_any_out_is_available()
            return
        if logic.pending_elem is not _NONE:
            if self.idx == logic.pending_idx:
                elem, logic.pending_elem = logic.pending_elem, _NONE
                logic.push(logic.outs[self.idx], elem)
                logic.release_signals()
                if logic.is_closed(in_):
                    logic.complete_stage()
                elif not logic.has_been_pulled(in_):
                    logic.pull(in_)
        elif not logic.has_been_pulled(in_):
            logic.pull(in_)

    def on_downstream_finish(self, cause):
        logic = self.logic
        if logic.eager_cancel:
            logic.cancel_stage(cause)
            return
        logic.running -= 1
        if logic.running == 0:
            logic.cancel_stage(cause)
        elif logic.chunked:
            if logic.rest and logic.held_idx == self.idx:
                logic.route()  # the elements waiting for this outlet are dropped
        elif logic.pending_elem is not _NONE and self.idx == logic.pending_idx:
            # the element waiting for this outlet is dropped
            logic.pending_elem = _NONE
            logic.release_signals()
            if logic.is_closed(logic.in_):
                logic.cancel_stage(cause)
            elif not logic.has_been_pulled(logic.in_):
                logic.pull(logic.in_)


# ---------------------------------------------------------------------------------------------- UnzipWith
class UnzipWith(_FanOutStage):
    """Splits each upstream element into ``n`` parts with ``fn`` (which returns a tuple of ``n``
    elements) and emits part ``i`` to outlet ``i``.

    **Emits when** all of the outputs stop backpressuring and there is an input element available.
    **Backpressures when** any of the outputs backpressures. **Completes when** upstream completes.
    **Cancels when** all downstreams cancel (with the cause of the last cancellation).

    An exception raised by ``fn`` fails the stage (no supervision, as in Pekko).
    """

    _prefix = "UnzipWith"
    _attr = "unzip_with"

    def __init__(self, fn: Callable[[Any], tuple], n: int = 2):
        require_callable(self._prefix, "fn", fn)
        require_int(self._prefix, "n", n, 2)
        super().__init__(self._prefix, n, self._attr, FanOutShapeN)
        self.fn = fn
        self.n = n

    def create_logic(self, attributes):
        return _UnzipWithLogic(self)

    def __repr__(self):
        return f"{self._prefix}({self.n})"


def _identity(x):
    return x


class Unzip(UnzipWith):
    """Splits each pair ``(a, b)`` of the upstream into ``a`` on ``out0`` and ``b`` on ``out1``.

    **Emits when** all of the outputs stop backpressuring and there is an input element available.
    **Backpressures when** any of the outputs backpressures. **Completes when** upstream completes.
    **Cancels when** all downstreams cancel.
    """

    _prefix = "Unzip"
    _attr = "unzip"

    def __init__(self):
        super().__init__(_identity, 2)

    def __repr__(self):
        return "Unzip"


class _UnzipWithLogic(GraphStageLogic, InHandler):
    stateless = True  # the parts it pushed wait in its output connections (saved there as in flight)

    def __init__(self, stage: UnzipWith):
        super().__init__(stage.shape)
        self.in_ = stage.in_
        self.outs = stage.outs
        self.fn = stage.fn
        self.n = stage.n
        self.prefix = stage._prefix
        self.pending = [True] * stage.n
        self.pending_count = stage.n
        self.running = stage.n
        self.set_handler(stage.in_, self)
        for i, o in enumerate(stage.outs):
            self.set_handler(o, _UnzipWithOut(self, i))

    def _parts(self, elem):
        parts = self.fn(elem)
        if not isinstance(parts, (tuple, list)) or len(parts) != self.n:
            raise TypeError(f"{self.prefix}: expected a tuple of {self.n} elements to split into, got {parts!r}")
        return parts

    def on_push(self):
        if self.chunked:
            self.on_push_chunk()
            return
        parts = self._parts(self.grab(self.in_))
        for i, o in enumerate(self.outs):
            if not self.is_closed(o):
                self.push(o, parts[i])
                self.pending[i] = True
        self.pending_count = self.running

    # ------------------------------------------------------------------ chunk form
    # upstream is asked for what every open outlet accepts; a chunk is split into one column per
    # outlet. ``fn`` failing fails the stage after the columns of the elements before it went out.
    chunked = False

    def chunk_capable(self) -> bool:
        return True

    def enable_chunks(self, chunk_size: int) -> None:
        self.chunked = True

    def pull_in(self) -> None:
        if self.chunked:
            self.pull_chunk(self.in_, min(
                [self.demand_of(o) for o in self.outs if not self.is_closed(o)] or [1]))
        else:
            self.pull(self.in_)

    def on_push_chunk(self):
        rows = []
        failure = None
        for x in self.grab(self.in_):
            try:
                rows.append(self._parts(x))
            except Exception as e:  # noqa: BLE001 - no supervision (as Pekko): fail after the rows before it
                failure = e
                break
        if rows:
            for i, o in enumerate(self.outs):
                if not self.is_closed(o):
                    self.push_chunk(o, [r[i] for r in rows])
                    self.pending[i] = True
            self.pending_count = self.running
        if failure is not None:
            self.fail_stage(failure)


class _UnzipWithOut(OutHandler):
    def __init__(self, logic: _UnzipWithLogic, i: int):
        self.logic = logic
        self.i = i

    def on_pull(self):
        logic = self.logic
        logic.pending_count -= 1
        logic.pending[self.i] = False
        if logic.pending_count == 0:
            logic.pull_in()

    def on_downstream_finish(self, cause):
        logic = self.logic
        logic.running -= 1
        if logic.running == 0:
            logic.cancel_stage(cause)
            return
        if logic.pending[self.i]:
            logic.pending_count -= 1
        if logic.pending_count == 0 and not logic.has_been_pulled(logic.in_):
            logic.pull_in()


__all__ = ["Broadcast", "Balance", "Partition", "Unzip", "UnzipWith"]
