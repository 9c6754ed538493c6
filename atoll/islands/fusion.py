"""Operator fusion: runs of simple stages inside an island become one generated loop.

The interpreter costs a few hundred nanoseconds per element per connection. For the common chain
``source -> map/filter/map_concat ... -> sink`` inside one island that dominates, so when an island is
built its maximal runs of *fusible* stages (stateless ``map``/``filter``/``filter_not``/``map_concat``
with the default stopping supervision, plus the plain sequence/iterator/repeat sources and the
fold/seq/foreach/ignore sinks) are replaced by a single logic running Python code generated for that
run. The code applies the stages to each element in order, exactly as the stages would (same calls,
same order of side effects, ``None`` still rejected); only the per-hop bookkeeping disappears.

Four shapes of run are fused:

* source -> flows -> sink: a port-less loop that processes the source in chunks (its size adapts so a
  turn takes a few milliseconds), yielding to the host between chunks;
* source -> flows: a source making outputs only as far as demand reaches (one per pull for an
  element outlet, the output boundary's demand for a chunk outlet; no read-ahead);
* flows -> sink and flows -> flows: inputs are taken one output's worth at a time.

A run with a ``map_concat`` is compiled to a resumable generator (``generate_lazy``): each iterable is
iterated only as far as the outputs wanted need (one element ahead, as the unfused stage), kept
between turns, and the work per turn is bounded, so an unbounded iterable behaves as unfused.

Elements are never produced ahead of demand except inside the closed loop, whose sink requests
everything anyway. A failure reaches downstream after the outputs made before it (as demand takes
them). A source behaves as its stage: an iterator's factory is called at the first demand (a failure
there fails the stream), a ``None`` element fails the stream with ``PortStateError``. A run whose
stages carry a non-default supervision strategy is left alone (an iterator source included).
"""
from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from operator import length_hint
from typing import Any, Callable, List, Optional, Tuple

from ..errors import PortStateError
from ..markers import Done
from ..stage.attributes import SupervisionStrategy
from ..stage.handlers import InHandler, OutHandler
from ..stage.logic import GraphStageLogic
from ..stage.ports import Inlet, Outlet
from ..stage.shapes import FlowShape, Shape, SinkShape, SourceShape
from ..stage.supervision import Supervision
from .interpreter import abrupt_termination

_END = object()


# ---------------------------------------------------------------------------------------------
# recognising fusible stages
# ---------------------------------------------------------------------------------------------
def _default_supervision(logic) -> bool:
    s = logic.attributes.get(SupervisionStrategy)
    return s is None or s.decider is Supervision.stopping_decider


def flow_op(logic) -> Optional[tuple]:
    """``("map", fn)``, ``("filter", pred, negate)`` or ``("map_concat", fn)`` for a fusible flow logic."""
    from ..ops.transform import Filter, Map, MapConcat

    module = logic.__dict__.get("_module")
    t = type(module)
    if t is Map:
        op = ("map", module.fn)
    elif t is Filter:
        op = ("filter", module.pred, module.negate)
    elif t is MapConcat:
        op = ("map_concat", module.fn)
    else:
        return None
    return op if _default_supervision(logic) else None


def source_kind(logic) -> Optional[tuple]:
    """``("seq", sequence)``, ``("iter", factory)`` or ``("repeat", elem)`` for a fusible source.

    An iterator source (``from_iterator``, or ``from_iterable`` of something that is not a
    sequence) applies its supervision strategy to failures of the factory and of ``next()``; the
    fused loop only knows the default (stop), so such a source with another strategy is left alone."""
    from ..ops.sources import IterableSource, RangeSource, RepeatSource

    module = logic.__dict__.get("_module")
    t = type(module)
    if t is RangeSource:
        return ("seq", module.range)
    if t is RepeatSource:
        return ("repeat", module.elem)
    if t is IterableSource:
        src = module.iterable
        if not module.factory and isinstance(src, Sequence) and not isinstance(src, (str, bytes)):
            return ("seq", src)  # the sequence logic has no supervision to apply
        if not _default_supervision(logic):
            return None
        if module.factory:
            return ("iter", src)
        return ("iter", lambda: src)
    return None


def sink_kind(logic) -> Optional[tuple]:
    """``("fold", zero, fn)``, ``("seq",)``, ``("foreach", fn)`` or ``("ignore",)`` for a fusible sink."""
    from ..ops.sinks import FoldSink, ForeachSink, IgnoreSink, SeqSink

    module = logic.__dict__.get("_module")
    if getattr(logic, "promise", None) is None:
        return None
    t = type(module)
    if t is FoldSink:
        kind = ("fold", module.zero, module.fn)
    elif t is SeqSink:
        kind = ("seq",)
    elif t is ForeachSink:
        kind = ("foreach", module.fn)
    elif t is IgnoreSink:
        kind = ("ignore",)
    elif getattr(logic, "fused_accept", None) is not None and getattr(logic, "fusible", True):
        # a sink offering the fusible-sink protocol: ``fused_accept(elem)`` per element (may raise: the
        # run fails with it), ``fused_result()`` the value its promise completes with (may raise too)
        kind = ("foreach", logic.fused_accept, logic.fused_result)
    else:
        return None
    return kind if _default_supervision(logic) else None


