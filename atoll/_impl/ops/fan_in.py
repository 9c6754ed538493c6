"""Fan-in junctions: several inlets, one outlet (Pekko's ``Merge``, ``MergePreferred``,
``MergePrioritized``, ``MergeSorted``, ``MergeLatest``, ``Zip``/``ZipWith``, ``ZipLatest``/``ZipLatestWith``,
``Concat``, ``Interleave`` and ``OrElse`` from ``scaladsl/Graph.scala``, ``MergeLatest.scala`` and the
``ZipWith``/``ZipLatestWith`` boilerplate).

Each junction is a ``GraphStage`` with more than one port, so it gets an atomic traversal builder and
is imported into a graph with ``b.add(Merge(3))`` inside a GraphDSL build function. Ports are named as
in Pekko (``Merge.in0`` .. ``Merge.out``); the stage exposes them as ``ins`` and ``out``.

Like Pekko, most fan-in junctions pull all their inputs as soon as they start, so that cycles
through them get going. ``Concat`` and ``Interleave`` have "detached inputs" as Pekko's factories
give them (Pekko puts a one-element ``Detacher`` in front of every input): each input is pulled at
start and keeps one element at hand. Here that buffer lives inside the junction's own logic instead
of in separate stages; the signals seen at the ports are the same.
"""
from __future__ import annotations

import functools

import random
from collections import deque
from typing import Any, Callable, Optional, Sequence

from ...errors import STAGE_WAS_COMPLETED, IllegalStateError, PortStateError
from ...stage._connection import EMPTY
from ...stage.attributes import Attributes
from ...stage.graph_stage import GraphStage
from ...stage.handlers import InHandler, OutHandler, eager_terminate_output, ignore_terminate_input
from ...stage.logic import GraphStageLogic
from ...stage.ports import Inlet, Outlet
from ...stage.shapes import FanInShapeN, MergePreferredShape, UniformFanInShape
from ...stage.supervision import Supervision, decide
from .base import decider_of, require_bool as _require_bool, require_callable, require_int
from .combined_timestamps import LatestPerInput, latest

_NONE = object()  # "no value yet" (elements are never None, but a private marker reads clearer)


class _FanInStage(GraphStage):
    """Common part: ``n`` inlets named ``<prefix>.in<i>`` and ``out`` named ``<prefix>.out``."""

    def __init__(self, prefix: str, n: int, attr_name: str, shape_type=UniformFanInShape):
        self.ins = tuple(Inlet(f"{prefix}.in{i}") for i in range(n))
        self.out = Outlet(f"{prefix}.out")
        self.shape = shape_type(self.out, self.ins)
        self.initial_attributes = Attributes.name(attr_name)

    def in_(self, i: int) -> Inlet:
        return self.ins[i]


# ---------------------------------------------------------------------------------------------- Merge
class Merge(_FanInStage):
    """Merges ``n`` inputs into one stream, taking elements as they arrive.

    When several inputs have an element waiting, they are served in the order in which their
    elements arrived (as Pekko's implementation does; its documentation says "randomly").

    **Emits when** one of the inputs has an element available. **Backpressures when** downstream
    backpressures. **Completes when** all upstreams complete (``eager_complete=False``) or one
    upstream completes (``eager_complete=True``; the other inputs are cancelled and the elements
    they already delivered are dropped). **Cancels when** downstream cancels.
    """

    def __init__(self, n: int, eager_complete: bool = False):
        require_int("Merge", "n", n, 1)
        _require_bool("Merge", "eager_complete", eager_complete)
        super().__init__("Merge", n, "merge")
        self.n = n
        self.eager_complete = eager_complete

    def create_logic(self, attributes):
        return _MergeLogic(self)

    def __repr__(self):
        return f"Merge({self.n})"


class _MergeLogic(GraphStageLogic, OutHandler):
    """Element form as Pekko's. Chunk form: every input is asked for what downstream asked for last
    (one element before downstream pulled); a chunk that downstream cannot take at once waits whole
    in ``bufs`` and the inputs holding elements are served in the order their chunks arrived (FIFO
    among inputs per chunk). Held elements keep the signals that arrive after them: a signal goes out
    once every element held when it arrived is out (``marks``)."""
    pulls_ahead = True  # chunk regions: every input is asked, one element read ahead each

    def __init__(self, stage: Merge):
        super().__init__(stage.shape)
        self.ins = stage.ins
        self.out = stage.out
        self.eager_complete = stage.eager_complete
        self.pending: deque = deque()  # inlets holding an element (chunk form: their index), in arrival order
        self.running = stage.n
        self.chunked = False
        self.emitted = 0  # elements pushed so far
        self.marks: deque = deque()  # [emitted-count to reach, signal]
        for in_ in stage.ins:
            self.set_handler(in_, _MergeIn(self, in_))
        self.set_handler(stage.out, self)

    # checkpoint state. Element form: the elements waiting in its inputs are in-flight elements of the
    # connections; only the signals held behind them are saved (counted from the cut). Chunk form: the
    # received elements not pushed yet, per input in arrival order, are state.
    restored_held: list = []

    def save_to_snapshot(self):
        held = [(i, list(self.bufs[i][self.offs[i]:])) for i in self.pending] if self.chunked else []
        return (held, [(m[0] - self.emitted, m[1]) for m in self.marks])

    def restore_from_snapshot(self, state) -> None:
        held, marks = state
        self.restored_held = held
        self.emitted = 0
        self.marks = deque([list(m) for m in marks])

    def pre_start(self):
        held = dict(self.restored_held)
        if held:
            if not self.chunked:
                raise IllegalStateError(f"{self}: restored chunk-form elements into an element-form merge")
            for i, elems in self.restored_held:
                self.bufs[i], self.offs[i] = elems, 0
                self.pending.append(i)
            self.restored_held = []
        for i, in_ in enumerate(self.ins):
            if self.chunked:
                if not self.is_closed(in_) and i not in held:
                    self.pull_chunk(in_, 1)
            else:
                self.try_pull(in_)

    # ------------------------------------------------------------------ signals
    def held(self) -> int:
        if self.chunked:
            return sum(len(self.bufs[i]) - self.offs[i] for i in self.pending)
        return sum(1 for in_ in self.pending if self.is_available(in_))

    def on_signal(self, signal) -> None:
        held = self.held()
        if held == 0 and not self.marks:
            self.forward_signal(signal)
        else:
            self.marks.append([self.emitted + held, signal])

    def _release(self) -> None:
        marks = self.marks
        while marks and marks[0][0] <= self.emitted:
            self.forward_signal(marks.popleft()[1])

    def _drop_marks_beyond(self) -> None:
        """Held elements were dropped (eager completion): the signals behind them go now."""
        while self.marks:
            self.forward_signal(self.marks.popleft()[1])

    # ------------------------------------------------------------------ element form
    def on_pull(self):
        if self.pending:
            self.dequeue_and_dispatch()

    def dequeue_and_dispatch(self):
        pending = self.pending
        while pending:
            in_ = pending.popleft()
            if self.is_available(in_):
                self.push(self.out, self.grab(in_))
                self.emitted += 1
                self._release()
                if self.running == 0 and not pending:
                    self.complete_stage()
                else:
                    self.try_pull(in_)
                return
            # the inlet was cancelled after its element arrived (eager completion): skip it
        if self.running == 0:
            self.complete_stage()

    # ------------------------------------------------------------------ chunk form
    def chunk_capable(self) -> bool:
        return True

    def enable_chunks(self, chunk_size: int) -> None:
        self.chunked = True
        n = len(self.ins)
        self.bufs = [None] * n
        self.offs = [0] * n
        self.last_demand = 1
        for i, in_ in enumerate(self.ins):
            self.set_handler(in_, InHandler(on_push=functools.partial(self._on_push_chunk, i),
                                            on_upstream_finish=functools.partial(self._on_finish_chunk, i)))
        self.set_handler(self.out, OutHandler(on_pull=self._on_pull_chunk, on_downstream_finish=self.on_downstream_finish))

    def _on_push_chunk(self, i: int) -> None:
        self.bufs[i], self.offs[i] = self.grab(self.ins[i]), 0
        self.pending.append(i)
        if self.is_available(self.out):
            self._dispatch_chunk()

    def _on_pull_chunk(self) -> None:
        self.last_demand = self._out_conns[0].demand
        if self.pending:
            self._dispatch_chunk()

    def _dispatch_chunk(self) -> None:
        d = self._out_conns[0].demand
        if self.marks:  # a held signal goes right after the last element it must follow
            d = min(d, self.marks[0][0] - self.emitted)
        pending, bufs, offs = self.pending, self.bufs, self.offs
        out: list = []
        refill = []
        while pending and len(out) < d:
            i = pending[0]
            b, o = bufs[i], offs[i]
            take = min(d - len(out), len(b) - o)
            if o == 0 and take == len(b) and not out:
                out = b  # the whole chunk goes on as it is (never mutated)
            else:
                out.extend(b[o:o + take])
            o += take
            if o >= len(b):
                pending.popleft()
                bufs[i], offs[i] = None, 0
                refill.append(i)
            else:
                offs[i] = o
        if out:
            self.emitted += len(out)
            self.push_chunk(self.out, out)
            self._release()
        if self.running == 0 and not pending:
            self._drop_marks_beyond()
            self.complete_stage()
            return
        for i in refill:
            in_ = self.ins[i]
            if not self.is_closed(in_) and not self.has_been_pulled(in_):
                self.pull_chunk(in_, self.last_demand)

    def _on_finish_chunk(self, i: int) -> None:
        if self.eager_complete:
            for in_ in self.ins:
                self.cancel(in_)
            self.running = 0
            # the elements the other inputs delivered are dropped, as in the element form
            keep = [j for j in self.pending if j == i]
            for j in self.pending:
                if j != i:
                    self.bufs[j], self.offs[j] = None, 0
            self.pending = deque(keep)
        else:
            self.running -= 1
        if self.running == 0 and not self.pending:
            self._drop_marks_beyond()
            self.complete_stage()


