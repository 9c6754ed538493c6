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
* source -> flows: a source producing one output element per pull (no read-ahead);
* flows -> sink and flows -> flows: one handler call per input element.

Elements are never produced ahead of demand except inside the closed loop, whose sink requests
everything anyway. A run whose stages carry a non-default supervision strategy is left alone.
"""
from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
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
    """``("seq", sequence)``, ``("iter", factory)`` or ``("repeat", elem)`` for a fusible source."""
    from ..ops.sources import IterableSource, RangeSource, RepeatSource

    module = logic.__dict__.get("_module")
    t = type(module)
    if t is RangeSource:
        return ("seq", module.range)
    if t is RepeatSource:
        return ("repeat", module.elem)
    if t is IterableSource:
        src = module.iterable
        if module.factory:
            return ("iter", src)
        if isinstance(src, Sequence) and not isinstance(src, (str, bytes)):
            return ("seq", src)
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
    else:
        return None
    return kind if _default_supervision(logic) else None


# ---------------------------------------------------------------------------------------------
# code generation
# ---------------------------------------------------------------------------------------------
def _none_error(name: str) -> PortStateError:
    return PortStateError(
        f"Cannot push None to port ({name}.out) of stage {name}: elements must not be None (Reactive Streams rule 2.13)"
    )


def generate(ops: List[tuple], names: List[str], tail: str, chunked: bool) -> Callable:
    """Compile ``ops`` into a function.

    ``tail`` is ``"out"`` (results are appended with ``emit``), ``"fold"``, ``"seq"``, ``"foreach"``
    or ``"ignore"``. Chunked: ``run(chunk, emit_or_state)``; single: ``run(x, emit_or_state)``.
    The fold variant returns the new accumulator."""
    env = {"_none": _none_error}
    params = []
    for i, op in enumerate(ops):
        env[f"f{i}"] = op[1]
        params.append(f"f{i}=f{i}")
    lines = []
    arg0 = "chunk" if chunked else "x"
    if tail == "fold":
        lines.append(f"def run({arg0}, acc, g, {', '.join(params + ['_none=_none'])}):")
    else:
        lines.append(f"def run({arg0}, sink, {', '.join(params + ['_none=_none'])}):")
    depth = 1
    loops = 0
    if chunked:
        lines.append("    for x in chunk:")
        depth = 2
        loops = 1
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
        lines.append("    return acc")
    elif tail == "ignore":
        lines.append(f"{pad}pass")
    else:
        lines.append(f"{pad}sink(x)")
    code = "\n".join(lines)
    exec(compile(code, f"<fused {'+'.join(names)}>", "exec"), env)
    fn = env["run"]
    fn.source = code
    return fn


# ---------------------------------------------------------------------------------------------
# fused logics
# ---------------------------------------------------------------------------------------------
class _SourceCursor:
    """Hands out the elements of a fusible source in chunks or one at a time."""

    __slots__ = ("kind", "seq", "i", "it", "elem", "done")

    def __init__(self, kind: tuple):
        self.kind = kind[0]
        self.done = False
        self.i = 0
        self.it = None
        self.seq = None
        self.elem = None
        if self.kind == "seq":
            self.seq = kind[1]
            self.done = len(self.seq) == 0
        elif self.kind == "iter":
            self.it = iter(kind[1]())
        else:
            self.elem = kind[1]

    def chunk(self, n: int):
        k = self.kind
        if k == "seq":
            i = self.i
            c = self.seq[i : i + n]
            self.i = i + len(c)
            if self.i >= len(self.seq):
                self.done = True
            return c
        if k == "iter":
            c = list(itertools.islice(self.it, n))
            if len(c) < n:
                self.done = True
            return c
        return itertools.repeat(self.elem, n)

    def next(self):
        k = self.kind
        if k == "seq":
            i = self.i
            self.i = i + 1
            if self.i >= len(self.seq):
                self.done = True
            return self.seq[i]
        if k == "iter":
            x = next(self.it, _END)
            if x is _END:
                self.done = True
            return x
        return self.elem


class _SinkState:
    """The fused form of a fold/seq/foreach/ignore sink: its accumulator and promise."""

    def __init__(self, kind: tuple, logic):
        self.kind = kind[0]
        self.promise = logic.promise
        self.acc = kind[1] if self.kind == "fold" else None
        self.fn = kind[2] if self.kind == "fold" else (kind[1] if self.kind == "foreach" else None)
        self.buf = [] if self.kind == "seq" else None

    def target(self):
        if self.kind == "seq":
            return self.buf.append
        return self.fn

    def result(self):
        k = self.kind
        if k == "fold":
            return self.acc
        if k == "seq":
            return self.buf
        return Done

    def complete(self):
        from ..ops.base import complete_promise

        complete_promise(self.promise, self.result())

    def fail(self, exc):
        from ..ops.base import fail_promise

        fail_promise(self.promise, exc)


def _label(logics) -> str:
    return "+".join(l.stage_name for l in logics)


class FusedLoop(GraphStageLogic):
    """source -> flows -> sink as one port-less logic processing chunks, one chunk per host turn."""

    MIN_CHUNK = 16
    MAX_CHUNK = 8192
    TARGET_SECONDS = 0.002

    def __init__(self, source: tuple, ops, names, sink: _SinkState, label: str):
        super().__init__(Shape())
        self.stage_name = f"fused[{label}]"
        self.source_kind = source
        self.sink = sink
        self.tail = sink.kind
        self.run = generate(ops, names, self.tail, chunked=True)
        self.chunk_size = 256
        self.set_keep_going(True)
        self.cursor = None

    def pre_start(self):
        self.cursor = _SourceCursor(self.source_kind)
        self.turn = self.get_async_callback(self._turn)
        self.turn.invoke(None)

    def _turn(self, _):
        cursor, sink, run = self.cursor, self.sink, self.run
        t0 = time.perf_counter()
        try:
            if cursor.done:
                chunk = ()
            else:
                chunk = cursor.chunk(self.chunk_size)
            if self.tail == "fold":
                sink.acc = run(chunk, sink.acc, sink.fn)
            else:
                run(chunk, sink.target())
        except Exception as e:  # noqa: BLE001 - a stage of the run failed: the sink fails with it
            sink.fail(e)
            self.complete_stage()
            return
        if cursor.done:
            sink.complete()
            self.complete_stage()
            return
        dt = time.perf_counter() - t0
        if dt < self.TARGET_SECONDS / 2 and self.chunk_size < self.MAX_CHUNK:
            self.chunk_size *= 2
        elif dt > self.TARGET_SECONDS * 4 and self.chunk_size > self.MIN_CHUNK:
            self.chunk_size //= 2
        self.turn.invoke(None)

    def abort(self, cause: BaseException) -> None:
        """Stop the loop with ``cause`` (the island is being cancelled)."""
        self.sink.fail(cause)
        self.complete_stage()

    def post_stop(self):
        self.sink.fail(abrupt_termination(self))


class FusedSource(GraphStageLogic, OutHandler):
    """source -> flows as one source: per pull, source elements go through the run until one comes out."""

    def __init__(self, source: tuple, ops, names, label: str):
        self.out = Outlet(f"fused[{label}].out")
        shape = SourceShape(self.out)
        shape.assign_ids()
        super().__init__(shape)
        self.stage_name = f"fused[{label}]"
        self.source_kind = source
        self.run = generate(ops, names, "out", chunked=False)
        self.pending: List[Any] = []
        self.set_handler(self.out, self)

    def pre_start(self):
        self.cursor = _SourceCursor(self.source_kind)
        if self.cursor.done:
            self.complete(self.out)

    def on_pull(self):
        pending = self.pending
        cursor = self.cursor
        run = self.run
        append = pending.append
        while not pending:
            if cursor.done:
                self.complete(self.out)
                return
            x = cursor.next()
            if x is _END:
                self.complete(self.out)
                return
            try:
                run(x, append)
            except Exception as e:  # noqa: BLE001
                self.emit_multiple(self.out, pending[:])
                pending.clear()
                self.fail_stage(e)
                return
        elem = pending.pop(0)
        self.push(self.out, elem)
        if not pending and cursor.done:
            self.complete(self.out)


class FusedSink(GraphStageLogic, InHandler):
    """flows -> sink as one sink."""

    def __init__(self, ops, names, sink: _SinkState, label: str):
        self.in_ = Inlet(f"fused[{label}].in")
        shape = SinkShape(self.in_)
        shape.assign_ids()
        super().__init__(shape)
        self.stage_name = f"fused[{label}]"
        self.sink = sink
        self.tail = sink.kind
        self.run = generate(ops, names, self.tail, chunked=False)
        self.set_handler(self.in_, self)

    def pre_start(self):
        self.target = self.sink.target()
        self.pull(self.in_)

    def on_push(self):
        try:
            if self.tail == "fold":
                sink = self.sink
                sink.acc = self.run(self.grab(self.in_), sink.acc, sink.fn)
            else:
                self.run(self.grab(self.in_), self.target)
        except Exception as e:  # noqa: BLE001
            self.sink.fail(e)
            self.fail_stage(e)
            return
        self.pull(self.in_)

    def on_upstream_finish(self):
        self.sink.complete()
        self.complete_stage()

    def on_upstream_failure(self, exc):
        self.sink.fail(exc)
        self.fail_stage(exc)

    def post_stop(self):
        self.sink.fail(abrupt_termination(self))


class FusedFlow(GraphStageLogic, InHandler, OutHandler):
    """flows -> flows as one flow."""

    def __init__(self, ops, names, label: str):
        self.in_ = Inlet(f"fused[{label}].in")
        self.out = Outlet(f"fused[{label}].out")
        shape = FlowShape(self.in_, self.out)
        shape.assign_ids()
        super().__init__(shape)
        self.stage_name = f"fused[{label}]"
        self.run = generate(ops, names, "out", chunked=False)
        self.pending: List[Any] = []
        self.set_handler(self.in_, self)
        self.set_handler(self.out, self)

    def on_push(self):
        pending = self.pending
        try:
            self.run(self.grab(self.in_), pending.append)
        except Exception as e:  # noqa: BLE001
            out = pending[:]
            pending.clear()
            self.emit_multiple(self.out, out)
            self.fail_stage(e)
            return
        if not pending:
            self.pull(self.in_)
        elif len(pending) == 1:
            self.push(self.out, pending.pop())
        else:
            out = pending[:]
            pending.clear()
            self.emit_multiple(self.out, out, self._after_emit)

    def _after_emit(self):
        if self.is_closed(self.in_):
            self.complete_stage()

    def on_pull(self):
        if not self.has_been_pulled(self.in_) and not self.is_closed(self.in_):
            self.pull(self.in_)

    def on_upstream_finish(self):
        self.complete_stage()


# ---------------------------------------------------------------------------------------------
# the pass over an island
# ---------------------------------------------------------------------------------------------
def fuse(builder) -> int:
    """Replace the fusible runs of ``builder``'s island; returns how many runs were fused."""
    logics = builder.logics
    kinds = {}
    for logic in logics:
        n_in, n_out = len(logic._in_conns), len(logic._out_conns)
        if n_in == 1 and n_out == 1:
            op = flow_op(logic)
            if op is not None:
                kinds[id(logic)] = ("F", op)
        elif n_in == 0 and n_out == 1:
            k = source_kind(logic)
            if k is not None:
                kinds[id(logic)] = ("S", k)
        elif n_in == 1 and n_out == 0:
            k = sink_kind(logic)
            if k is not None:
                kinds[id(logic)] = ("K", k)
    if len(kinds) < 2:
        return 0

    def kind(logic):
        return kinds.get(id(logic), (None,))[0] if logic is not None else None

    def downstream(logic):
        conn = logic._out_conns[0]
        return conn, conn.in_owner

    def upstream(logic):
        conn = logic._in_conns[0]
        return conn, conn.out_owner

    fused = 0
    for logic in list(logics):
        k = kind(logic)
        if k not in ("S", "F"):
            continue
        if k == "F" and kind(upstream(logic)[1]) in ("S", "F"):
            continue  # not the start of a run
        run = [logic]
        inner = []
        cur = logic
        while True:
            conn, nxt = downstream(cur)
            if kind(nxt) == "F":
                inner.append(conn)
                run.append(nxt)
                cur = nxt
                continue
            if kind(nxt) == "K":
                inner.append(conn)
                run.append(nxt)
            break
        if len(run) < 2:
            continue
        _replace(builder, run, inner, kinds)
        fused += 1
    return fused