def _may_be_none(source: tuple) -> bool:
    """Whether a fused source can hand out ``None`` (which fails the stream, as a push would)."""
    return source[0] == "iter" or (source[0] == "seq" and not isinstance(source[1], range))


def _has_map_concat(ops) -> bool:
    return any(op[0] == "map_concat" for op in ops)


# ---------------------------------------------------------------------------------------------
# code generation
# ---------------------------------------------------------------------------------------------
def _none_error(name: str) -> PortStateError:
    return PortStateError(
        f"Cannot push None to port ({name}.out) of stage {name}: elements must not be None (Reactive Streams rule 2.13)"
    )


def generate(
    ops: List[tuple], names: List[str], tail: str, chunked: bool, src: Optional[str] = None, count: bool = False
) -> Callable:
    """Compile ``ops`` into a function.

    ``tail`` is ``"out"`` (results are appended with ``emit``), ``"fold"``, ``"seq"``, ``"foreach"``
    or ``"ignore"``. Chunked: ``run(chunk, emit_or_state)``; single: ``run(x, emit_or_state)``.
    The fold variant returns the new accumulator. ``map_concat`` is applied eagerly here (each
    iterable is consumed whole); the fused logics use :func:`generate_lazy` for runs with one.

    ``src``: the name of the run's source stage when its elements must be checked for ``None``.
    ``count`` (chunked only): also return how many input elements were taken, as
    ``(acc, taken)`` for a fold and ``taken`` otherwise (this tells an exhausted iterator)."""
    env = {"_none": _none_error}
    params = []
    for i, op in enumerate(ops):
        env[f"f{i}"] = op[1]
        params.append(f"f{i}=f{i}")
    lines = []
    arg0 = "chunk" if chunked else "x"
    count = count and chunked
    if tail == "fold":
        lines.append(f"def run({arg0}, acc, g, {', '.join(params + ['_none=_none'])}):")
    else:
        lines.append(f"def run({arg0}, sink, {', '.join(params + ['_none=_none'])}):")
    depth = 1
    loops = 0
    if count:
        lines.append("    c = 0")
    if chunked:
        lines.append("    for x in chunk:")
        depth = 2
        loops = 1
        if count:
            lines.append("        c += 1")
    if src is not None:
        lines.append(f"{'    ' * depth}if x is None: raise _none({src!r})")
    skip = "continue" if loops else ("return acc" if tail == "fold" else "return")
    for i, op in enumerate(ops):
        pad = "    " * depth
        kind = op[0]
        if kind == "map":
            lines.append(f"{pad}x = f{i}(x)")
            lines.append(f"{pad}if x is None: raise _none({names[i]!r})")
        elif kind == "filter":
            cond = f"f{i}(x)" if op[2] else f"not f{i}(x)"
            lines.append(f"{pad}if {cond}: {skip}")
        elif kind == "map_concat":
            lines.append(f"{pad}for x in f{i}(x):")
            depth += 1
            loops += 1
            skip = "continue"
            lines.append(f"{'    ' * depth}if x is None: raise _none({names[i]!r})")
        else:  # pragma: no cover - flow_op only yields the kinds above
            raise ValueError(kind)
    pad = "    " * depth
    if tail == "fold":
        lines.append(f"{pad}acc = g(acc, x)")
        lines.append("    return acc, c" if count else "    return acc")
    else:
        lines.append(f"{pad}pass" if tail == "ignore" else f"{pad}sink(x)")
        if count:
            lines.append("    return c")
    code = "\n".join(lines)
    exec(compile(code, f"<fused {'+'.join(names)}>", "exec"), env)
    fn = env["run"]
    fn.source = code
    return fn


#: what a lazy run's generator yields when it pauses
TICK = 0  # its work budget is used up (it continues where it stopped)
FULL = 1  # it made as many outputs as it was allowed, the last one just now
_LIST = object()  # level marker: the current iterable is a list or tuple, iterated with a plain loop
_MAX_PLAIN_LEVELS = 3  # map_concat levels that get the plain loop as well (the code doubles with each)
#: most units of work per resumption of a lazy run's generator (its countdown stays a small int)
MAX_WORK = 256


