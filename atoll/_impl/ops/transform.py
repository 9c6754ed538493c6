"""Element-wise transformations: map, filter, map_concat and their stateful variants.

All of them adhere to the supervision strategy: on an exception of user code, Stop fails the stream,
Resume drops the element and continues, Restart additionally resets the operator's state.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Iterable, Optional, Tuple

from ...errors import PortStateError
from ...stage.handlers import InHandler
from ...stage.supervision import Supervision, decide, supervise, supervise_chunk
from ...stage.chunk_budget import ChunkBudget, now
from .base import ChunkFlow, FlowLogic, FlowStage, decider_of, require_callable, snapshot_copy
from .forms import FILTER, MAP, MAP_CONCAT, StatelessForm

_NOTHING = object()
#: iterators whose remaining elements can be read without disturbing them (``__reduce__`` gives the
#: sequence and the position): a checkpoint may cut while one is half consumed
_SEQUENCE_ITERATORS = (type(iter([])), type(iter(())), type(iter(range(0))))


def _remaining(it) -> list:
    """The elements a sequence iterator has still to give (it is not advanced)."""
    _, (seq,), pos = it.__reduce__()
    return list(seq[pos:])


def _push_or_pull(logic, res: list) -> None:
    if res:
        logic.push(logic.out, res)
    else:  # every element was dropped: ask again for what downstream still wants
        logic.pull(logic.in_)


class _StatelessChunkForm(ChunkFlow):
    """Chunk form of a one-in one-out logic that keeps no elements: demand passes upstream, capped by
    the stage's chunk budget (``atoll.stage.chunk_budget``) because it calls user code. In event-time
    graphs a chunk with timestamps takes the stamped path (each output keeps its element's timestamp)."""

    budget = None

    def chunk_timestamps(self) -> bool:
        return True

    def enable_chunks(self, chunk_size: int) -> None:
        super().enable_chunks(chunk_size)
        self.budget = ChunkBudget(chunk_size)
        self.set_handler(self.in_, InHandler(on_push=self._timed_push_chunk, on_upstream_finish=self.on_upstream_finish,
                                             on_upstream_failure=self.on_upstream_failure))

    def on_pull_chunk(self):
        self.pull_chunk(self.in_, min(self._out_conns[0].demand, self.budget.size))

    def _timed_push_chunk(self):
        slot = self._in_conns[0].slot
        n = len(slot) if type(slot) is list else 1
        t0 = now()
        self.on_push_chunk()
        self.budget.update(n, now() - t0)


class Map(FlowStage):
    """Transforms each element with ``fn``.

    **Emits when** the mapping function returns an element. **Backpressures when** downstream
    backpressures. **Completes when** upstream completes. **Cancels when** downstream cancels.
    Supervision: Resume and Restart drop the element (also when ``fn`` returns ``None``, which is
    not a legal element)."""

    def __init__(self, fn: Callable[[Any], Any]):
        require_callable("map", "fn", fn)
        super().__init__("map")
        self.fn = fn

    def stateless_form(self) -> StatelessForm:
        return StatelessForm(MAP, self.fn, name="map")

    def create_logic(self, attributes):
        return _MapLogic(self, decider_of(attributes))


class _MapLogic(_StatelessChunkForm, FlowLogic):
    stateless = True
    def __init__(self, stage, decider):
        super().__init__(stage)
        self.fn = stage.fn
        self.decider = decider

    def on_push(self):
        try:
            self.push(self.out, self.fn(self.grab(self.in_)))
        except Exception as e:  # noqa: BLE001
            if supervise(self, self.decider, e):
                self.pull(self.in_)

    def _none_error(self) -> PortStateError:
        return PortStateError(
            f"Cannot push None to port ({self.out.name}) of stage {self}: elements must not be None "
            "(Reactive Streams rule 2.13)"
        )

    def on_push_chunk(self):
        """Map every element of the chunk in order; a failure (or a ``None`` result) is supervised
        at its element: Stop pushes the results before it and then fails, Resume/Restart drop it."""
        fn = self.fn
        chunk = self.grab(self.in_)
        if self._ts is not None:
            self._map_stamped(chunk, self._ts)
            return
        it = iter(chunk)
        res: list = []
        ap = res.append
        while True:
            try:
                for x in it:
                    y = fn(x)
                    if y is None:
                        raise self._none_error()
                    ap(y)
                break
            except Exception as e:  # noqa: BLE001
                if not supervise_chunk(self, e, res):
                    return
        _push_or_pull(self, res)


    def _map_stamped(self, chunk: list, stamps: list) -> None:
        """Event time: each result keeps its element's timestamp; a dropped element drops its timestamp."""
        fn = self.fn
        res: list = []
        kept: list = []
        for i, x in enumerate(chunk):
            try:
                y = fn(x)
                if y is None:
                    raise self._none_error()
            except Exception as e:  # noqa: BLE001
                self._ts = kept  # what supervise_chunk pushes before a Stop carries these
                if not supervise_chunk(self, e, res):
                    return
                continue
            res.append(y)
            kept.append(stamps[i])
        self._ts = kept
        _push_or_pull(self, res)


class Filter(FlowStage):
    """Passes on the elements for which ``pred`` is true (false for ``filter_not``).

    Unlike Pekko's filter, which asks upstream for an element as soon as it starts and keeps one
    passing element at hand, this one pulls upstream only when downstream has demand: that is what
    a fused run of map/filter/map_concat does, and fused and unfused runs must call user functions
    in the same order.

    **Emits when** the predicate holds for an element. **Backpressures when** the predicate holds and
    downstream backpressures. **Completes when** upstream completes. **Cancels when** downstream
    cancels. Supervision: Resume and Restart drop the element."""

    def __init__(self, pred: Callable[[Any], bool], negate: bool = False):
        name = "filter_not" if negate else "filter"
        require_callable(name, "pred", pred)
        super().__init__(name)
        self.pred = pred
        self.negate = negate

    def stateless_form(self) -> StatelessForm:
        return StatelessForm(FILTER, self.pred, self.negate, name="filter_not" if self.negate else "filter")

    def create_logic(self, attributes):
        return _FilterLogic(self, decider_of(attributes))


class _FilterLogic(_StatelessChunkForm, FlowLogic):
    stateless = True
    def __init__(self, stage, decider):
        super().__init__(stage)
        self.pred = stage.pred
        self.negate = stage.negate
        self.decider = decider

    def on_push(self):
        try:
            elem = self.grab(self.in_)
            if bool(self.pred(elem)) != self.negate:
                self.push(self.out, elem)
            else:
                self.pull(self.in_)
        except Exception as e:  # noqa: BLE001
            if supervise(self, self.decider, e):
                self.pull(self.in_)

    def on_push_chunk(self):
        """Keep the passing elements of the chunk; an empty result pulls again with the same demand."""
        pred = self.pred
        chunk = self.grab(self.in_)
        if self._ts is not None:
            self._filter_stamped(chunk, self._ts)
            return
        it = iter(chunk)
        res: list = []
        pick = itertools.filterfalse if self.negate else filter
        while True:
            try:
                res.extend(pick(pred, it))  # a raising predicate leaves the passing elements before it in res
                break
            except Exception as e:  # noqa: BLE001
                if not supervise_chunk(self, e, res):
                    return
        _push_or_pull(self, res)


    def _filter_stamped(self, chunk: list, stamps: list) -> None:
        """Event time: the passing elements keep their timestamps."""
        pred, negate = self.pred, self.negate
        res: list = []
        kept: list = []
        for i, x in enumerate(chunk):
            try:
                passes = bool(pred(x)) != negate
            except Exception as e:  # noqa: BLE001
                self._ts = kept
                if not supervise_chunk(self, e, res):
                    return
                continue
            if passes:
                res.append(x)
                kept.append(stamps[i])
        self._ts = kept
        _push_or_pull(self, res)


class _ExpandingLogic(FlowLogic):
    """Shared by map_concat and stateful_map_concat: emits the elements of an iterable per input.

    Python iterators cannot say whether they have a next element without producing it, so the
    logic looks one element ahead: the element after the one pushed is fetched right after the push,
    which lets the stage complete together with the last element when upstream has finished.

    Signals arriving while outputs of earlier inputs are still to be pushed wait in ``held`` and go
    out right after the last of those outputs (or once they were dropped by Resume/Restart)."""

    def __init__(self, stage, decider):
        super().__init__(stage)
        self.decider = decider
        self.it = None
        self.nxt = _NOTHING
        self.held: list = []  # signals waiting behind the outputs still to be pushed

    def expand(self, elem) -> Iterable[Any]:
        raise TypeError("subclass must implement expand")

    def restart(self) -> None:
        """Reset state on a Restart decision (stateless by default)."""

    def reset_state(self) -> None:
        self.restart()

    def finish(self) -> None:
        """Upstream finished and every element is out: complete (subclasses may emit more first)."""
        self.complete_stage()

    def _pending_outputs(self) -> bool:
        """Outputs (or a deferred failure) of the inputs received so far are still to come."""
        return self.nxt is not _NOTHING or self._deferred is not None

    def on_signal(self, signal) -> None:
        if self._pending_outputs():
            self.held.append(signal)
        else:
            self.forward_signal(signal)

    def _release(self) -> None:
        """The outputs before the held signals are out (or dropped): send the signals on."""
        if self.held:
            held, self.held = self.held, []
            for s in held:
                self.forward_signal(s)

    def _advance(self) -> None:
        """Fetch the next element of the current iterable into ``nxt`` (``_NOTHING`` at its end)."""
        nxt = next(self.it, _NOTHING)
        if nxt is _NOTHING:
            self.it = None
        elif nxt is None:
            self.it = None
            raise self._none_error()
        self.nxt = nxt

    def _none_error(self) -> Exception:
        return PortStateError(
            f"Cannot push None to port ({self.out.name}) of stage {self}: elements must not be None "
            "(Reactive Streams rule 2.13)"
        )

    def _failed(self, e: Exception) -> None:
        """Supervise a failure of user code; the current iterable is dropped unless stopping."""
        self.it = None
        self.nxt = _NOTHING
        d = decide(self.decider, e)
        if d == Supervision.STOP:
            self.fail_stage(e)
            return
        self._release()
        if self.is_closed(self.in_):
            self.finish()
            return
        if d == Supervision.RESTART:
            self.restart()
        if not self.has_been_pulled(self.in_):
            self.pull(self.in_)

    def _push_and_advance(self) -> None:
        """Push ``nxt`` (out is available) and look ahead; complete or pull when done."""
        elem = self.nxt
        self.nxt = _NOTHING
        self.push(self.out, elem)
        try:
            self._advance()
        except Exception as e:  # noqa: BLE001
            # the failure belongs to the next element: like Pekko, whose iterator fails on the
            # pull that wants that element, it is handled when downstream pulls again
            self._deferred = e
            return
        if self.nxt is _NOTHING:
            self._release()
            if self.is_closed(self.in_):
                self.finish()

    _deferred: Optional[Exception] = None

    def on_push(self):
        try:
            self.it = iter(self.expand(self.grab(self.in_)))
            self._advance()
        except Exception as e:  # noqa: BLE001
            self._failed(e)
            return
        if self.nxt is _NOTHING:
            self.pull(self.in_)
        elif self.is_available(self.out):
            self._push_and_advance()

    def on_pull(self):
        if self._deferred is not None:
            e, self._deferred = self._deferred, None
            self._failed(e)
        elif self.nxt is not _NOTHING:
            self._push_and_advance()
        elif self.is_closed(self.in_):
            self.finish()
        elif not self.has_been_pulled(self.in_):
            self.pull(self.in_)

    def on_upstream_finish(self):
        if not self._pending_outputs():
            self.finish()

    # --- checkpoint state: the outputs still to push (look-ahead and the rest of the current iterable),
    # and the signals held behind them. An arbitrary iterator cannot be saved: the cut waits until it is
    # used up; the iterators of a list, tuple or range can (their remaining elements are the state).
    def ready_for_snapshot(self) -> bool:
        return self._deferred is None and (self.it is None or type(self.it) in _SEQUENCE_ITERATORS)

    def save_to_snapshot(self):
        rest = [] if self.it is None else _remaining(self.it)
        outputs = rest if self.nxt is _NOTHING else [self.nxt] + rest
        return {"outputs": outputs, "held": list(self.held)}

    def restore_from_snapshot(self, state) -> None:
        outputs = state["outputs"]
        if outputs:
            self.nxt = outputs[0]
            self.it = iter(outputs[1:])  # the look-ahead after nxt reads it (empty: the iterable ends)
        self.held = list(state["held"])


class MapConcat(FlowStage):
    """Transforms each element into an iterable of elements and emits them one by one.

    The iterable is consumed lazily, one element ahead of what was emitted (so the stage can
    complete together with the last element).

    **Emits when** the iterable of the current element has a next element and downstream pulls.
    **Backpressures when** downstream backpressures or there are still elements to emit.
    **Completes when** upstream completes and all produced elements are emitted.
    **Cancels when** downstream cancels. Supervision (of ``fn`` and of iterating its result): Resume
    and Restart drop the rest of the current element's iterable."""

    def __init__(self, fn: Callable[[Any], Iterable[Any]]):
        require_callable("map_concat", "fn", fn)
        super().__init__("map_concat")
        self.fn = fn

    def stateless_form(self) -> StatelessForm:
        return StatelessForm(MAP_CONCAT, self.fn, name="map_concat")

    def create_logic(self, attributes):
        return _MapConcatLogic(self, decider_of(attributes))


class _MapConcatLogic(ChunkFlow, _ExpandingLogic):
    """map_concat: the element form (``_ExpandingLogic``) and a chunk form.

    Chunk form: a pull for ``n`` outputs takes them from the current iterable, then from the inputs
    not expanded yet (``pending[pos:]``), calling ``fn`` on an input only while fewer than ``n``
    outputs are gathered, with the element form's one-element look-ahead; what is left of an
    iterable waits for the next pull. Upstream is asked for one input at a time, and only once
    everything received is out: how many inputs ``n`` outputs need is unknown, and asking for more
    would make the stages upstream work beyond the demand. A failure of ``fn`` or of the iteration
    is supervised at its element: Stop pushes the outputs before it, then fails; a failure fetching
    the look-ahead after the last output a pull accepts is handled on the next pull, as in the
    element form."""
    expands = True  # chunk regions: one element in, several out

    def __init__(self, stage, decider):
        super().__init__(stage, decider)
        self.fn = stage.fn
        self.pending = ()  # the last chunk of inputs (shared: only read); pending[pos:] not expanded yet
        self.pos = 0
        self.budget = None

    def expand(self, elem):
        return self.fn(elem)

    def save_to_snapshot(self):
        state = super().save_to_snapshot()
        state["pending"] = list(self.pending[self.pos:])  # chunk form: inputs received, not expanded yet
        return state

    def restore_from_snapshot(self, state) -> None:
        super().restore_from_snapshot(state)
        self.pending, self.pos = list(state["pending"]), 0

    def _pending_outputs(self) -> bool:
        return self.nxt is not _NOTHING or self._deferred is not None or self.pos < len(self.pending)

    def enable_chunks(self, chunk_size: int) -> None:
        super().enable_chunks(chunk_size)
        self.budget = ChunkBudget(chunk_size)

    def on_pull_chunk(self):
        self._fill()

    def on_push_chunk(self):
        self.pending = self.grab(self.in_)
        self.pos = 0
        self._fill()

    def _fill(self) -> None:
        budget = self.budget
        t0 = now()
        n = self._fill_up_to(min(self.demand_of(self.out), budget.size))
        budget.update(n, now() - t0)

    def _drop(self, e: Exception, res: list) -> bool:
        """Supervise ``e`` raised by the current input's ``fn`` or iterable; True: go on without the
        rest of that input's outputs."""
        self.it = None
        self.nxt = _NOTHING
        d = decide(self.decider, e)
        if d == Supervision.STOP:
            if res:
                self.push_chunk(self.out, res)
            self.fail_stage(e)
            return False
        if d == Supervision.RESTART:
            self.reset_state()
        return True

    def _fill_up_to(self, r: int) -> int:
        """Push at most ``r`` outputs (out is available, ``r`` >= 1); returns how many were made."""
        res: list = []
        ap = res.append
        fn = self.fn
        while True:
            e = self._deferred
            if e is not None:
                self._deferred = None
                if not self._drop(e, res):
                    return len(res)
                continue
            if self.nxt is not _NOTHING:
                if len(res) >= r:
                    break
                ap(self.nxt)
                self.nxt = _NOTHING
                try:
                    self._advance()
                except Exception as e:  # noqa: BLE001
                    if len(res) >= r:
                        self._deferred = e  # it belongs to the element the next pull asks for
                        break
                    if not self._drop(e, res):
                        return len(res)
                continue
            pending = self.pending
            if self.pos < len(pending):
                if len(res) >= r:
                    break
                x = pending[self.pos]
                self.pos += 1
                try:
                    self.it = iter(fn(x))
                    self._advance()
                except Exception as e:  # noqa: BLE001
                    if not self._drop(e, res):
                        return len(res)
                continue
            # everything received so far is out (or in res)
            self.pending = ()
            self.pos = 0
            if res:
                self.push_chunk(self.out, res)
            self._release()
            if self.is_closed(self.in_):
                self.finish()
            elif not res and not self.has_been_pulled(self.in_):
                self.pull_chunk(self.in_, 1)
            return len(res)
        self.push_chunk(self.out, res)
        return len(res)


class StatefulMapConcat(FlowStage):
    """``factory()`` is called once per materialization (and on Restart) and returns the function
    ``elem -> iterable`` to use; otherwise as ``map_concat``.

    If the returned function has a callable attribute ``on_complete`` (Pekko's
    ``StatefulMapConcatAccumulator``), it is called once upstream has completed and the elements
    of the iterable it returns (``None``: nothing) are emitted before the stage completes.

    **Emits when** the iterable of the current element (or of ``on_complete``) has a next element
    and downstream pulls. **Backpressures when** downstream backpressures or there are still
    elements to emit. **Completes when** upstream completes and all produced elements are emitted.
    **Cancels when** downstream cancels. Supervision: Resume drops the rest of the current
    element's iterable; Restart also calls ``factory()`` again."""

    def __init__(self, factory: Callable[[], Callable[[Any], Iterable[Any]]]):
        require_callable("stateful_map_concat", "factory", factory)
        super().__init__("stateful_map_concat")
        self.factory = factory

    def create_logic(self, attributes):
        factory = self.factory

        class Logic(_ExpandingLogic):
            fn = None
            finishing = False
            restored_fn = None

            def pre_start(self):
                if self.restored_fn is not None:
                    self.fn, self.restored_fn = self.restored_fn, None
                else:
                    self.restart()

            # the function factory() made holds the state in its closure: it is saved whole (cloudpickle;
            # it must pickle), taken at the cut so that later calls do not change the saved copy
            def save_to_snapshot(self):
                import cloudpickle

                state = super().save_to_snapshot()
                state["fn"] = cloudpickle.dumps(self.fn)
                return state

            def restore_from_snapshot(self, state) -> None:
                import cloudpickle

                super().restore_from_snapshot(state)
                self.restored_fn = cloudpickle.loads(state["fn"])

            def restart(self):
                fn = factory()
                if not callable(fn):
                    raise TypeError(f"stateful_map_concat: factory must return a callable, got {fn!r}")
                self.fn = fn

            def expand(self, elem):
                return self.fn(elem)

            def finish(self):
                if self.finishing:
                    return
                self.finishing = True
                on_complete = getattr(self.fn, "on_complete", None)
                rest = on_complete() if callable(on_complete) else None
                if rest is None:
                    self.complete_stage()
                else:
                    self.emit_multiple(self.out, rest, self.complete_stage)

        return Logic(self, decider_of(attributes))


class StatefulMap(FlowStage):
    """Maps with a state: ``create()`` gives the initial state, ``fn(state, elem)`` returns
    ``(new_state, out)``; ``out`` of ``None`` emits nothing for that element.

    ``on_complete(state)`` (optional) is called once for every state the stage creates, when that
    state is done with: when upstream completes or fails, when downstream cancels, when ``fn`` fails and supervision stops
    or restarts the stage, and when the stage is stopped abruptly. What it returns (unless
    ``None``) is emitted before the stage completes or fails (or, on Restart, before the next
    element); on cancellation or abrupt termination it is discarded.

    **Emits when** ``fn`` returns an element and downstream pulls, or ``on_complete`` returns one.
    **Backpressures when** downstream backpressures. **Completes when** upstream completes and the
    last element (if any) is emitted. **Cancels when** downstream cancels.
    Supervision: Resume keeps the state, Restart closes it with ``on_complete`` and re-creates it
    with ``create()``."""

    def __init__(
        self,
        create: Callable[[], Any],
        fn: Callable[[Any, Any], Tuple[Any, Any]],
        on_complete: Optional[Callable[[Any], Any]] = None,
    ):
        require_callable("stateful_map", "create", create)
        require_callable("stateful_map", "fn", fn)
        if on_complete is not None:
            require_callable("stateful_map", "on_complete", on_complete)
        super().__init__("stateful_map")
        self.create = create
        self.fn = fn
        self.on_complete = on_complete

    def create_logic(self, attributes):
        stage = self
        decider = decider_of(attributes)
        on_complete = stage.on_complete if stage.on_complete is not None else (lambda state: None)

        class Logic(FlowLogic):
            state = None
            open = False  # on_complete still owed for the current state
            restored = False

            def pre_start(self):
                if not self.restored:
                    self.state = stage.create()
                self.open = True

            def save_to_snapshot(self):
                return snapshot_copy(self.state)

            def restore_from_snapshot(self, state) -> None:
                self.state, self.restored = state, True

            def _close(self):
                self.open = False
                return on_complete(self.state)

            def on_push(self):
                try:
                    r = stage.fn(self.state, self.grab(self.in_))
                    try:
                        state, elem = r
                    except (TypeError, ValueError):
                        raise TypeError(f"stateful_map: fn must return (new_state, element), got {r!r}") from None
                    self.state = state
                    if elem is None:
                        self.pull(self.in_)
                    else:
                        self.push(self.out, elem)
                except Exception as e:  # noqa: BLE001
                    d = decide(decider, e)
                    if d == Supervision.STOP:
                        self._close_and_fail(e)
                    elif d == Supervision.RESUME:
                        self.pull(self.in_)
                    else:
                        last = self._close()
                        if last is None:
                            self.pull(self.in_)
                        else:
                            self.push(self.out, last)
                        self.state = stage.create()
                        self.open = True

            def _close_and_fail(self, exc):
                last = self._close()
                if last is None:
                    self.fail_stage(exc)
                else:
                    self.emit(self.out, last, lambda: self.fail_stage(exc))

            def on_upstream_finish(self):
                last = self._close()
                if last is None:
                    self.complete_stage()
                else:
                    self.emit(self.out, last, self.complete_stage)

            def on_upstream_failure(self, exc):
                self._close_and_fail(exc)

            def on_downstream_finish(self, cause):
                self._close()
                self.cancel_stage(cause)

            def post_stop(self):
                if self.open:
                    self._close()

        return Logic(self)