class _MergeIn(InHandler):
    def __init__(self, logic: _MergeLogic, in_: Inlet):
        self.logic = logic
        self.in_ = in_

    def on_push(self):
        logic = self.logic
        if logic.is_available(logic.out):
            # demand on out implies nothing is pending
            logic.push(logic.out, logic.grab(self.in_))
            logic.emitted += 1
            logic._release()
            logic.try_pull(self.in_)
        else:
            logic.pending.append(self.in_)

    def on_upstream_finish(self):
        logic = self.logic
        if logic.eager_complete:
            for in_ in logic.ins:
                logic.cancel(in_)
            logic.running = 0
        else:
            logic.running -= 1
        if logic.running == 0 and not logic.pending:
            logic._drop_marks_beyond()
            logic.complete_stage()


# ---------------------------------------------------------------------------------------------- chunk form of buffering fan-ins
class _BufferedChunkFanIn:
    """The chunk form shared by ``MergePreferred``, ``MergePrioritized``, ``MergeSorted`` and
    ``Interleave`` (mixed into their logics; each has its element form as Pekko's besides).

    Each input's received chunk waits in ``bufs[i]`` (read from ``offs[i]``, never mutated: a chunk may
    be shared). The subclass builds one output chunk per downstream pull in ``_fill(d)`` with
    ``_take``. The rules kept here:

    * demand: an input is pulled only once it has nothing held, for what the last pull downstream
      still wants (``wanted``, the demand the next pull brings), or one element once that is met (the
      element form's one element read ahead per input); at start every input is asked for one;
    * failure: an input's failure waits until every element it delivered before it went out (element-
      wise, the failing element is pulled only after those were emitted); then the stage fails;
    * signals: a signal the stage hears is held until every element held when it arrived went out
      (``got``/``taken`` count per input; ``marks`` keeps ``(got snapshot, signal)``); an output chunk
      ends where a held signal is due. An input whose elements reached the mark of a held unordered
      signal (a barrier) gives nothing more until that signal is out; ordered signals (watermarks)
      only wait: a watermark may come later than its place, never earlier (a sorted merge or an
      interleave may have to emit an element that came after it before one that came before it).
    """
    pulls_ahead = True  # chunk regions: every input is asked, one element read ahead each

    def _chunk_init(self, ins) -> None:
        n = len(ins)
        self.chunked = True
        self.bufs = [_NO_CHUNK] * n
        self.offs = [0] * n
        self.done = [False] * n  # the input completed (its held elements still go out)
        self.failed = [None] * n  # the input failed: the failure, once its held elements are out
        self.got = [0] * n  # elements received per input
        self.taken = [0] * n  # elements sent on (or dropped) per input
        self.marks: deque = deque()  # (got snapshot, signal) held behind elements
        self.wanted = 1
        for i, in_ in enumerate(ins):
            self.set_handler(in_, InHandler(on_push=functools.partial(self._on_push_chunk, i),
                                            on_upstream_finish=functools.partial(self._on_finish_chunk, i),
                                            on_upstream_failure=functools.partial(self._on_failure_chunk, i)))
        self.set_handler(self.out, OutHandler(on_pull=self._on_pull_chunk, on_downstream_finish=self.cancel_stage))

    def _chunk_start(self) -> None:
        for i, in_ in enumerate(self.ins_all):
            if not self.is_closed(in_) and not self.held(i):
                self.pull_chunk(in_, 1)

    # -- per input
    def held(self, i: int) -> int:
        return len(self.bufs[i]) - self.offs[i]

    def available(self, i: int) -> int:
        """How many held elements of input ``i`` may go out now (a held signal may block the rest)."""
        h = len(self.bufs[i]) - self.offs[i]
        if self.marks and h:
            for got, signal in self.marks:
                if not type(signal).ordered:
                    return min(h, got[i] - self.taken[i])
        return h

    def closed(self, i: int) -> bool:
        """Input ``i`` will bring nothing more (completed or failed, and nothing held)."""
        return (self.done[i] or self.failed[i] is not None) and not self.held(i)

    def _take(self, i: int, k: int) -> list:
        b, o = self.bufs[i], self.offs[i]
        piece = b if o == 0 and k == len(b) else b[o:o + k]
        o += k
        if o >= len(b):
            self.bufs[i], self.offs[i] = _NO_CHUNK, 0
        else:
            self.offs[i] = o
        self.taken[i] += k
        return piece

    def _drop_held(self, i: int) -> None:
        self.taken[i] += self.held(i)
        self.bufs[i], self.offs[i] = _NO_CHUNK, 0

    # -- events
    def _on_push_chunk(self, i: int) -> None:
        chunk = self.grab(self.ins_all[i])
        held = self.held(i)
        self.bufs[i] = chunk if not held else self.bufs[i][self.offs[i]:] + chunk
        self.offs[i] = 0
        self.got[i] += len(chunk)
        self._on_arrival(i)
        self._serve()

    def _on_pull_chunk(self) -> None:
        self.wanted = self._out_conns[0].demand
        self._serve()

    def _on_finish_chunk(self, i: int) -> None:
        self.done[i] = True
        self._input_ended(i)

    def _on_failure_chunk(self, i: int, exc: BaseException) -> None:
        if not self.held(i):
            self.fail_stage(exc)
            return
        self.failed[i] = exc

    def _on_arrival(self, i: int) -> None:
        """Hook: input ``i`` brought a chunk."""

    def _input_ended(self, i: int) -> None:
        """Hook: input ``i`` completed (its held elements may still be waiting)."""
        self._serve()

    def _serve(self) -> None:
        if self.is_available(self.out) and not self.is_closed(self.out):
            d = self._out_conns[0].demand
            try:
                out = self._fill(d)
            except _FailAfter as f:
                if f.out:
                    self.push_chunk(self.out, f.out)
                self.fail_stage(f.exc)
                return
            if out:
                self.push_chunk(self.out, out)
                self.wanted -= len(out)
                self._release()
        if self._finish_if_done():
            return
        for i, in_ in enumerate(self.ins_all):
            if not self.held(i) and not self.is_closed(in_) and not self.has_been_pulled(in_):
                self.pull_chunk(in_, self._ask(i))

    def _ask(self, i: int) -> int:
        """How many elements to ask input ``i`` for (it holds none)."""
        return max(1, self.wanted)

    def _finish_if_done(self) -> bool:
        for i, exc in enumerate(self.failed):
            if exc is not None and not self.held(i):
                self.fail_stage(exc)
                return True
        if self._all_done():
            self._release_all()
            self.complete_stage()
            return True
        return False

    def _all_done(self) -> bool:
        return all(self.closed(i) for i in range(len(self.bufs)))

    # -- signals
    def _chunk_signal(self, signal) -> None:
        if self.marks or any(self.held(i) for i in range(len(self.bufs))):
            self.marks.append((list(self.got), signal))
        else:
            self.forward_signal(signal)

    def _mark_due(self) -> bool:
        if not self.marks:
            return False
        m = self.marks[0][0]
        return all(t >= g for t, g in zip(self.taken, m))

    def _release(self) -> None:
        while self._mark_due():
            self.forward_signal(self.marks.popleft()[1])

    def _release_all(self) -> None:
        while self.marks:
            self.forward_signal(self.marks.popleft()[1])

    # -- checkpoint state: the elements received and not sent on, per input, and the signals held
    # behind them (a mark counts per input how many of the held elements must go out first)
    def _chunk_save(self) -> dict:
        return {"held": [list(self.bufs[i][self.offs[i]:]) for i in range(len(self.bufs))],
                "marks": [([max(0, g - t) for g, t in zip(got, self.taken)], signal) for got, signal in self.marks]}

    def _chunk_restore(self, state: dict) -> None:
        held = state["held"]
        self.bufs = [list(h) if h else _NO_CHUNK for h in held]
        self.offs = [0] * len(held)
        self.got = [len(h) for h in held]
        self.taken = [0] * len(held)
        self.marks = deque((list(got), signal) for got, signal in state["marks"])


class _FailAfter(Exception):
    """Raised by a ``_fill`` whose user function failed: push ``out`` (the elements before), then fail."""

    def __init__(self, out: list, exc: BaseException):
        super().__init__(exc)
        self.out = out
        self.exc = exc


_NO_CHUNK: list = []


class _MergeChunkForm(_BufferedChunkFanIn):
    """Chunk form of the merges that choose among inputs holding elements (``MergePreferred``,
    ``MergePrioritized``): ``_pick()`` names the input the next elements come from and ``_piece``
    how many it gives at once; completion as the element form (all inputs, or with
    ``eager_complete`` the first: the others are cancelled and what they delivered is dropped)."""

    chunked = False

    def chunk_capable(self) -> bool:
        return True

    def enable_chunks(self, chunk_size: int) -> None:
        self._chunk_init(self.ins_all)
        self.arrivals: deque = deque()  # inputs holding elements, in the order their chunks arrived

    def _on_arrival(self, i: int) -> None:
        if i not in self.arrivals:
            self.arrivals.append(i)

    def _input_ended(self, i: int) -> None:
        if self.eager_complete:
            for j, in_ in enumerate(self.ins_all):
                self.done[j] = True
                if j != i:
                    self.cancel(in_)
                    self._drop_held(j)
            self.arrivals = deque(j for j in self.arrivals if j == i)
            self._release()
        self._serve()

    def _fill(self, d: int) -> list:
        out: list = []
        while len(out) < d:
            i = self._pick()
            if i is None:
                break
            out.extend(self._take(i, min(self._piece(i), d - len(out))))
            if not self.held(i):
                self.arrivals.remove(i)
            if self._mark_due():
                break
        return out

    def _piece(self, i: int) -> int:
        return self.available(i)

    def on_signal(self, signal) -> None:
        if self.chunked:
            self._chunk_signal(signal)
        else:
            self.forward_signal(signal)

    def _chunk_save(self) -> dict:
        state = super()._chunk_save()
        state["arrivals"] = list(self.arrivals)
        return state

    def _chunk_restore(self, state: dict) -> None:
        super()._chunk_restore(state)
        self.arrivals = deque(state["arrivals"])