def generate_lazy(ops: List[tuple], names: List[str], tail: str, src: Optional[str] = None) -> Callable:
    """Compile ``ops`` (with at least one ``map_concat``) into a resumable generator function
    ``run(inputs, state, emit)``, for runs whose input may give any number of outputs.

    It takes an input only when the outputs of the one before are all made, and iterates each
    ``map_concat`` iterable only as far as the outputs made need, like the unfused stage: one
    element ahead of the one handed on (fetched before the stages after it see that one), with a
    failure or a ``None`` met while looking ahead raised only when that element is wanted. A list
    or tuple (whose iteration runs no user code and cannot fail) is iterated with a plain loop
    instead, which is faster and looks the same from outside.

    ``tail`` as for :func:`generate`; outputs go to ``emit`` (``"out"``, ``"seq"``, ``"foreach"``)
    or into the fold whose ``state.acc``/``state.fn`` it uses (the accumulator is written back at
    every pause and at the end). Driving it: ``next(gen)`` once (no user code runs), then
    ``gen.send((room, work))`` resumes it until ``room`` more outputs are made (``"out"`` only:
    it then yields ``FULL``, just after the last one) or ``work`` (at most ``MAX_WORK``) more
    inputs and iterable elements were taken (it yields ``TICK``), or it is done
    (``StopIteration``); failures propagate, the
    outputs before them made. ``run.levels`` names, per ``map_concat`` level, the locals that tell
    a consumer, from a generator paused at ``FULL``, whether that level can give more (see
    ``FusedRun._spent``): the look-ahead ``n{i}`` (``_END`` once used up, ``_LIST`` for a plain
    loop over the iterator ``l{i}``) and ``e{i}``, a failure met while looking ahead. ``src`` as
    for :func:`generate`."""
    env = {"_none": _none_error, "_END": _END, "_LIST": _LIST, "_list": list, "_tuple": tuple}
    params = []
    for i, op in enumerate(ops):
        env[f"f{i}"] = op[1]
        params.append(f"f{i}=f{i}")
    fold = tail == "fold"
    defaults = ["_none=_none", "_END=_END", "_LIST=_LIST", "_list=_list", "_tuple=_tuple"]
    lines = [f"def run(inputs, state, emit, {', '.join(params + defaults)}):"]
    if fold:
        lines += ["    acc = state.acc", "    g = state.fn"]
    lines += [f"    room, work = yield {TICK}", "    left = work", "    for x in inputs:"]

    def tick(pad: str) -> List[str]:
        out = [f"{pad}left -= 1", f"{pad}if not left:"]
        if fold:
            out.append(f"{pad}    state.acc = acc")
        return out + [f"{pad}    room, work = yield {TICK}", f"{pad}    left = work"]

    def emit_tail(pad: str) -> List[str]:
        if tail == "out":
            return [f"{pad}emit(x)", f"{pad}room -= 1", f"{pad}if not room:", f"{pad}    room, work = yield {FULL}"]
        if fold:
            return [f"{pad}acc = g(acc, x)"]
        return [f"{pad}pass" if tail == "ignore" else f"{pad}emit(x)"]

    levels = []

    def body(start: int, depth: int, plain_levels: int) -> List[str]:
        """The code applying ``ops[start:]`` to ``x`` (then the tail), indented ``depth`` levels."""
        pad = "    " * depth
        out = []
        for i in range(start, len(ops)):
            op = ops[i]
            kind = op[0]
            if kind == "map":
                out.append(f"{pad}x = f{i}(x)")
                out.append(f"{pad}if x is None: raise _none({names[i]!r})")
            elif kind == "filter":
                cond = f"f{i}(x)" if op[2] else f"not f{i}(x)"
                out.append(f"{pad}if {cond}: continue")
            elif kind == "map_concat":
                if (f"n{i}", f"e{i}", f"l{i}") not in levels:
                    levels.append((f"n{i}", f"e{i}", f"l{i}"))
                rest_pad = pad + "        "
                lazy = [
                    f"{pad}it{i} = iter(r{i})",
                    f"{pad}e{i} = None",
                    f"{pad}n{i} = next(it{i}, _END)",
                    f"{pad}while n{i} is not _END:",
                    *tick(pad + "    "),
                    f"{pad}    x = n{i}",
                    f"{pad}    if x is None: raise _none({names[i]!r})",
                    f"{pad}    try:",
                    f"{pad}        n{i} = next(it{i}, _END)",
                    f"{pad}    except Exception as e:",
                    f"{pad}        n{i} = _END",
                    f"{pad}        e{i} = e",
                ]
                out.append(f"{pad}r{i} = f{i}(x)")
                if plain_levels > 0:
                    # only an outlet needs to see how far the loop got (the marker and l{i})
                    seen = [f"{pad}    n{i} = _LIST", f"{pad}    l{i} = iter(r{i})"] if tail == "out" else []
                    out += [
                        f"{pad}t = r{i}.__class__",
                        f"{pad}if t is _tuple or t is _list:",
                        *seen,
                        f"{pad}    for x in {f'l{i}' if seen else f'r{i}'}:",
                        *tick(pad + "        "),
                        f"{pad}        if x is None: raise _none({names[i]!r})",
                        *body(i + 1, depth + 2, plain_levels - 1),
                        f"{pad}else:",
                    ]
                    out += ["    " + line for line in lazy]
                    out += body(i + 1, depth + 2, plain_levels - 1)
                    out.append(f"{pad}    if e{i} is not None: raise e{i}")
                else:
                    out += lazy
                    out += body(i + 1, depth + 1, 0)
                    out.append(f"{pad}if e{i} is not None: raise e{i}")
                return out
            else:  # pragma: no cover - flow_op only yields the kinds above
                raise ValueError(kind)
        return out + emit_tail(pad)

    lines += tick("        ")
    if src is not None:
        lines.append(f"        if x is None: raise _none({src!r})")
    lines += body(0, 2, _MAX_PLAIN_LEVELS)
    if fold:
        lines.append("    state.acc = acc")
    code = "\n".join(lines)
    exec(compile(code, f"<fused lazy {'+'.join(names)}>", "exec"), env)
    fn = env["run"]
    fn.source = code
    fn.levels = tuple(levels)
    return fn