def _replace(builder, run, inner, kinds) -> None:
    head, tail = run[0], run[-1]
    head_kind = kinds[id(head)]
    tail_kind = kinds[id(tail)]
    flows = [l for l in run if kinds[id(l)][0] == "F"]
    ops = [kinds[id(l)][1] for l in flows]
    names = [l.stage_name for l in flows]
    label = _label(run)
    has_source = head_kind[0] == "S"
    has_sink = tail_kind[0] == "K"
    if has_source and has_sink:
        new = FusedLoop(head_kind[1], ops, names, _SinkState(tail_kind[1], tail), label)
    elif has_source:
        new = FusedSource(head_kind[1], ops, names, label)
    elif has_sink:
        new = FusedSink(ops, names, _SinkState(tail_kind[1], tail), label)
    else:
        new = FusedFlow(ops, names, label)
    new.attributes = head.attributes
    new._fused_from = run
    # splice: drop the run's inner connections, hand its outer ones to the fused logic
    dead = {id(c) for c in inner}
    builder.slot_conns = [c for c in builder.slot_conns if id(c) not in dead]
    builder.extra_conns = [c for c in builder.extra_conns if id(c) not in dead]
    if not has_source:
        conn = head._in_conns[0]
        conn.in_owner = new
        conn.inlet = new.in_
        new._in_conns[0] = conn
    if not has_sink:
        conn = tail._out_conns[0]
        conn.out_owner = new
        conn.outlet = new.out
        new._out_conns[0] = conn
    idx = builder.logics.index(head)
    for l in run:
        builder.logics.remove(l)
    builder.logics.insert(min(idx, len(builder.logics)), new)