# ---------------------------------------------------------------------------------------------- MergePreferred
class MergePreferred(GraphStage):
    """Merges a ``preferred`` input and ``n`` secondary inputs (``ins``); when several have an
    element, the preferred one goes first (up to two preferred elements may be on their way before a
    secondary one gets a turn).

    **Emits when** one of the inputs has an element available, preferring the preferred input if
    several have elements available. **Backpressures when** downstream backpressures. **Completes
    when** all upstreams complete (``eager_complete=False``) or one upstream completes
    (``eager_complete=True``). **Cancels when** downstream cancels.
    """

    #: how many preferred elements may be emitting at once before the secondaries are blocked;
    #: Pekko's measure of how unfair the merge is (2: the preferred input takes nearly everything)
    max_emitting = 2

    def __init__(self, n: int, eager_complete: bool = False):
        require_int("MergePreferred", "n", n, 1)
        _require_bool("MergePreferred", "eager_complete", eager_complete)
        self.n = n
        self.eager_complete = eager_complete
        self.ins = tuple(Inlet(f"MergePreferred.in{i}") for i in range(n))
        self.preferred = Inlet("MergePreferred.preferred")
        self.out = Outlet("MergePreferred.out")
        self.shape = MergePreferredShape(self.out, self.ins, self.preferred)
        self.initial_attributes = Attributes.name("merge_preferred")

    def in_(self, i: int) -> Inlet:
        return self.ins[i]

    def create_logic(self, attributes):
        return _MergePreferredLogic(self)

    def __repr__(self):
        return f"MergePreferred({self.n})"


class _MergePreferredLogic(_MergeChunkForm, GraphStageLogic, OutHandler):
    """Pekko's logic, with its ``emit`` calls served by a FIFO queue of ``(element, and_then)`` kept
    here: an emission started by the ``and_then`` of another always goes after the emissions already
    waiting, so each input's order is kept.

    Chunk form (``_MergeChunkForm``): an output chunk takes what the preferred input holds first, then
    the secondary inputs' held elements in the order their chunks arrived: one element each while the
    preferred input is open (their turn when it has nothing at hand), as many as fit once it ended."""

    def __init__(self, stage: MergePreferred):
        super().__init__(stage.shape)
        self.ins = stage.ins
        self.preferred = stage.preferred
        self.out = stage.out
        self.eager_complete = stage.eager_complete
        self.max_emitting = stage.max_emitting
        self.open_inputs = stage.n + 1
        self.preferred_emitting = 0
        self.emitting: deque = deque()  # (element, and_then) waiting for demand
        self.completing = False  # the stage completes once the waiting elements are out
        self.pull_me = [self._puller(in_) for in_ in stage.ins]
        self.ins_all = stage.ins + (stage.preferred,)
        self.set_handler(stage.out, self)
        self.set_handler(stage.preferred, InHandler(on_push=self._on_preferred_push, on_upstream_finish=self._on_finish))
        for i, in_ in enumerate(stage.ins):
            self.set_handler(in_, InHandler(on_push=self._secondary_push(i), on_upstream_finish=self._on_finish))

    def _puller(self, in_):
        return lambda: self.try_pull(in_)

    # checkpoint state. Element form: the elements taken from the inputs and waiting for demand, with the
    # input each came from (-1: preferred; its continuation is rebuilt from that); the elements waiting in
    # the input ports are in flight. Chunk form: the held chunks, their arrival order and held signals.
    def save_to_snapshot(self):
        if self.chunked:
            return {"chunks": self._chunk_save()}
        pulls = {id(p): i for i, p in enumerate(self.pull_me)}
        return {"emitting": [(elem, _SIGNAL_ENTRY if and_then is None else -1 if and_then == self._emitted
                              else pulls[id(and_then)]) for elem, and_then in self.emitting]}

    def restore_from_snapshot(self, state) -> None:
        if self.chunked:
            self._chunk_restore(state["chunks"])
            return
        for elem, i in state["emitting"]:
            if i == _SIGNAL_ENTRY:
                self.emitting.append((elem, None))
                continue
            self.emitting.append((elem, self._emitted if i == -1 else self.pull_me[i]))
            if i == -1:
                self.preferred_emitting += 1

    def on_signal(self, signal) -> None:
        """Element form: a signal waits behind the elements queued for demand (``(signal, None)`` in ``emitting``)."""
        if self.chunked:
            self._chunk_signal(signal)
        elif self.emitting:
            self.emitting.append((signal, None))
        else:
            self.forward_signal(signal)

    def _forward_queued_signals(self) -> None:
        em = self.emitting
        while em and em[0][1] is None:
            self.forward_signal(em.popleft()[0])

    def pre_start(self):
        if self.chunked:
            self._chunk_start()
            return
        waiting = {id(and_then) for _, and_then in self.emitting}
        for i, in_ in enumerate(self.ins):
            if id(self.pull_me[i]) not in waiting:  # pulled again once its element is out
                self.try_pull(in_)
        self.try_pull(self.preferred)

    def _pick(self):
        p = len(self.ins)
        if self.available(p):
            return p
        for i in self.arrivals:
            if self.available(i) and i not in self.served:
                return i
        return None

    def _fill(self, d: int) -> list:
        # while the preferred input is open, a secondary gives one element per output chunk (its turn
        # when the preferred input has nothing at hand, as element-wise); once it ended, as much as fits
        self.served = set()
        return super()._fill(d)

    def _piece(self, i: int) -> int:
        if i != len(self.ins) and not self.closed(len(self.ins)):
            self.served.add(i)
            return 1
        return self.available(i)

    # -- emissions (Pekko's emit: push now if downstream waits and nothing is queued, else queue)
    def _emit(self, elem, and_then) -> None:
        if not self.emitting and self.is_available(self.out):
            self.push(self.out, elem)
            and_then()
        else:
            self.emitting.append((elem, and_then))

    def on_pull(self):
        if self.emitting:
            elem, and_then = self.emitting.popleft()
            self.push(self.out, elem)
            self._forward_queued_signals()
            and_then()
        if self.completing and not self.emitting:
            self.complete_stage()

    def _on_finish(self):
        self.open_inputs -= 1
        if self.eager_complete or self.open_inputs == 0:
            if self.emitting:
                # like complete_stage during emit: inputs go now, the output after its elements
                for in_ in self.ins + (self.preferred,):
                    self.cancel(in_, STAGE_WAS_COMPLETED)
                self.completing = True
            else:
                self.complete_stage()

    # -- preferred input
    def _on_preferred_push(self):
        if self.preferred_emitting != self.max_emitting:
            self._emit_preferred()
        # else: blocked; the element waits in the port until an emission finished

    def _emit_preferred(self):
        self.preferred_emitting += 1
        self._emit(self.grab(self.preferred), self._emitted)
        self.try_pull(self.preferred)

    def _emitted(self):
        self.preferred_emitting -= 1
        if self.is_available(self.preferred):
            self._emit_preferred()
        elif self.preferred_emitting == 0:
            self._emit_secondary()

    def _emit_secondary(self):
        for i, in_ in enumerate(self.ins):
            if self.is_available(in_):
                self._emit(self.grab(in_), self.pull_me[i])

    # -- secondary inputs
    def _secondary_push(self, i: int):
        in_ = self.ins[i]
        pull = self.pull_me[i]

        def on_push():
            if self.preferred_emitting == 0:
                self._emit(self.grab(in_), pull)
            # else: blocked until the preferred elements are out

        return on_push


#: ``MergePreferred``'s saved ``emitting`` entry that is a signal, not an element
_SIGNAL_ENTRY = -2


# ---------------------------------------------------------------------------------------------- MergePrioritized
class MergePrioritized(_FanInStage):
    """Merges inputs, picking at random among the inputs that have an element, each with a weight
    proportional to its priority (``priorities[i]`` for input ``i``).

    ``seed`` (an Atoll addition) fixes the random choices, for reproducible tests.

    **Emits when** one of the inputs has an element available, preferring inputs with higher
    priorities if several have elements available. **Backpressures when** downstream backpressures.
    **Completes when** all upstreams complete (``eager_complete=False``) or one upstream completes
    (``eager_complete=True``). **Cancels when** downstream cancels.
    """

    def __init__(self, priorities: Sequence[int], eager_complete: bool = False, seed: Optional[int] = None):
        if isinstance(priorities, (str, bytes)) or not isinstance(priorities, Sequence):
            raise TypeError(f"MergePrioritized: argument 'priorities' must be a sequence of ints, got {priorities!r}")
        priorities = tuple(priorities)
        if not priorities:
            raise ValueError("MergePrioritized: argument 'priorities' must name one or more input ports, got ()")
        for p in priorities:
            if isinstance(p, bool) or not isinstance(p, int):
                raise TypeError(f"MergePrioritized: argument 'priorities' must hold ints, got {p!r}")
            if p <= 0:
                raise ValueError(f"MergePrioritized: argument 'priorities' must be positive, got {list(priorities)}")
        _require_bool("MergePrioritized", "eager_complete", eager_complete)
        super().__init__("MergePrioritized", len(priorities), "merge_prioritized")
        self.priorities = priorities
        self.eager_complete = eager_complete
        self.seed = seed

    def create_logic(self, attributes):
        return _MergePrioritizedLogic(self)

    def __repr__(self):
        return f"MergePrioritized({list(self.priorities)})"