# ---------------------------------------------------------------------------------------------
# fused logics
# ---------------------------------------------------------------------------------------------
class _SourceCursor:
    """Hands out the elements of a fusible source in chunks, one at a time, or as one iterator.

    Like the unfused source, an iterator source calls its factory (``iter(iterable)`` for
    ``from_iterable``) only when the first element is wanted: the call may fail, and the failure
    must reach the stream like any other."""

    __slots__ = ("kind", "seq", "fast", "i", "factory", "it", "elem", "done")

    def __init__(self, kind: tuple):
        self.kind = kind[0]
        self.done = False
        self.i = 0
        self.it = None
        self.seq = None
        self.factory = None
        self.elem = None
        self.fast = False
        if self.kind == "seq":
            self.seq = kind[1]
            self.fast = type(self.seq) in (list, tuple, range)
            self.done = len(self.seq) == 0
        elif self.kind == "iter":
            self.factory = kind[1]
        else:
            self.elem = kind[1]

    def _iterator(self):
        it = self.it
        if it is None:
            it = self.it = iter(self.factory())
        return it

    def chunk(self, n: int):
        """Up to ``n`` elements (lazily for an iterator: report what was taken with ``took``)."""
        k = self.kind
        if k == "seq":
            seq = self.seq
            i = self.i
            j = min(i + n, len(seq))
            self.i = j
            if j >= len(seq):
                self.done = True
            return seq[i:j] if self.fast else map(seq.__getitem__, range(i, j))
        if k == "iter":
            return itertools.islice(self._iterator(), n)
        return itertools.repeat(self.elem, n)

    def took(self, taken: int, n: int) -> None:
        """An iterator chunk of ``n`` gave ``taken`` elements: fewer means the iterator is used up."""
        if taken < n:
            self.done = True

    def next(self):
        k = self.kind
        if k == "seq":
            i = self.i
            self.i = i + 1
            if self.i >= len(self.seq):
                self.done = True
            return self.seq[i]
        if k == "iter":
            x = next(self._iterator(), _END)
            if x is _END:
                self.done = True
            return x
        return self.elem

    def inputs(self):
        """All the elements as one iterator (for lazy runs); see ``exhausted``."""
        k = self.kind
        if k == "seq":
            if self.fast:
                self.it = iter(self.seq)
                return self.it
            return self._indexed()
        if k == "iter":
            return self._iterator()
        return itertools.repeat(self.elem)

    def _indexed(self):
        seq = self.seq
        while self.i < len(seq):
            i = self.i
            self.i = i + 1
            yield seq[i]

    def exhausted(self) -> bool:
        """Whether ``inputs()`` is known to be used up, without asking it for another element."""
        if self.done:
            return True
        if self.kind != "seq":
            return False  # an iterator tells only when asked; repeat never ends
        if self.fast:
            return self.it is not None and length_hint(self.it) == 0
        return self.i >= len(self.seq)


class _SinkState:
    """The fused form of a fold/seq/foreach/ignore sink: its accumulator and promise."""

    def __init__(self, kind: tuple, logic):
        self.kind = kind[0]
        self.promise = logic.promise
        self.acc = kind[1] if self.kind == "fold" else None
        self.fn = kind[2] if self.kind == "fold" else (kind[1] if self.kind == "foreach" else None)
        self.buf = [] if self.kind == "seq" else None
        self.result_fn = kind[2] if self.kind == "foreach" and len(kind) > 2 else None

    def target(self):
        if self.kind == "seq":
            return self.buf.append
        return self.fn

    def result(self):
        k = self.kind
        if self.result_fn is not None:
            return self.result_fn()
        if k == "fold":
            return self.acc
        if k == "seq":
            return self.buf
        return Done

    def complete(self):
        from ..ops.base import complete_promise, fail_promise

        try:
            value = self.result()
        except Exception as e:  # noqa: BLE001 - a protocol sink's final step failed: its promise fails
            fail_promise(self.promise, e)
            return
        complete_promise(self.promise, value)

    def fail(self, exc):
        from ..ops.base import fail_promise

        fail_promise(self.promise, exc)


def _label(logics) -> str:
    return "+".join(l.stage_name for l in logics)


