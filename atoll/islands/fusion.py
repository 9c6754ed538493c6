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
    from ..ops.transform import Filter, Map

    module = logic.__dict__.get("_module")
    t = type(module)
    if t is Map:
        op = ("map", module.fn)
    elif t is Filter:
        op = ("filter", module.pred, module.negate)
    else:
        # map_concat stays unfused: its iterables may be long or endless and must be drawn lazily, one
        # element per pull, which a generated loop over whole chunks cannot do
        return None
    return op if _default_supervision(logic) else None


def source_kind(logic) -> Optional[tuple]:
    """``("seq", sequence)``, ``("iter", factory)`` or ``("repeat", elem)`` for a fusible source."""
    from ..ops.sources import IterableSource, RangeSource, RepeatSource

    module = logic.__dict__.get("_module")
    if not _default_supervision(logic):
        return None  # Resume/Restart of a failing iterator: the unfused source implements them
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

    __slots__ = ("kind", "seq", "i", "it", "elem", "done", "error", "name", "checked")

    def __init__(self, kind: tuple, name: str = "source"):
        self.kind = kind[0]
        self.name = name
        #: a None element ends the source with this error, after the elements before it
        self.error: Optional[BaseException] = None
        #: whether elements must be checked for None (a range holds ints only)
        self.checked = not isinstance(kind[1], range) if self.kind == "seq" else self.kind == "iter"
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
        elif k == "iter":
            c = list(itertools.islice(self.it, n))
            if len(c) < n:
                self.done = True
        else:
            return itertools.repeat(self.elem, n)
        if self.checked:
            for j, x in enumerate(c):
                if x is None:
                    self.error = _none_error(self.name)
                    self.done = True
                    return c[:j]
        return c

    def next(self):
        k = self.kind
        if k == "seq":
            i = self.i
            self.i = i + 1
            if self.i >= len(self.seq):
                self.done = True
            x = self.seq[i]
            if x is None:
                self.error = _none_error(self.name)
                self.done = True
                return _END
            return x
        if k == "iter":
            x = next(self.it, _END)
            if x is _END:
                self.done = True
            elif x is None:
                self.error = _none_error(self.name)
                self.done = True
                return _END
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
    in_ = None
    out = None

    def __init__(self, source: tuple, ops, names, sink: _SinkState, label: str, source_name: str = "source"):
        super().__init__(Shape())
        self.stage_name = f"fused[{label}]"
        self.source_name = source_name
        self.source_kind = source
        self.sink = sink
        self.tail = sink.kind
        self.run = generate(ops, names, self.tail, chunked=True)
        self.chunk_size = 256
        self.set_keep_going(True)
        self.cursor = None

    def pre_start(self):
        try:
            self.cursor = _SourceCursor(self.source_kind, self.source_name)
        except Exception as e:  # noqa: BLE001 - the iterator factory failed: so does the stream
            self.sink.fail(e)
            self.complete_stage()
            return
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
            if cursor.error is not None:
                sink.fail(cursor.error)
            else:
                sink.complete()
            self.complete_stage()
            return
        dt = time.perf_counter() - t0
        if dt < self.TARGET_SECONDS / 2 and self.chunk_size < self.MAX_CHUNK:
            self.chunk_size *= 2
        elif dt > self.TARGET_SECONDS * 4 and self.chunk_size > self.MIN_CHUNK:
            self.chunk_size //= 2
        self.turn.invoke(None)

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
    sides behave like the replaced stages: one element per pull, no read-ahead. Input chunks are
    worked through in slices whose size adapts so that one handler call stays within a few
    milliseconds; the rest continues on the next turn, so slow user functions never keep the
    island from serving kill switches and channel signals."""

    MAX_CHUNK = 4096
    BUDGET = 0.002

    def __init__(self, head: str, source: Optional[tuple], ops, names, tail: str, sink: Optional[_SinkState], label: str, out_boundary=None, source_name: str = "source"):
        self.head = head
        self.source_name = source_name
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
        self.run_chunk = generate(ops, names, self.sink_kind, chunked=True)
        self.run_one = generate(ops, names, self.sink_kind, chunked=False)
        self.pending: List[Any] = []
        self.inbuf: Optional[list] = None
        self.inpos = 0
        self.slice = 64
        self.upstream_finished = False
        self.cursor = None
        if self.in_ is not None:
            self.set_handler(self.in_, self)
        if self.out is not None:
            self.set_handler(self.out, self)
        self._resume = self.get_async_callback(self._work)

    def pre_start(self):
        if self.head == "source":
            try:
                self.cursor = _SourceCursor(self.source_kind, self.source_name)
            except Exception as e:  # noqa: BLE001 - the iterator factory failed: so does the stream
                self._fail(e)
                return
            if self.cursor.done and self.tail != "sink":
                self.complete(self.out)
        if self.tail == "sink":
            self.target = self.sink.target()
            self.pull(self.in_)

    # -- running the ops -----------------------------------------------------------------------
    def _apply(self, data, chunked: bool) -> Optional[BaseException]:
        """Run the ops over ``data``; outputs go to ``pending`` (or the sink). Returns the failure."""
        try:
            if self.sink_kind == "fold":
                sink = self.sink
                sink.acc = (self.run_chunk if chunked else self.run_one)(data, sink.acc, sink.fn)
            elif self.tail == "sink":
                (self.run_chunk if chunked else self.run_one)(data, self.target)
            else:
                (self.run_chunk if chunked else self.run_one)(data, self.pending.append)
        except Exception as e:  # noqa: BLE001
            return e
        return None

    def _fail(self, exc: BaseException) -> None:
        """Outputs produced before the failure still go out first, as with the unfused stages."""
        self.inbuf = None
        if self.sink is not None:
            self.sink.fail(exc)
        if self.pending and self.out is not None and not self.is_closed(self.out):
            out = self._take(len(self.pending))
            if self.tail == "chunk":
                self.emit(self.out, out)
            else:
                self.emit_multiple(self.out, out)
        self.fail_stage(exc)

    def _take(self, n: int) -> list:
        pending = self.pending
        if n >= len(pending):
            self.pending = []
            return pending
        out = pending[:n]
        del pending[:n]
        return out

    def _limit(self) -> int:
        if self.tail == "sink":
            return 1 << 62
        return 1 if self.tail == "element" else max(1, min(self.out_boundary.demand, self.MAX_CHUNK))

    def _produce_from_source(self) -> Optional[BaseException]:
        cursor = self.cursor
        limit = self._limit()
        t0 = time.perf_counter()
        while len(self.pending) < limit and not cursor.done:
            if self.tail == "element":
                x = cursor.next()
                if x is _END:
                    break
                err = self._apply(x, False)
            else:
                err = self._apply(cursor.chunk(limit - len(self.pending)), True)
            if err is not None:
                return err
            if self.pending and time.perf_counter() - t0 > self.BUDGET:
                break
        return None

    def _drain_inbuf(self) -> Optional[BaseException]:
        """Work through buffered input chunk slices while outputs are wanted and time is left."""
        inbuf = self.inbuf
        t0 = time.perf_counter()
        while self.inpos < len(inbuf) and len(self.pending) < self._limit():
            n = self.slice
            part = inbuf[self.inpos : self.inpos + n]
            self.inpos += len(part)
            t1 = time.perf_counter()
            err = self._apply(part, True)
            if err is not None:
                return err
            dt = time.perf_counter() - t1
            if dt < self.BUDGET / 4 and n < self.MAX_CHUNK:
                self.slice = n * 2
            elif dt > self.BUDGET and n > 1:
                self.slice = max(1, n // 4)
            if time.perf_counter() - t0 > self.BUDGET:
                break
        if self.inpos >= len(inbuf):
            self.inbuf = None
        return None

    # -- the state machine -----------------------------------------------------------------
    def _work(self, _=None) -> None:
        """Make progress: consume buffered input, hand out outputs, ask for more, or finish."""
        if self.inbuf is not None:
            err = self._drain_inbuf()
            if err is not None:
                self._fail(err)
                return
        if self.pending and self.out is not None and self.is_available(self.out):
            self._push_pending()
        if self.inbuf is not None:
            if len(self.pending) < self._limit():
                self._resume.invoke(None)  # continue on the next turn
            return
        if self.pending:
            return  # wait for the next pull
        if self.upstream_finished:
            self._finish()
        elif self.in_ is not None and not self.has_been_pulled(self.in_) and not self.is_closed(self.in_):
            if self.tail == "sink" or self.is_available(self.out):
                self.pull(self.in_)

    def _push_pending(self) -> None:
        if self.tail == "chunk":
            self.push(self.out, self._take(self._limit()))
        else:
            self.push(self.out, self.pending.pop(0))

    def _finish(self) -> None:
        if self.sink is not None:
            self.sink.complete()
        self.complete_stage()

    # -- handlers ------------------------------------------------------------------------------
    def on_pull(self):
        if self.head == "source":
            if not self.pending:
                err = self._produce_from_source()
                if err is not None:
                    self._fail(err)
                    return
            if self.pending:
                self._push_pending()
            if not self.pending and self.cursor.done:
                if self.cursor.error is not None:
                    self._fail(self.cursor.error)
                else:
                    self.complete(self.out)
            return
        self._work()

    def on_push(self):
        data = self.grab(self.in_)
        if self.head == "chunk":
            self.inbuf = data
            self.inpos = 0
        else:
            err = self._apply(data, False)
            if err is not None:
                self._fail(err)
                return
        self._work()

    def on_upstream_finish(self):
        self.upstream_finished = True
        if self.inbuf is None and not self.pending:
            self._finish()
        else:
            # the buffered input is still being worked through over the next turns: every port
            # may be closed now, and the stage must not be stopped before it is done
            self.set_keep_going(True)

    def on_upstream_failure(self, exc):
        self.inbuf = None
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
    if t is InputBoundary:
        return ("I", None)
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
        new = FusedLoop(kinds[id(head)][1], ops, names, _SinkState(kinds[id(tail)][1], tail), label,
                        source_name=head.stage_name)
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
            source_name=head.stage_name,
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