class _MergePrioritizedLogic(_MergeChunkForm, GraphStageLogic, OutHandler):
    """Element form as Pekko's. Chunk form (``_MergeChunkForm``): each element of an output chunk is
    drawn as the element form draws one: from an input holding elements, chosen at random with
    weights proportional to the priorities."""

    def __init__(self, stage: MergePrioritized):
        super().__init__(stage.shape)
        self.ins = stage.ins
        self.ins_all = stage.ins
        self.out = stage.out
        self.priorities = stage.priorities
        self.eager_complete = stage.eager_complete
        self.random = random.Random(stage.seed)
        self.running = len(stage.ins)
        for in_ in stage.ins:
            self.set_handler(in_, InHandler(on_push=self._on_push(in_), on_upstream_finish=self._on_finish))
        self.set_handler(stage.out, self)

    # checkpoint state: the random generator's state (the choices after a restore are the ones an
    # uninterrupted run makes) and, in the chunk form, the held chunks (element form: they wait in the ports)
    def save_to_snapshot(self):
        return {"random": self.random.getstate(), "chunks": self._chunk_save() if self.chunked else None}

    def restore_from_snapshot(self, state) -> None:
        self.random.setstate(state["random"])
        if state["chunks"] is not None:
            if not self.chunked:
                raise IllegalStateError(f"{self}: restored chunk-form elements into an element-form merge")
            self._chunk_restore(state["chunks"])

    def pre_start(self):
        if self.chunked:
            self._chunk_start()
            return
        for in_ in self.ins:
            self.try_pull(in_)

    def _pick(self):
        avail = [(i, p) for i, p in enumerate(self.priorities) if self.available(i)]
        if not avail:
            return None
        r = self.random.randrange(sum(p for _, p in avail))
        for i, p in avail:
            r -= p
            if r < 0:
                return i
        return avail[-1][0]  # not reached

    def _piece(self, i: int) -> int:
        return 1

    def _on_push(self, in_):
        def on_push():
            if self.is_available(self.out) and not self._other_available(in_):
                self.push(self.out, self.grab(in_))
                self.try_pull(in_)

        return on_push

    def _on_finish(self):
        if self.eager_complete:
            for in_ in self.ins:
                self.cancel(in_)
            self.running = 0
        else:
            self.running -= 1
        if self.running == 0 and not self._has_pending():
            self.complete_stage()

    def on_pull(self):
        in_ = self._select()
        if in_ is not None:
            self.push(self.out, self.grab(in_))
            if self.running == 0 and not self._has_pending():
                self.complete_stage()
            else:
                self.try_pull(in_)

    def _has_pending(self) -> bool:
        return any(self.is_available(in_) for in_ in self.ins)

    def _other_available(self, excluded) -> bool:
        return any(in_ is not excluded and self.is_available(in_) for in_ in self.ins)

    def _select(self):
        available = [(in_, p) for in_, p in zip(self.ins, self.priorities) if self.is_available(in_)]
        if not available:
            return None
        r = self.random.randrange(sum(p for _, p in available))
        for in_, p in available:
            r -= p
            if r < 0:
                return in_
        return available[-1][0]  # not reached


# ---------------------------------------------------------------------------------------------- MergeSorted
class MergeSorted(GraphStage):
    """Merges two sorted inputs into one sorted stream (``in0`` and ``in1``; Pekko's ``left`` and
    ``right``). Elements are compared with ``<``, or by ``key(element)`` when ``key`` is given; on a
    tie the element of ``in1`` goes first (as Pekko). An input that is not sorted gives an unsorted
    result, not an error.

    **Emits when** both inputs have an element available (or one input completed and the other has
    one). **Backpressures when** downstream backpressures. **Completes when** all upstreams complete.
    **Cancels when** downstream cancels.
    """

    def __init__(self, key: Optional[Callable[[Any], Any]] = None):
        if key is not None:
            require_callable("MergeSorted", "key", key)
        self.key = key
        self.ins = (Inlet("MergeSorted.in0"), Inlet("MergeSorted.in1"))
        self.left, self.right = self.ins
        self.out = Outlet("MergeSorted.out")
        self.shape = FanInShapeN(self.out, self.ins)
        self.initial_attributes = Attributes.name("merge_sorted")

    def create_logic(self, attributes):
        return _MergeSortedLogic(self)

    def __repr__(self):
        return "MergeSorted"


class _MergeSortedLogic(_BufferedChunkFanIn, GraphStageLogic, OutHandler):
    """Element form: the head taken from each input waits in ``heads`` until it can be compared with the
    other input's head (or the other input ended); the smaller goes out when downstream pulls (a tie takes
    ``right``, as Pekko), and only its input is pulled again - Pekko's ``read``/``emit`` sequence, kept
    as fields instead of continuations so that a checkpoint can save it. Chunk form (``_BufferedChunkFanIn``):
    both inputs' chunks wait in their buffers and an output chunk merges them element by element with the
    same comparisons, as far as both inputs hold elements, or one input once the other has ended; a raising
    ``key`` fails the stage after the elements merged before it."""

    chunked = False

    def __init__(self, stage: MergeSorted):
        super().__init__(stage.shape)
        self.left = stage.left
        self.right = stage.right
        self.ins_all = (stage.left, stage.right)
        self.out = stage.out
        key = stage.key
        self.less = (lambda a, b: a < b) if key is None else (lambda a, b: key(a) < key(b))
        self.heads = [_NONE, _NONE]  # element form: taken from the input, not emitted yet
        self.ended = [False, False]  # element form: the input completed
        for i, in_ in enumerate(self.ins_all):
            self.set_handler(in_, InHandler(on_push=functools.partial(self._on_push, i),
                                            on_upstream_finish=functools.partial(self._on_finish, i)))
        self.set_handler(self.out, self)

    # ------------------------------------------------------------------ checkpoint state
    def save_to_snapshot(self):
        if self.chunked:
            return {"chunks": self._chunk_save()}
        return {"heads": [(h is not _NONE, None if h is _NONE else h) for h in self.heads]}

    def restore_from_snapshot(self, state) -> None:
        if self.chunked != ("chunks" in state):
            raise IllegalStateError(f"{self}: restored a checkpoint of the other form (chunks vs elements)")
        if self.chunked:
            self._chunk_restore(state["chunks"])
        else:
            self.heads = [h if has else _NONE for has, h in state["heads"]]

    # ------------------------------------------------------------------ chunk form
    def chunk_capable(self) -> bool:
        return True

    def enable_chunks(self, chunk_size: int) -> None:
        self._chunk_init(self.ins_all)

    def on_signal(self, signal) -> None:
        if self.chunked:
            self._chunk_signal(signal)
        else:
            self.forward_signal(signal)

    def _fill(self, d: int) -> list:
        out: list = []
        bufs, offs, less = self.bufs, self.offs, self.less
        while len(out) < d:
            al, ar = self.available(0), self.available(1)
            if al and ar:
                try:
                    i = 0 if less(bufs[0][offs[0]], bufs[1][offs[1]]) else 1
                except Exception as e:  # noqa: BLE001 - the key function failed: the merged part goes first
                    raise _FailAfter(out, e) from None
                out.extend(self._take(i, 1))
            elif al and self.closed(1):
                out.extend(self._take(0, min(al, d - len(out))))
            elif ar and self.closed(0):
                out.extend(self._take(1, min(ar, d - len(out))))
            else:
                break
            if self._mark_due():
                break
        return out

    # ------------------------------------------------------------------ element form
    def pre_start(self):
        if self.chunked:
            self._chunk_start()
            return
        # like every fan-in stage, pull all inputs right away (cycles need it); a restored head waits
        for i in (1, 0):  # Pekko's order: right, then left
            if self.heads[i] is _NONE:
                self.pull(self.ins_all[i])

    def _on_push(self, i: int) -> None:
        self.heads[i] = self.grab(self.ins_all[i])
        self._try_emit()

    def _on_finish(self, i: int) -> None:
        self.ended[i] = True
        self._try_emit()

    def on_pull(self):
        self._try_emit()

    def _try_emit(self) -> None:
        left, right = self.heads
        if left is not _NONE and right is not _NONE:
            if not self.is_available(self.out):
                return
            i = 0 if self.less(left, right) else 1
        elif left is not _NONE and self.ended[1]:
            i = 0
        elif right is not _NONE and self.ended[0]:
            i = 1
        else:
            if self.ended[0] and self.ended[1]:
                self.complete_stage()
            elif (self.ended[0] or self.ended[1]) and self.is_available(self.out):
                # one input ended: the other one's elements pass along as downstream asks
                j = 1 if self.ended[0] else 0
                if not self.has_been_pulled(self.ins_all[j]) and not self.is_closed(self.ins_all[j]):
                    self.pull(self.ins_all[j])
            return
        if not self.is_available(self.out):
            return
        elem, self.heads[i] = self.heads[i], _NONE
        self.push(self.out, elem)
        if self.ended[i]:
            if self.ended[1 - i] and self.heads[1 - i] is _NONE:
                self.complete_stage()
        elif not self.has_been_pulled(self.ins_all[i]):
            self.pull(self.ins_all[i])


# ---------------------------------------------------------------------------------------------- MergeLatest
class MergeLatest(_FanInStage):
    """Emits, once every input has delivered an element, the list of the latest element of each input
    (``[latest of in0, latest of in1, ...]``), and again each time any input delivers one.

    Deviation from Pekko, whose implementation pulls an input again right after each element and
    so may queue any number of lists while downstream is slow: here an input is pulled again only
    after the list its element produced has been emitted, so at most one list per input waits for
    downstream and memory stays bounded.

    **Emits when** an element is available from some input and each input has emitted at least one
    element since the stream started. **Backpressures when** downstream backpressures. **Completes
    when** all upstreams complete (``eager_complete=False``) or one upstream completes
    (``eager_complete=True``). **Cancels when** downstream cancels.
    """

    def __init__(self, n: int, eager_complete: bool = False):
        require_int("MergeLatest", "n", n, 1)
        _require_bool("MergeLatest", "eager_complete", eager_complete)
        super().__init__("MergeLatest", n, "merge_latest")
        self.n = n
        self.eager_complete = eager_complete

    def create_logic(self, attributes):
        return _MergeLatestLogic(self)

    def __repr__(self):
        return f"MergeLatest({self.n})"