class FusedLoop(GraphStageLogic):
    """source -> flows -> sink as one port-less logic processing chunks, one chunk per host turn.

    Without ``map_concat`` a chunk is ``chunk_size`` source elements run through code generated
    for the whole run, sink included. With one, the run is a generator (see
    :func:`generate_lazy`, sink included) resumed in small units of work until the turn's time is
    up, so an unbounded iterable still leaves the island free between turns."""

    MIN_CHUNK = 16
    MAX_CHUNK = 8192
    TARGET_SECONDS = 0.002
    in_ = None
    out = None

    def __init__(self, source: tuple, ops, names, sink: _SinkState, label: str, source_name: str = "source"):
        super().__init__(Shape())
        self.stage_name = f"fused[{label}]"
        self.source_kind = source
        self.sink = sink
        self.tail = sink.kind
        check = source_name if _may_be_none(source) else None
        self.lazy = _has_map_concat(ops)
        self.counted = not self.lazy and source[0] == "iter"
        if self.lazy:
            self.run = generate_lazy(ops, names, self.tail, check)
        else:
            self.run = generate(ops, names, self.tail, chunked=True, src=check, count=self.counted)
        self.gen = None
        self.work = 16
        self.chunk_size = 256
        self.set_keep_going(True)
        self.cursor = None

    def pre_start(self):
        self.cursor = _SourceCursor(self.source_kind)
        self.turn = self.get_async_callback(self._turn)
        self.turn.invoke(None)

    def _turn(self, _):
        cursor, sink, run = self.cursor, self.sink, self.run
        n = self.chunk_size
        t0 = time.perf_counter()
        try:
            if self.lazy:
                done = self._lazy_turn(t0)
            elif cursor.done:
                done = True
            else:
                chunk = cursor.chunk(n)
                if self.tail == "fold":
                    if self.counted:
                        sink.acc, taken = run(chunk, sink.acc, sink.fn)
                        cursor.took(taken, n)
                    else:
                        sink.acc = run(chunk, sink.acc, sink.fn)
                elif self.counted:
                    cursor.took(run(chunk, sink.target()), n)
                else:
                    run(chunk, sink.target())
                done = cursor.done
        except Exception as e:  # noqa: BLE001 - a stage of the run failed: the sink fails with it
            self.gen = None
            sink.fail(e)
            self.complete_stage()
            return
        if done:
            self.gen = None
            sink.complete()
            self.complete_stage()
            return
        if self.lazy:
            self.turn.invoke(None)
            return
        dt = time.perf_counter() - t0
        if dt < self.TARGET_SECONDS / 2 and n < self.MAX_CHUNK:
            self.chunk_size = n * 2
        elif dt > self.TARGET_SECONDS * 4 and n > self.MIN_CHUNK:
            self.chunk_size = n // 2
        self.turn.invoke(None)

    def _lazy_turn(self, t0: float) -> bool:
        """Resume the run's generator until the turn's time is up; True when it is done."""
        gen = self.gen
        if gen is None:
            sink = self.sink
            gen = self.gen = self.run(self.cursor.inputs(), sink, sink.target())
            next(gen)  # to its first pause: no user code runs
        work = self.work
        t1 = t0
        while True:
            try:
                gen.send((0, work))
            except StopIteration:
                return True
            t2 = time.perf_counter()
            if t2 - t1 < self.TARGET_SECONDS / 8:
                if work < MAX_WORK:
                    work = min(work * 2, MAX_WORK)
            elif t2 - t1 > self.TARGET_SECONDS and work > 1:
                work = max(1, work // 4)
            self.work = work
            if t2 - t0 > self.TARGET_SECONDS:
                return False
            t1 = t2

    def on_island_abort(self, cause: BaseException) -> None:
        """Stop the loop with ``cause`` (the island is being cancelled)."""
        self.sink.fail(cause)
        self.complete_stage()

    def post_stop(self):
        self.sink.fail(abrupt_termination(self))


class FusedRun(GraphStageLogic, InHandler, OutHandler):
    """An open run: its head is a source, an element inlet or a chunk inlet (from an input
    boundary); its tail is a sink, an element outlet or a chunk outlet (to an output boundary).

    Chunk sides exchange lists with the neighbouring boundary: an input boundary hands over all it
    has buffered, an output boundary never gets more elements than its current demand. Element
    sides behave like the replaced stages: one element per pull, no read-ahead. Outputs are made
    only as far as demand reaches (an element outlet: one per pull; a chunk outlet: the output
    boundary's demand; a sink: everything): inputs are taken one output's worth at a time and a
    ``map_concat`` iterable is iterated lazily (the run's generator keeps it between turns), so user
    functions see the same calls in the same order as the unfused stages. Work is done in slices
    whose size adapts so that one handler call stays within a few milliseconds; the rest continues
    on the next turn, so slow user functions never keep the island from serving kill switches and
    channel signals.

    A failure of the run is delivered after the outputs made before it (they fit the demand there
    was), and cancels upstream at once, as the failing stage would."""

    MAX_CHUNK = 4096
    BUDGET = 0.002

    def __init__(
        self,
        head: str,
        source: Optional[tuple],
        ops,
        names,
        tail: str,
        sink: Optional[_SinkState],
        label: str,
        out_boundary=None,
        source_name: str = "source",
    ):
        self.head = head
        self.tail = tail
        ins = (Inlet(f"fused[{label}].in"),) if head != "source" else ()
        outs = (Outlet(f"fused[{label}].out"),) if tail != "sink" else ()
        shape = Shape(ins, outs)
        shape.assign_ids()
        super().__init__(shape)
        self.in_ = ins[0] if ins else None
        self.out = outs[0] if outs else None
        self.stage_name = f"fused[{label}]"
        self.source_kind = source
        self.sink = sink
        self.sink_kind = sink.kind if sink is not None else "out"
        self.out_boundary = out_boundary
        check = source_name if head == "source" and _may_be_none(source) else None
        self.lazy = _has_map_concat(ops)
        self.counted = not self.lazy and head == "source" and source[0] == "iter"
        if self.lazy:
            self.make_gen = generate_lazy(ops, names, self.sink_kind, check)
            self.levels = self.make_gen.levels
        else:
            self.run_chunk = generate(ops, names, self.sink_kind, chunked=True, src=check, count=self.counted)
            self.run_one = generate(ops, names, self.sink_kind, chunked=False, src=check)
        self.gen = None  # lazy: the run's generator working through the input at hand
        self.gen_inputs = None  # lazy, inlet head: the iterator of the inputs it works through
        self.gen_full = False  # lazy: the generator paused just after an output
        self.work = 64  # lazy: units of work per resumption (adapts to the budget)
        self.pending: List[Any] = []  # outputs made for the demand, not pushed yet
        self.target = self.pending.append
        self.inbuf: Optional[list] = None
        self.inpos = 0
        self.slice = 64
        self.upstream_finished = False
        self.failure: Optional[BaseException] = None  # fails the stage once ``pending`` is out
        self.resuming = False
        self.cursor = None
        if self.in_ is not None:
            self.set_handler(self.in_, self)
        if self.out is not None:
            self.set_handler(self.out, self)
        self._resume = self.get_async_callback(self._on_resume)

    def pre_start(self):
        if self.head == "source":
            self.cursor = _SourceCursor(self.source_kind)
            if self.cursor.done:
                self.complete(self.out)
        if self.tail == "sink":
            self.target = self.sink.target()
            self.pull(self.in_)

    # -- running the ops -----------------------------------------------------------------------
    def _room(self) -> int:
        """How many more outputs the demand allows now (beyond those in ``pending``)."""
        tail = self.tail
        if tail == "sink":
            return 1 << 62
        if self.failure is not None or not self.is_available(self.out):
            return 0
        if tail == "element":
            return 1 - len(self.pending)
        return min(self.out_boundary.demand, self.MAX_CHUNK) - len(self.pending)

    def _adapt(self, n: int, dt: float) -> None:
        if dt < self.BUDGET / 4:
            if n >= self.slice and n < self.MAX_CHUNK:
                self.slice = n * 2
        elif dt > self.BUDGET and n > 1:
            self.slice = max(1, n // 4)

    def _produce(self) -> Optional[BaseException]:
        """Make outputs for the demand from the input at hand; returns the failure, if any."""
        room = self._room()
        if room <= 0:
            return None
        try:
            if self.lazy:
                self._produce_lazy(room)
            elif self.head == "source":
                self._produce_from_source(room)
            elif self.inbuf is not None:
                self._drain_inbuf(room)
        except Exception as e:  # noqa: BLE001 - a stage of the run failed
            return e
        return None

    def _apply_one(self, x) -> None:
        if self.sink_kind == "fold":
            sink = self.sink
            sink.acc = self.run_one(x, sink.acc, sink.fn)
        else:
            self.run_one(x, self.target)

    def _apply_chunk(self, chunk):
        if self.sink_kind == "fold":
            sink = self.sink
            sink.acc = self.run_chunk(chunk, sink.acc, sink.fn)
            return None
        return self.run_chunk(chunk, self.target)

    def _start_gen(self, inputs) -> None:
        sink = self.sink
        self.gen = self.make_gen(inputs, sink, self.target)
        self.gen_full = False
        next(self.gen)  # to its first pause: no user code runs

    def _produce_lazy(self, room: int) -> None:
        if self.gen is None:
            if self.head != "source" or self.cursor.done:
                return
            self._start_gen(self.cursor.inputs())
        gen = self.gen
        t0 = time.perf_counter()
        while True:
            work = self.work
            t1 = time.perf_counter()
            try:
                paused = gen.send((room, work))
            except StopIteration:
                self._gen_done()
                return
            t2 = time.perf_counter()
            if paused == FULL:
                self.gen_full = True
                return
            self.gen_full = False
            if t2 - t1 < self.BUDGET / 8:
                if work < MAX_WORK:
                    self.work = min(work * 2, MAX_WORK)
            elif t2 - t1 > self.BUDGET and work > 1:
                self.work = max(1, work // 4)
            room = self._room()
            if room <= 0 or t2 - t0 > self.BUDGET:
                return

    def _gen_done(self) -> None:
        self.gen = None
        self.gen_inputs = None
        self.gen_full = False
        if self.head == "source":
            self.cursor.done = True

    def _produce_from_source(self, room: int) -> None:
        cursor = self.cursor
        pending = self.pending
        t0 = time.perf_counter()
        if self.tail == "element":
            k = 0
            while not cursor.done:
                x = cursor.next()
                if x is _END:
                    return
                self.run_one(x, self.target)
                if pending:
                    return
                k += 1
                if k & 31 == 0 and time.perf_counter() - t0 > self.BUDGET:
                    return
            return
        while room > 0 and not cursor.done:
            n = min(room, self.slice)
            before = len(pending)
            t1 = time.perf_counter()
            taken = self._apply_chunk(cursor.chunk(n))
            if self.counted:
                cursor.took(taken, n)
            room -= len(pending) - before
            t2 = time.perf_counter()
            self._adapt(n, t2 - t1)
            if t2 - t0 > self.BUDGET:
                return

    def _drain_inbuf(self, room: int) -> None:
        """Work through the buffered input chunk in slices while outputs are wanted and time is left."""
        inbuf = self.inbuf
        pending = self.pending
        t0 = time.perf_counter()
        while self.inpos < len(inbuf) and room > 0:
            n = min(self.slice, room)
            i = self.inpos
            part = inbuf[i : i + n]
            self.inpos = i + len(part)
            before = len(pending)
            t1 = time.perf_counter()
            self._apply_chunk(part)
            room -= len(pending) - before
            t2 = time.perf_counter()
            self._adapt(n, t2 - t1)
            if t2 - t0 > self.BUDGET:
                break
        if self.inpos >= len(inbuf):
            self.inbuf = None

    def _spent(self) -> bool:
        """True when the input at hand can give no further output (without calling user code)."""
        if not self.lazy:
            return self.cursor.done if self.head == "source" else self.inbuf is None
        gen = self.gen
        if gen is None:
            return self.head != "source" or self.cursor.done
        if not self.gen_full:
            return False  # at the start, or paused for time with input at hand
        if self.head == "source":
            if not self.cursor.exhausted():
                return False
        elif not self.upstream_finished or length_hint(self.gen_inputs) != 0:
            # (before upstream finished only the next pull matters, and it resumes the generator)
            return False
        local = gen.gi_frame.f_locals  # paused after an output: is any iterable not used up?
        for n_name, e_name, l_name in self.levels:
            n = local.get(n_name)
            if n is _LIST:
                if length_hint(local[l_name]) != 0:
                    return False
            elif n is not _END or local.get(e_name) is not None:
                return False
        self._gen_done()
        return True

    def _failed(self, exc: BaseException) -> None:
        """The run failed: upstream is cancelled and the sink fails now; outputs made before the
        failure still go out (as downstream pulls) before the failure does."""
        self.failure = exc
        self.inbuf = None
        self.gen = None
        self.gen_inputs = None
        if self.sink is not None:
            self.sink.fail(exc)
        if self.in_ is not None and not self.is_closed(self.in_):
            self.cancel(self.in_, exc)

    def _take(self, n: int) -> list:
        pending = self.pending
        if n >= len(pending):
            out = pending[:]
            pending.clear()
            return out
        out = pending[:n]
        del pending[:n]
        return out

    # -- the state machine -----------------------------------------------------------------
    def _on_resume(self, _) -> None:
        self.resuming = False
        self._work()

    def _work(self) -> None:
        """Make progress: make outputs for the demand, hand them out, ask for more, or finish."""
        if self.failure is None:
            err = self._produce()
            if err is not None:
                self._failed(err)
        if self.pending and self.is_available(self.out):
            self._push_pending()
        if self.failure is not None:
            if not self.pending or self.is_closed(self.out):
                self.fail_stage(self.failure)
            return
        if self._spent():
            if self.head == "source" or self.upstream_finished:
                if not self.pending:
                    self._finish()
            elif self._room() > 0 and not self.has_been_pulled(self.in_) and not self.is_closed(self.in_):
                self.pull(self.in_)  # only for demand: pulling takes input (a chunk: the boundary's buffer)
        elif self._room() > 0 and not self.resuming:
            self.resuming = True  # the time budget ran out: continue on the next turn
            self._resume.invoke(None)

    def _push_pending(self) -> None:
        if self.tail == "chunk":
            self.push(self.out, self._take(self.out_boundary.demand))
        else:
            self.push(self.out, self.pending.pop())

    def _finish(self) -> None:
        if self.sink is not None:
            self.sink.complete()
        self.complete_stage()

    # -- handlers ------------------------------------------------------------------------------
    def on_pull(self):
        self._work()

    def on_push(self):
        data = self.grab(self.in_)
        if self.lazy:
            self.gen_inputs = it = iter(data) if self.head == "chunk" else iter((data,))
            self._start_gen(it)
        elif self.head == "chunk":
            self.inbuf = data
            self.inpos = 0
        else:
            try:
                self._apply_one(data)
            except Exception as e:  # noqa: BLE001 - a stage of the run failed
                self._failed(e)
        self._work()

    def on_upstream_finish(self):
        self.upstream_finished = True
        if self.failure is None and not self.pending and self._spent():
            self._finish()
        else:
            # input at hand is still being worked through over the next turns: with a sink as its
            # tail every port of the stage is closed now, and it must not be stopped before it is done
            self.set_keep_going(True)

    def on_upstream_failure(self, exc):
        self.inbuf = None
        self.gen = None
        self.gen_inputs = None
        if self.sink is not None:
            self.sink.fail(exc)
        self.fail_stage(exc)

    def on_island_abort(self, cause: BaseException) -> None:
        if self.sink is not None:
            self.sink.fail(cause)

    def post_stop(self):
        if self.sink is not None:
            self.sink.fail(abrupt_termination(self))


# ---------------------------------------------------------------------------------------------
# the pass over an island
# ---------------------------------------------------------------------------------------------
def _kind_of(logic) -> Optional[tuple]:
    from .boundaries import InputBoundary, OutputBoundary

    n_in, n_out = len(logic._in_conns), len(logic._out_conns)
    t = type(logic)
    if t is InputBoundary or getattr(logic, "chunk_source", False):
        return ("I", None)  # (a stage that can hand over element lists, e.g. BackgroundSource)
    if t is OutputBoundary:
        return ("O", None)
    if n_in == 1 and n_out == 1:
        op = flow_op(logic)
        return ("F", op) if op is not None else None
    if n_in == 0 and n_out == 1:
        k = source_kind(logic)
        return ("S", k) if k is not None else None
    if n_in == 1 and n_out == 0:
        k = sink_kind(logic)
        return ("K", k) if k is not None else None
    return None


def fuse(builder) -> int:
    """Replace the fusible runs of ``builder``'s island; returns how many runs were fused."""
    kinds = {}
    for logic in builder.logics:
        k = _kind_of(logic)
        if k is not None:
            kinds[id(logic)] = k

    def kind(logic):
        k = kinds.get(id(logic)) if logic is not None else None
        return k[0] if k is not None else None

    fused = 0
    for logic in list(builder.logics):
        k = kind(logic)
        if k not in ("S", "I", "F"):
            continue
        if k == "F" and kind(logic._in_conns[0].out_owner) in ("S", "I", "F"):
            continue  # not the start of a run
        run = [logic]
        inner = []
        cur = logic
        while True:
            conn = cur._out_conns[0]
            nxt = conn.in_owner
            nk = kind(nxt)
            if nk == "F":
                inner.append(conn)
                run.append(nxt)
                cur = nxt
                continue
            if nk in ("K", "O"):
                inner.append(conn)
                run.append(nxt)
            break
        stages = [l for l in run if kinds[id(l)][0] in ("S", "F", "K")]
        boundaries = len(run) - len(stages)
        if not stages or (len(stages) < 2 and boundaries == 0):
            continue
        _replace(builder, run, kinds)
        fused += 1
    return fused


def _replace(builder, run, kinds) -> None:
    head, tail = run[0], run[-1]
    hk, tk = kinds[id(head)][0], kinds[id(tail)][0]
    stages = [l for l in run if kinds[id(l)][0] in ("S", "F", "K")]
    flows = [l for l in stages if kinds[id(l)][0] == "F"]
    ops = [kinds[id(l)][1] for l in flows]
    names = [l.stage_name for l in flows]
    label = _label(stages)
    first, last = stages[0], stages[-1]
    if hk == "S" and tk == "K":
        new = FusedLoop(kinds[id(head)][1], ops, names, _SinkState(kinds[id(tail)][1], tail), label, head.stage_name)
    else:
        head_mode = {"S": "source", "I": "chunk"}.get(hk, "element")
        tail_mode = {"K": "sink", "O": "chunk"}.get(tk, "element")
        new = FusedRun(
            head_mode,
            kinds[id(head)][1] if hk == "S" else None,
            ops,
            names,
            tail_mode,
            _SinkState(kinds[id(tail)][1], tail) if tk == "K" else None,
            label,
            out_boundary=tail if tk == "O" else None,
            source_name=head.stage_name if hk == "S" else "source",
        )
    new.attributes = first.attributes
    new._fused_from = stages
    if hk == "I":
        head.chunked = True
    if tk == "O":
        tail.chunked = True
    # splice: connections inside the replaced stages go; the outer ones now end at the fused logic
    inner = set()
    for l in stages:
        for c in l._in_conns:
            if c.out_owner in stages:
                inner.add(id(c))
    builder.slot_conns = [c for c in builder.slot_conns if id(c) not in inner]
    builder.extra_conns = [c for c in builder.extra_conns if id(c) not in inner]
    if new.in_ is not None:
        conn = first._in_conns[0]
        conn.in_owner = new
        conn.inlet = new.in_
        new._in_conns[0] = conn
    if new.out is not None:
        conn = last._out_conns[0]
        conn.out_owner = new
        conn.outlet = new.out
        new._out_conns[0] = conn
    idx = builder.logics.index(first)
    for l in stages:
        builder.logics.remove(l)
    builder.logics.insert(min(idx, len(builder.logics)), new)