class _MergeLatestLogic(LatestPerInput, GraphStageLogic, OutHandler):
    """Element form only, on purpose: every arrival is emitted as its own list of the latest values,
    and which lists exist depends on how arrivals interleave with pulls. A chunk form would still make
    one output per input element (nothing to batch but the port events) and would sample other lists
    than the element form under the same demand. Between chunked neighbours the adapters keep it
    exact.

    The lists waiting for demand sit in ``queue`` with the input to pull once each is out (an ``emit``
    with a continuation, written out so that a checkpoint can save it); a signal heard meanwhile waits in
    the queue behind them. Event time: a list carries the max timestamp of the latest elements it lists, taken
    when the list is made (``LatestPerInput``)."""
    pulls_ahead = True  # every input is pulled at start, whatever downstream asked for

    def __init__(self, stage: MergeLatest):
        super().__init__(stage.shape)
        self.ins = stage.ins
        self.out = stage.out
        self.eager_complete = stage.eager_complete
        self.messages = [_NONE] * stage.n
        self.missing = stage.n  # inputs that have not delivered an element yet
        self.running = stage.n
        self.queue: deque = deque()  # (list, input index) waiting for demand, or (signal, None)
        self.completing = False  # complete once the queue is out
        for i, in_ in enumerate(stage.ins):
            self.set_handler(in_, InHandler(on_push=self._on_push(i), on_upstream_finish=self._on_finish))
        self.set_handler(stage.out, self)

    # checkpoint state: the latest value per input and the lists (and signals) waiting for demand
    def save_to_snapshot(self):
        state = {"latest": [(m is not _NONE, None if m is _NONE else m) for m in self.messages],
                 "queue": list(self.queue)}
        if self.in_stamps is not None:
            state["stamps"] = list(self.in_stamps)
        return state

    def restore_from_snapshot(self, state) -> None:
        self.messages = [m if has else _NONE for has, m in state["latest"]]
        self.missing = sum(1 for m in self.messages if m is _NONE)
        self.queue = deque(state["queue"])
        if self.in_stamps is not None and "stamps" in state:
            self.in_stamps = list(state["stamps"])

    def pre_start(self):
        waiting = {entry[1] for entry in self.queue if entry[1] is not None}
        for i, in_ in enumerate(self.ins):
            if i not in waiting:
                self.try_pull(in_)

    def _on_push(self, i: int):
        in_ = self.ins[i]

        def on_push():
            if self.messages[i] is _NONE:
                self.missing -= 1
            self.messages[i] = self.grab(in_)
            if self.missing == 0:
                if not self.queue and self.is_available(self.out):
                    self.push(self.out, list(self.messages))
                    self.try_pull(in_)
                elif self.in_stamps is None:
                    self.queue.append((list(self.messages), i))
                else:  # event time: the list keeps the timestamp it has now, whatever arrives meanwhile
                    self.queue.append((list(self.messages), i, latest(self.in_stamps)))
            else:
                self.try_pull(in_)

        return on_push

    def on_signal(self, signal) -> None:
        if self.queue:
            self.queue.append((signal, None))
        else:
            super().on_signal(signal)

    def _on_finish(self):
        if self.eager_complete or self.running == 1:
            self.running = 0
            if self.queue:  # as complete_stage during an emit: the inputs go now, the output after the lists
                for in_ in self.ins:
                    self.cancel(in_, STAGE_WAS_COMPLETED)
                self.completing = True
            else:
                self.complete_stage()
        else:
            self.running -= 1

    def on_pull(self):
        queue = self.queue
        while queue:
            entry = queue.popleft()
            item, i = entry[0], entry[1]
            if i is None:
                super().on_signal(item)
                continue
            self.push(self.out, item, entry[2] if len(entry) > 2 else None)
            if not self.completing:
                self.try_pull(self.ins[i])
            while queue and queue[0][1] is None:  # signals right behind the list go with it
                super().on_signal(queue.popleft()[0])
            break
        else:
            for in_ in self.ins:
                if not self.has_been_pulled(in_):
                    self.try_pull(in_)
        if self.completing and not queue:
            self.complete_stage()


# ---------------------------------------------------------------------------------------------- ZipWith / Zip
class ZipWith(_FanInStage):
    """Combines one element of each of the ``n`` inputs with ``fn(e0, e1, ..., e(n-1))``.

    **Emits when** all of the inputs have an element available. **Backpressures when** downstream
    backpressures. **Completes when** any upstream completes (once the elements already delivered
    by the others can no longer be matched). **Cancels when** downstream cancels.

    Adheres to the supervision strategy: if ``fn`` raises (or returns ``None``), Stop fails the
    stream; Resume and Restart drop the combined element and go on.
    """

    _prefix = "ZipWith"
    _attr = "zip_with"

    def __init__(self, fn: Callable[..., Any], n: int = 2):
        require_callable(self._prefix, "fn", fn)
        require_int(self._prefix, "n", n, 2)
        super().__init__(self._prefix, n, self._attr, FanInShapeN)
        self.fn = fn
        self.n = n

    def create_logic(self, attributes):
        return _ZipWithLogic(self, decider_of(attributes))

    def __repr__(self):
        return f"{self._prefix}({self.n})"


def _pair(a, b):
    return (a, b)


class Zip(ZipWith):
    """Combines the elements of ``in0`` and ``in1`` into pairs ``(a, b)``.

    **Emits when** both of the inputs have an element available. **Backpressures when** downstream
    backpressures. **Completes when** any upstream completes. **Cancels when** downstream cancels.
    """

    _prefix = "Zip"
    _attr = "zip"

    def __init__(self):
        super().__init__(_pair, 2)

    def __repr__(self):
        return "Zip"


class _ZipWithLogic(LatestPerInput, GraphStageLogic, OutHandler):
    # event time: a combination carries the max timestamp of the elements it combines (LatestPerInput)
    def __init__(self, stage: ZipWith, decider):
        super().__init__(stage.shape)
        self.ins = stage.ins
        self.out = stage.out
        self.fn = stage.fn
        self.n = stage.n
        self.decider = decider
        self.pending = 0  # elements still missing for the next combination (negative: demand missing)
        self.will_shut_down = False  # an input completed: stop after the next combination
        for in_ in stage.ins:
            self.set_handler(in_, InHandler(on_push=self._on_push, on_upstream_finish=self._on_finish(in_)))
        self.set_handler(stage.out, self)

    # checkpoint state: the chunk form's unmatched elements per input (element form: they wait in the
    # input connections, saved there as in flight)
    restored_bufs = None

    def save_to_snapshot(self):
        if not self.chunked:
            return None
        return {"bufs": [list(b) for b in self.bufs],
                "marks": [(max(0, need - self.combined), signal) for need, signal in self.marks]}

    def restore_from_snapshot(self, state) -> None:
        self.restored_bufs = state

    chunked = False

    def pre_start(self):
        bufs, self.restored_bufs = self.restored_bufs, None
        marks = ()
        if type(bufs) is dict:  # the signals held behind the elements, counted from the restored ones
            bufs, marks = bufs["bufs"], bufs["marks"]  # (a list: a snapshot written before signals were held)
        if bufs is not None and (any(bufs) or marks):
            if not self.chunked:
                raise IllegalStateError(f"{self}: restored chunk-form elements into an element-form zip")
            self.bufs = [list(b) for b in bufs]
            self.got = [len(b) for b in self.bufs]
            self.marks = deque((need, signal) for need, signal in marks)
        for i, in_ in enumerate(self.ins):
            if not self.chunked or not self.bufs[i]:
                self.pull(in_)

    def _on_push(self):
        self.pending -= 1
        if self.pending == 0:
            self._push_all()

    def _on_finish(self, in_):
        def on_upstream_finish():
            if not self.is_available(in_):
                self.complete_stage()
            self.will_shut_down = True

        return on_upstream_finish

    def on_pull(self):
        self.pending += self.n
        if self.pending == 0:
            self._push_all()

    def _push_all(self):
        try:
            self.push(self.out, self.fn(*[self.grab(in_) for in_ in self.ins]))
        except Exception as e:  # noqa: BLE001
            if decide(self.decider, e) == Supervision.STOP:
                self.fail_stage(e)
            elif self.will_shut_down:
                self.complete_stage()
            else:
                self.pending += self.n  # the demand is still there
                self._pull_all()
            return
        if self.will_shut_down:
            self.complete_stage()
        else:
            self._pull_all()

    def _pull_all(self):
        for in_ in self.ins:
            self.pull(in_)

    # ------------------------------------------------------------------ chunk form
    # Each input keeps the elements not yet matched (``bufs``); a combination chunk is as long as the
    # shortest buffer allows and downstream accepts. Like the element form, an input is pulled again
    # as soon as its elements are matched: for what the last pull downstream asked beyond what went
    # out since (``wanted``, what the next pull will ask for), or for one element once that demand is
    # met (the element form's one element read ahead); so the inputs make what the element form
    # makes. The stage completes as soon as a completed input has no element left to match.
    #
    # An input's failure waits (``failed``) until every element that input delivered before it was
    # combined and pushed: element-wise, the failing element is pulled only after the elements before
    # it were combined, so the failure comes after their combinations (DESIGN.md section 9, bugs 2 and
    # 3: a chunk of upstream work brings the failure early, with those elements still unmatched).
    def chunk_capable(self) -> bool:
        return True

    def enable_chunks(self, chunk_size: int) -> None:
        self.chunked = True
        self.bufs = [[] for _ in self.ins]
        self.done = [False] * self.n
        self.failed = [None] * self.n
        self.wanted = 1
        # signals heard while elements that came before them wait unmatched, held until those were combined:
        # ``(combinations needed, signal)``; every combination takes one element of each input, so one count
        # (``combined``) says how far each input got
        self.got = [0] * self.n  # elements received per input
        self.signal_got = [0] * self.n  # ``got`` when each input delivered its latest signal
        self.combined = 0
        self.marks: deque = deque()
        for i, in_ in enumerate(self.ins):
            self.set_handler(in_, InHandler(on_push=functools.partial(self._on_push_chunk, i),
                                            on_upstream_finish=functools.partial(self._on_finish_chunk, i),
                                            on_upstream_failure=functools.partial(self._on_failure_chunk, i)))
        self.set_handler(self.out, OutHandler(on_pull=self._on_pull_chunk, on_downstream_finish=self.on_downstream_finish))

    def _on_failure_chunk(self, i: int, exc: BaseException) -> None:
        if self.bufs[i] and not self._ended():
            self.failed[i] = exc  # after the combinations of the elements it delivered before
        else:
            self.fail_stage(exc)

    def _ended(self) -> bool:
        """Some completed input has no element left to match: no more combinations can be made."""
        return any(d and not b for d, b in zip(self.done, self.bufs))

    def _end_if_drained(self) -> bool:
        """Fail (an input failed and its elements are out) or complete (a completed input is drained)."""
        for exc, b in zip(self.failed, self.bufs):
            if exc is not None and not b:
                self.fail_stage(exc)
                return True
        if self._ended():
            self._complete_chunk_form()
            return True
        return False

    def _complete_chunk_form(self) -> None:
        """Complete; the signals still held go first (no more combinations will come before them)."""
        marks = self.marks
        while marks:
            self.forward_signal(marks.popleft()[1])
        self.complete_stage()

    def _on_push_chunk(self, i: int) -> None:
        chunk = self.grab(self.ins[i])
        b = self.bufs[i]
        self.bufs[i] = b + chunk if b else chunk  # never mutate a received chunk: it may be shared
        self.got[i] += len(chunk)
        self._emit_chunk()

    def _receive_signal(self, conn, signal) -> None:
        if self.chunked:  # where the signal came on this input: after the elements it delivered so far
            i = self._in_conns.index(conn)
            self.signal_got[i] = self.got[i]
        super()._receive_signal(conn, signal)

    def on_signal(self, signal) -> None:
        """Chunk form: a signal goes on once the combinations of the elements each input delivered before its signal
        went out (the element form leaves them in the inlets, where the kernel keeps the signals behind them). An
        aligned watermark is placed after its inputs' latest signals: later than its place at worst, never earlier."""
        if not self.chunked:
            self.forward_signal(signal)
            return
        need = max(self.signal_got)
        if self.marks or need > self.combined:
            self.marks.append((need, signal))
        else:
            self.forward_signal(signal)

    def _release_marks(self) -> None:
        marks, combined = self.marks, self.combined
        while marks and marks[0][0] <= combined:
            self.forward_signal(marks.popleft()[1])

    def _on_finish_chunk(self, i: int) -> None:
        self.done[i] = True
        if not self.bufs[i]:
            self._complete_chunk_form()

    def _on_pull_chunk(self) -> None:
        self.wanted = self._out_conns[0].demand
        self._emit_chunk()

    def _emit_chunk(self) -> None:
        bufs = self.bufs
        while self.is_available(self.out):
            k = min(map(len, bufs))
            if k == 0:
                return
            k = min(k, self._out_conns[0].demand)
            # a buffer taken whole is handed on as it is (never mutated: chunks may be shared), not copied
            heads = [b if len(b) == k else b[:k] for b in bufs]
            self.bufs = bufs = [_NO_CHUNK if len(b) == k else b[k:] for b in bufs]
            self.combined += k
            fn = self.fn
            if fn is _pair:
                combos = list(zip(heads[0], heads[1]))
            else:
                combos = []
                ap = combos.append
                for args in zip(*heads):
                    try:
                        y = fn(*args)
                        if y is None:
                            raise PortStateError(
                                f"Cannot push None to port ({self.out.name}) of stage {self}: elements must not be None "
                                "(Reactive Streams rule 2.13)"
                            )
                        ap(y)
                    except Exception as e:  # noqa: BLE001 - supervised per combination
                        if decide(self.decider, e) == Supervision.STOP:
                            if combos:
                                self.push(self.out, combos)
                            self.fail_stage(e)
                            return
            if combos:
                self.push(self.out, combos)
                self.wanted -= len(combos)
            if self.marks:
                self._release_marks()
            if self._end_if_drained():
                return
            ask = max(1, self.wanted)
            for in_, b in zip(self.ins, bufs):
                if not b and not self.has_been_pulled(in_) and not self.is_closed(in_):
                    self.pull_chunk(in_, ask)


# ---------------------------------------------------------------------------------------------- ZipLatestWith / ZipLatest
class ZipLatestWith(_FanInStage):
    """Combines the latest element of each of the ``n`` inputs with ``fn``: nothing is emitted until
    every input delivered an element; after that a combination is emitted each time any input
    delivers a new element (a pull without a new element since the last emission waits).

    Completes at once if an input completes before it delivered any element. Otherwise, with
    ``eager_complete=True`` (the default) it completes when any upstream completes, with
    ``eager_complete=False`` when all have completed (a pending combination goes out first).

    **Emits when** all of the inputs have at least one element available, and then each time an
    element becomes available on any of the inputs. **Backpressures when** downstream backpressures.
    **Completes when** any upstream completes (see above). **Cancels when** downstream cancels.

    An exception raised by ``fn`` fails the stage (no supervision, as in Pekko).
    """

    _prefix = "ZipLatestWith"
    _attr = "zip_latest_with"

    def __init__(self, fn: Callable[..., Any], n: int = 2, eager_complete: bool = True):
        require_callable(self._prefix, "fn", fn)
        require_int(self._prefix, "n", n, 2)
        _require_bool(self._prefix, "eager_complete", eager_complete)
        super().__init__(self._prefix, n, self._attr, FanInShapeN)
        self.fn = fn
        self.n = n
        self.eager_complete = eager_complete

    def create_logic(self, attributes):
        return _ZipLatestWithLogic(self)

    def __repr__(self):
        return f"{self._prefix}({self.n})"


class ZipLatest(ZipLatestWith):
    """Pairs ``(latest of in0, latest of in1)``, emitted each time either input delivers an element
    once both have delivered one.

    **Emits when** both inputs have at least one element available, and then each time an element
    becomes available on either of the inputs. **Backpressures when** downstream backpressures.
    **Completes when** any upstream completes (``eager_complete=True``, the default) or all upstreams
    complete. **Cancels when** downstream cancels.
    """

    _prefix = "ZipLatest"
    _attr = "zip_latest"

    def __init__(self, eager_complete: bool = True):
        super().__init__(_pair, 2, eager_complete)

    def __repr__(self):
        return "ZipLatest"


class _ZipLatestWithLogic(LatestPerInput, GraphStageLogic, OutHandler):
    """Element form only, on purpose: a combination samples the latest value of each input when
    downstream pulls, and new elements of several inputs arriving between two pulls make one
    combination. Which combinations exist is a function of arrival timing against demand; a chunk
    of ``k`` elements of one input would either make ``k`` combinations (more than the element form
    makes when other inputs deliver meanwhile) or collapse to one (dropping samples the element form
    emits), so no chunk form is exact. The adapters around it keep per-element demand."""
    pulls_ahead = True  # every input is pulled at start, whatever downstream asked for

    def __init__(self, stage: ZipLatestWith):
        super().__init__(stage.shape)
        self.ins = stage.ins
        self.out = stage.out
        self.fn = stage.fn
        self.eager_complete = stage.eager_complete
        self.values = [_NONE] * stage.n
        self.missing = stage.n  # inputs without a value yet
        self.upstreams_to_wait = stage.n
        self.waiting_for_tuple = False  # downstream pulled and waits for a fresh combination
        self.stale = True  # the current values were emitted already
        for i, in_ in enumerate(stage.ins):
            self.set_handler(in_, InHandler(on_push=self._on_push(i), on_upstream_finish=self._on_finish(i)))
        self.set_handler(stage.out, self)

    # checkpoint state: the latest value per input and whether it went out already (whether downstream
    # waits is demand, re-formed by its pull)
    def save_to_snapshot(self):
        state = {"latest": [(v is not _NONE, None if v is _NONE else v) for v in self.values], "stale": self.stale}
        if self.in_stamps is not None:
            state["stamps"] = list(self.in_stamps)
        return state

    def restore_from_snapshot(self, state) -> None:
        self.values = [v if has else _NONE for has, v in state["latest"]]
        if self.in_stamps is not None and "stamps" in state:
            self.in_stamps = list(state["stamps"])
        self.missing = sum(1 for v in self.values if v is _NONE)
        self.stale = state["stale"]

    def pre_start(self):
        for in_ in self.ins:
            self.pull(in_)

    @property
    def will_shut_down(self) -> bool:
        return self.upstreams_to_wait == 0

    def on_pull(self):
        if self.missing == 0 and not self.stale:
            self._push_output()
        else:
            self.waiting_for_tuple = True
        self._try_pull_all()

    def _push_output(self):
        self.push(self.out, self.fn(*self.values))
        if self.will_shut_down:
            self.complete_stage()
        self.stale = True

    def _try_pull_all(self):
        for in_ in self.ins:
            if not self.has_been_pulled(in_):
                self.try_pull(in_)

    def _on_push(self, i: int):
        in_ = self.ins[i]

        def on_push():
            if self.values[i] is _NONE:
                self.missing -= 1
            self.values[i] = self.grab(in_)
            self.stale = False
            if self.waiting_for_tuple and self.missing == 0:
                self._push_output()
                self.waiting_for_tuple = False
                self._try_pull_all()

        return on_push

    def _on_finish(self, i: int):
        def on_upstream_finish():
            if self.values[i] is _NONE:
                self.complete_stage()  # nothing can ever be combined
                return
            if self.eager_complete:
                self.upstreams_to_wait = 0
            else:
                self.upstreams_to_wait -= 1
            if self.will_shut_down and self.stale:
                self.complete_stage()

        return on_upstream_finish


# ---------------------------------------------------------------------------------------------- detachable inputs
class _DetachableFanInLogic(GraphStageLogic, OutHandler):
    """Base of the fan-in logics that may see their inputs through a one-element buffer each (Pekko
    puts a ``Detacher`` stage in front of every input of ``Concat`` and ``Interleave``).

    Subclasses implement ``on_input_push(i)`` and ``on_input_finish(i)`` and use ``in_pull``,
    ``in_try_pull``, ``in_grab``, ``in_pulled`` and ``in_closed``: with ``detached=False`` these are
    the plain port operations; with ``detached=True`` every input is pulled at start and its element
    kept until the subclass pulls, exactly as a detacher between the input and the junction would.
    A failing input fails the stage at once (a detacher drops the element it holds).
    """

    def __init__(self, shape, ins, out, detached: bool):
        super().__init__(shape)
        self.ins = ins
        self.out = out
        self.detached = detached
        n = len(ins)
        if detached:
            self._buffer = [EMPTY] * n  # element held by the input's detacher
            self._buffer_ts = [None] * n  # event time: its timestamp (None elsewhere)
            self._demand = [False] * n  # the junction pulled the detacher
            self._delivered = [EMPTY] * n  # pushed to the junction, not grabbed yet
            self._upstream_done = [False] * n  # the real input completed
            self._closed = [False] * n  # the detacher completed (its buffer was empty)
        for i, in_ in enumerate(ins):
            self.set_handler(in_, _DetachableInput(self, i))
        self.set_handler(out, self)

    def pre_start(self):
        if self.detached:
            for i, in_ in enumerate(self.ins):
                if self._buffer[i] is EMPTY:  # a detacher holding an element (restored) pulls once it is taken
                    self.try_pull(in_)

    # -- implemented by subclasses (Concat, Interleave): what input i's element or completion means to the junction
    on_input_push: Callable[[int], None]
    on_input_finish: Callable[[int], None]

    # -- the view of input i
    def in_pull(self, i: int) -> None:
        if not self.detached:
            self.pull(self.ins[i])
            return
        if self._closed[i] or self._demand[i]:
            state = "closed" if self._closed[i] else "twice"
            raise PortStateError(f"Cannot pull port ({self.ins[i].name}) of stage {self} {state}")
        elem = self._buffer[i]
        if elem is EMPTY:
            self._demand[i] = True
            return
        self._buffer[i] = EMPTY
        self._ts = self._buffer_ts[i]  # the element goes on with its own timestamp, not the last grabbed
        self._deliver(i, elem)
        if self.is_closed(self.out):
            return  # the stage stopped while handling the element
        if self._upstream_done[i]:
            self._close_input(i)
        else:
            self.pull(self.ins[i])

    def in_try_pull(self, i: int) -> None:
        if not self.in_closed(i):
            self.in_pull(i)

    def in_grab(self, i: int) -> Any:
        if not self.detached:
            return self.grab(self.ins[i])
        elem = self._delivered[i]
        if elem is EMPTY:
            raise PortStateError(f"Cannot get element from already empty input port ({self.ins[i].name}) of stage {self}")
        self._delivered[i] = EMPTY
        return elem

    def in_pulled(self, i: int) -> bool:
        return self._demand[i] if self.detached else self.has_been_pulled(self.ins[i])

    def in_closed(self, i: int) -> bool:
        return self._closed[i] if self.detached else self.is_closed(self.ins[i])

    # -- the detachers
    def _deliver(self, i: int, elem: Any) -> None:
        self._delivered[i] = elem
        self.on_input_push(i)

    def _close_input(self, i: int) -> None:
        self._closed[i] = True
        self._demand[i] = False
        self.on_input_finish(i)


class _DetachableInput(InHandler):
    def __init__(self, logic: _DetachableFanInLogic, i: int):
        self.logic = logic
        self.i = i

    def on_push(self):
        logic, i = self.logic, self.i
        if not logic.detached:
            logic.on_input_push(i)
            return
        in_ = logic.ins[i]
        elem = logic.grab(in_)
        if logic._demand[i]:
            logic._demand[i] = False
            logic._deliver(i, elem)
            logic.try_pull(in_)
        else:
            logic._buffer[i] = elem
            logic._buffer_ts[i] = logic._ts

    def on_upstream_finish(self):
        logic, i = self.logic, self.i
        if not logic.detached:
            logic.on_input_finish(i)
            return
        logic._upstream_done[i] = True
        if logic._buffer[i] is EMPTY:
            logic._close_input(i)
        # else: the input closes once its buffered element went to the junction

    def on_upstream_failure(self, exc):
        self.logic.fail_stage(exc)


# ---------------------------------------------------------------------------------------------- Concat
class Concat(_FanInStage):
    """Emits all elements of ``in0``, then all of ``in1``, and so on.

    With ``detached_inputs=True`` (the default, as Pekko's ``Concat(n)``) every input is pulled as
    soon as the stage starts and keeps one element at hand (this breaks deadlocks in cycles, and
    materializes the demand on later inputs early); with ``False`` an input is pulled only once it
    is the current one and downstream asks.

    **Emits when** the current input has an element available; when it completes, the next one
    becomes current. **Backpressures when** downstream backpressures. **Completes when** all upstreams
    complete. **Cancels when** downstream cancels. A failure of any input (current or not) fails the
    stage.
    """

    def __init__(self, n: int = 2, detached_inputs: bool = True):
        require_int("Concat", "n", n, 1)
        _require_bool("Concat", "detached_inputs", detached_inputs)
        super().__init__("Concat", n, "concat")
        self.n = n
        self.detached_inputs = detached_inputs

    def create_logic(self, attributes):
        return _ConcatLogic(self)

    def __repr__(self):
        return f"Concat({self.n})"


class _ConcatLogic(_DetachableFanInLogic):
    """Element form as Pekko's (with the detachers inside). Chunk form: every input's chunk waits
    whole in ``bufs`` until the input is the active one; the active input is asked for what
    downstream asked for (with detached inputs each input is asked for one element at start, and
    again as soon as what it held went out, as a detacher does)."""

    def __init__(self, stage: Concat):
        super().__init__(stage.shape, stage.ins, stage.out, stage.detached_inputs)
        self.n = stage.n
        self.active = 0
        self.chunked = False

    # checkpoint state: the active input and the elements taken from each input and not pushed yet (the
    # detachers' read-ahead element, or the chunk form's held chunk) with the signals held behind them.
    # Inputs before the active one are not marked done: a restored upstream completes again.
    def save_to_snapshot(self):
        if self.chunked:
            held = [list(self.bufs[i][self.offs[i]:]) for i in range(self.n)]
            return {"active": self.active, "held": held, "signals": list(self.held_signals)}
        held = [[] if b is EMPTY else [b] for b in self._buffer] if self.detached else [[] for _ in range(self.n)]
        return {"active": self.active, "held": held, "signals": []}

    def restore_from_snapshot(self, state) -> None:
        self.active = state["active"]
        held = state["held"]
        if self.chunked:
            self.bufs = [list(h) for h in held]
            self.held_signals = list(state["signals"])
            return
        for i, h in enumerate(held):
            if len(h) > (1 if self.detached else 0):
                raise IllegalStateError(f"{self}: restored {len(h)} held elements into the element form")
            if h:
                self._buffer[i] = h[0]

    def on_input_push(self, i):
        self.push(self.out, self.in_grab(i))

    def on_input_finish(self, i):
        if i != self.active:
            return  # a later input completed early; it is skipped when its turn comes
        a = i + 1
        while a < self.n and self.in_closed(a):
            a += 1
        self.active = a
        if a == self.n:
            self.complete_stage()
        elif self.is_available(self.out):
            self.in_pull(a)

    def on_pull(self):
        self.in_pull(self.active)

    # ------------------------------------------------------------------ chunk form
    def chunk_capable(self) -> bool:
        return True

    def enable_chunks(self, chunk_size: int) -> None:
        self.chunked = True
        n = self.n
        self.bufs = [[] for _ in range(n)]
        self.offs = [0] * n
        self.done = [False] * n
        self.last_demand = 1
        self.held_signals: list = []
        for i, in_ in enumerate(self.ins):
            self.set_handler(in_, InHandler(on_push=functools.partial(self._on_push_chunk, i),
                                            on_upstream_finish=functools.partial(self._on_finish_chunk, i)))
        self.set_handler(self.out, OutHandler(on_pull=self._on_pull_chunk, on_downstream_finish=self.on_downstream_finish))

    def pre_start(self):
        if self.chunked:
            if self.detached:
                for i, in_ in enumerate(self.ins):
                    if not self.is_closed(in_) and not self._held(i):
                        self.pull_chunk(in_, 1)
        else:
            super().pre_start()

    def _held(self, i: int) -> int:
        return len(self.bufs[i]) - self.offs[i]

    def _on_push_chunk(self, i: int) -> None:
        self.bufs[i], self.offs[i] = self.grab(self.ins[i]), 0
        if i == self.active and self.is_available(self.out):
            self._deliver_chunk()

    def _on_finish_chunk(self, i: int) -> None:
        self.done[i] = True
        if i == self.active and not self._held(i):
            self._advance_chunk()

    def _on_pull_chunk(self) -> None:
        self.last_demand = self._out_conns[0].demand
        self._deliver_chunk()

    def _advance_chunk(self) -> None:
        a = self.active + 1
        while a < self.n and self.done[a] and not self._held(a):
            a += 1
        self.active = a
        if a == self.n:
            self.complete_stage()
        elif self.is_available(self.out):
            self._deliver_chunk()

    def _deliver_chunk(self) -> None:
        a = self.active
        if a >= self.n:
            return
        in_ = self.ins[a]
        held = self._held(a)
        if held:
            b, o = self.bufs[a], self.offs[a]
            k = min(held, self._out_conns[0].demand)
            self.push_chunk(self.out, b if o == 0 and k == len(b) else b[o:o + k])
            if k < held:
                self.offs[a] = o + k
                return
            self.bufs[a], self.offs[a] = [], 0
            self._release_held()
            if self.done[a]:
                self._advance_chunk()
            elif self.detached and not self.has_been_pulled(in_):
                self.pull_chunk(in_, self.last_demand)
        elif self.done[a]:
            self._advance_chunk()
        elif not self.has_been_pulled(in_):
            self.pull_chunk(in_, self._out_conns[0].demand)

    # signals: held behind what the active input still has to emit
    def on_signal(self, signal) -> None:
        if self.chunked and self.active < self.n and self._held(self.active):
            self.held_signals.append(signal)
        else:
            self.forward_signal(signal)

    def _release_held(self) -> None:
        if self.held_signals:
            sigs, self.held_signals = self.held_signals, []
            for sig in sigs:
                self.forward_signal(sig)


# ---------------------------------------------------------------------------------------------- Interleave
class Interleave(_FanInStage):
    """Emits ``segment_size`` elements from ``in0``, then ``segment_size`` from ``in1``, and so on
    round robin; a completed input is skipped. Its inputs are detached (pulled at start, one element
    kept at hand each), as with Pekko's ``Interleave(...)`` factory.

    **Emits when** the current input has an element available. **Backpressures when** downstream
    backpressures. **Completes when** all upstreams complete (``eager_close=False``) or any upstream
    completes (``eager_close=True``). **Cancels when** downstream cancels.
    """

    def __init__(self, n: int, segment_size: int, eager_close: bool = False):
        require_int("Interleave", "n", n, 1)
        require_int("Interleave", "segment_size", segment_size, 1)
        _require_bool("Interleave", "eager_close", eager_close)
        super().__init__("Interleave", n, "interleave")
        self.n = n
        self.segment_size = segment_size
        self.eager_close = eager_close

    def create_logic(self, attributes):
        return _InterleaveLogic(self)

    def __repr__(self):
        return f"Interleave({self.n}, {self.segment_size})"


class _InterleaveLogic(_BufferedChunkFanIn, _DetachableFanInLogic):
    """Element form as Pekko's (detachers inside). Chunk form (``_BufferedChunkFanIn``): each input's
    chunk waits in its buffer (the detacher's one element, grown to a chunk); an output chunk takes
    up to the rest of the current segment from the current input, switching inputs as the element
    form does, across segments as long as the current input holds elements. The current input is
    asked for what the pull downstream still wants within its segment, the others for one element
    (the detacher's read ahead). An input closes when it completed and its held elements are out."""

    chunked = False

    def __init__(self, stage: Interleave):
        super().__init__(stage.shape, stage.ins, stage.out, True)
        self.ins_all = stage.ins
        self.ending = False  # chunk form: complete once the elements of this output chunk are out
        self.n = stage.n
        self.segment_size = stage.segment_size
        self.eager_close = stage.eager_close
        self.counter = 0
        self.current = 0
        self.running = stage.n

    def on_input_push(self, i):
        self.push(self.out, self.in_grab(i))
        self.counter += 1
        if self.counter == self.segment_size:
            self._switch_to_next_input()

    def _switch_to_next_input(self):
        self.counter = 0
        idx = self.current
        while True:
            successor = (idx + 1) % self.n
            if not self.in_closed(successor):
                self.current = successor
                return
            if successor == self.current:
                self.complete_stage()  # every input is closed
                self.current = 0
                return
            idx = successor

    def on_input_finish(self, i):
        if self.eager_close:
            self.complete_stage()
            return
        self.running -= 1
        if self.running == 0:
            self.complete_stage()
        elif i == self.current:
            self._switch_to_next_input()
            if self.is_available(self.out):
                self.in_pull(self.current)

    def on_pull(self):
        if not self.in_pulled(self.current):
            self.in_try_pull(self.current)

    # ------------------------------------------------------------------ chunk form
    def chunk_capable(self) -> bool:
        return True

    def enable_chunks(self, chunk_size: int) -> None:
        self._chunk_init(self.ins)

    def pre_start(self):
        if self.chunked:
            self._chunk_start()
        else:
            super().pre_start()

    def on_signal(self, signal) -> None:
        if self.chunked:
            self._chunk_signal(signal)
        else:
            self.forward_signal(signal)

    def _ask(self, i: int) -> int:
        if i == self.current:
            return max(1, min(self.wanted, self.segment_size - self.counter))
        return 1

    def _fill(self, d: int) -> list:
        out: list = []
        while len(out) < d and not self.ending:
            c = self.current
            a = self.available(c)
            if not a:
                break
            k = min(a, d - len(out), self.segment_size - self.counter)
            out.extend(self._take(c, k))
            self.counter += k
            if self.counter == self.segment_size:
                self._switch_chunk()
            if self.closed(c):
                self._input_closed(c)
            if self._mark_due():
                break
        return out

    def _switch_chunk(self) -> None:
        self.counter = 0
        idx = self.current
        while True:
            successor = (idx + 1) % self.n
            if not self.closed(successor):
                self.current = successor
                return
            if successor == self.current:
                self.ending = True  # every input is closed
                self.current = 0
                return
            idx = successor

    def _input_closed(self, i: int) -> None:
        if self.eager_close:
            self.ending = True
            return
        self.running -= 1
        if self.running == 0:
            self.ending = True
        elif i == self.current:
            self._switch_chunk()

    def _input_ended(self, i: int) -> None:
        if not self.held(i):
            self._input_closed(i)
        self._serve()

    def _all_done(self) -> bool:
        return self.ending

    # ------------------------------------------------------------------ state hooks
    def reset_state(self) -> None:
        self.counter = 0

    # checkpoint state: the current input and its count in the segment, and the elements read ahead (the
    # detachers' one element per input, or the chunk form's held chunks with the signals held behind them)
    def save_to_snapshot(self):
        if self.chunked:
            return {"current": self.current, "counter": self.counter, "chunks": self._chunk_save()}
        return {"current": self.current, "counter": self.counter,
                "held": [[] if b is EMPTY else [b] for b in self._buffer]}

    def restore_from_snapshot(self, state) -> None:
        self.current, self.counter = state["current"], state["counter"]
        if self.chunked != ("chunks" in state):
            raise IllegalStateError(f"{self}: restored a checkpoint of the other form (chunks vs elements)")
        if self.chunked:
            self._chunk_restore(state["chunks"])
        else:
            for i, h in enumerate(state["held"]):
                if h:
                    self._buffer[i] = h[0]


# ---------------------------------------------------------------------------------------------- OrElse
class OrElse(GraphStage):
    """Passes the ``primary`` input (``ins[0]``) through; only if it completes without emitting any
    element does the ``secondary`` input (``ins[1]``) take its place. The secondary input is
    cancelled as soon as the primary emits its first element. Both inputs are materialized when the
    stage is; a failure of either fails the stage.

    **Emits when** an element is available from the primary stream, or the primary stream closed
    without emitting any element and an element is available from the secondary stream.
    **Backpressures when** downstream backpressures. **Completes when** the primary stream completes
    after emitting at least one element, when the primary stream completes without emitting and the
    secondary stream already has completed, or when the secondary stream completes (once current).
    **Cancels when** downstream cancels.
    """

    def __init__(self):
        self.primary = Inlet("OrElse.primary")
        self.secondary = Inlet("OrElse.secondary")
        self.ins = (self.primary, self.secondary)
        self.out = Outlet("OrElse.out")
        self.shape = UniformFanInShape(self.out, self.ins)
        self.initial_attributes = Attributes.name("or_else")

    def create_logic(self, attributes):
        return _OrElseLogic(self)

    def __repr__(self):
        return "OrElse"


class _OrElseLogic(GraphStageLogic, InHandler, OutHandler):
    def __init__(self, stage: OrElse):
        super().__init__(stage.shape)
        self.primary = stage.primary
        self.secondary = stage.secondary
        self.out = stage.out
        self.current = stage.primary
        self.primary_pushed = False
        self.chunked = False
        self.set_handler(self.primary, self)
        self.set_handler(self.out, self)
        self.set_handler(
            self.secondary,
            InHandler(on_push=self._on_secondary_push, on_upstream_finish=self._on_secondary_finish),
        )

    # checkpoint state: whether the primary emitted (then the secondary is cancelled again at start); which
    # input is current is re-derived, since a restored primary that had ended without elements ends again
    def save_to_snapshot(self):
        return self.primary_pushed

    def restore_from_snapshot(self, state) -> None:
        self.primary_pushed = state

    def pre_start(self):
        if self.primary_pushed:
            self.cancel(self.secondary)

    def on_pull(self):
        self.pull(self.current)

    # primary input
    def on_push(self):
        if not self.primary_pushed:
            self.primary_pushed = True
            self.cancel(self.secondary)
        self.push(self.out, self.grab(self.primary))

    def on_upstream_finish(self):
        if not self.primary_pushed and not self.is_closed(self.secondary):
            self.current = self.secondary
            if self.is_available(self.out):
                if self.chunked:
                    self._on_pull_chunk()
                else:
                    self.pull(self.secondary)
        else:
            self.complete_stage()

    # secondary input
    def _on_secondary_push(self):
        self.push(self.out, self.grab(self.secondary))

    def _on_secondary_finish(self):
        if self.is_closed(self.primary):
            self.complete_stage()

    # ------------------------------------------------------------------ chunk form
    # The current input is asked for what downstream asks for and its chunk goes on as it is: the
    # stage holds nothing, so signals need no holding either. Everything else is the element form.
    def chunk_capable(self) -> bool:
        return True

    def enable_chunks(self, chunk_size: int) -> None:
        self.chunked = True
        self.set_handler(self.out, OutHandler(on_pull=self._on_pull_chunk, on_downstream_finish=self.on_downstream_finish))

    def _on_pull_chunk(self):
        self.pull_chunk(self.current, self._out_conns[0].demand)


__all__ = [
    "Merge",
    "MergePreferred",
    "MergePrioritized",
    "MergeSorted",
    "MergeLatest",
    "Zip",
    "ZipWith",
    "ZipLatest",
    "ZipLatestWith",
    "Concat",
    "Interleave",
    "OrElse",
]
