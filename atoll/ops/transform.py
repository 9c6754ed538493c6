"""Element-wise transformations: map, filter, map_concat and their stateful variants.

All of them adhere to the supervision strategy: on an exception of user code, Stop fails the stream,
Resume drops the element and continues, Restart additionally resets the operator's state.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Optional, Tuple

from ..stage.supervision import Supervision, decide
from .base import FlowLogic, FlowStage, decider_of, require_callable

_NOTHING = object()


class Map(FlowStage):
    """Transforms each element with ``fn``.

    **Emits when** the mapping function returns an element. **Backpressures when** downstream
    backpressures. **Completes when** upstream completes. **Cancels when** downstream cancels."""

    fusible = "map"

    def __init__(self, fn: Callable[[Any], Any]):
        require_callable("map", "fn", fn)
        super().__init__("map")
        self.fn = fn

    def create_logic(self, attributes):
        return _MapLogic(self, decider_of(attributes))


class _MapLogic(FlowLogic):
    def __init__(self, stage, decider):
        super().__init__(stage)
        self.fn = stage.fn
        self.decider = decider

    def on_push(self):
        try:
            self.push(self.out, self.fn(self.grab(self.in_)))
        except Exception as e:  # noqa: BLE001
            if decide(self.decider, e) == Supervision.STOP:
                self.fail_stage(e)
            else:
                self.pull(self.in_)


class Filter(FlowStage):
    """Passes on the elements for which ``pred`` is true (false for ``filter_not``).

    **Emits when** the predicate holds for an element. **Backpressures when** the predicate holds and
    downstream backpressures. **Completes when** upstream completes. **Cancels when** downstream
    cancels."""

    def __init__(self, pred: Callable[[Any], bool], negate: bool = False):
        name = "filter_not" if negate else "filter"
        require_callable(name, "pred", pred)
        super().__init__(name)
        self.pred = pred
        self.negate = negate
        self.fusible = name

    def create_logic(self, attributes):
        return _FilterLogic(self, decider_of(attributes))


class _FilterLogic(FlowLogic):
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
            if decide(self.decider, e) == Supervision.STOP:
                self.fail_stage(e)
            else:
                self.pull(self.in_)


class _ExpandingLogic(FlowLogic):
    """Shared by map_concat and stateful_map_concat: emits the elements of an iterable per input."""

    def __init__(self, stage, decider):
        super().__init__(stage)
        self.decider = decider
        self.it = None
        self.nxt = _NOTHING

    def expand(self, elem) -> Iterable[Any]:
        raise TypeError("subclass must implement expand")

    def restart(self) -> None:
        """Reset state on a Restart decision (stateless by default)."""

    def _handle(self, e: Exception) -> bool:
        d = decide(self.decider, e)
        if d == Supervision.STOP:
            self.fail_stage(e)
            return False
        if d == Supervision.RESTART:
            self.restart()
        self.it = None
        self.nxt = _NOTHING
        return True

    def on_push(self):
        try:
            it = iter(self.expand(self.grab(self.in_)))
            nxt = next(it, _NOTHING)
        except Exception as e:  # noqa: BLE001
            if self._handle(e):
                self.pull(self.in_)
            return
        if nxt is _NOTHING:
            self.pull(self.in_)
            return
        self.it = it
        self.nxt = nxt
        if self.is_available(self.out):
            self._emit_next()

    def _emit_next(self):
        elem = self.nxt
        try:
            self.nxt = next(self.it, _NOTHING)
        except Exception as e:  # noqa: BLE001
            self.push(self.out, elem)
            if self._handle(e) and self.is_closed(self.in_):
                self.complete_stage()
            return
        self.push(self.out, elem)
        if self.nxt is _NOTHING:
            self.it = None
            if self.is_closed(self.in_):
                self.complete_stage()

    def on_pull(self):
        if self.nxt is not _NOTHING:
            self._emit_next()
        elif not self.has_been_pulled(self.in_):
            self.pull(self.in_)

    def on_upstream_finish(self):
        if self.nxt is _NOTHING:
            self.complete_stage()


class MapConcat(FlowStage):
    """Transforms each element into an iterable of elements and emits them one by one.

    **Emits when** the iterable of the current element has a next element and downstream pulls.
    **Backpressures when** downstream backpressures or there are still elements to emit.
    **Completes when** upstream completes and all produced elements are emitted.
    **Cancels when** downstream cancels."""

    def __init__(self, fn: Callable[[Any], Iterable[Any]]):
        require_callable("map_concat", "fn", fn)
        super().__init__("map_concat")
        self.fn = fn
        self.fusible = "map_concat"

    def create_logic(self, attributes):
        fn = self.fn

        class Logic(_ExpandingLogic):
            def expand(self, elem):
                return fn(elem)

        return Logic(self, decider_of(attributes))


class StatefulMapConcat(FlowStage):
    """``factory()`` is called once per materialization (and on Restart) and returns the function
    ``elem -> iterable`` to use; otherwise as ``map_concat``."""

    def __init__(self, factory: Callable[[], Callable[[Any], Iterable[Any]]]):
        require_callable("stateful_map_concat", "factory", factory)
        super().__init__("stateful_map_concat")
        self.factory = factory

    def create_logic(self, attributes):
        factory = self.factory

        class Logic(_ExpandingLogic):
            def pre_start(self):
                self.restart()

            def restart(self):
                self.fn = factory()
                if not callable(self.fn):
                    raise TypeError(f"stateful_map_concat: factory must return a callable, got {self.fn!r}")

            def expand(self, elem):
                return self.fn(elem)

        return Logic(self, decider_of(attributes))


class StatefulMap(FlowStage):
    """Maps with a state: ``create()`` gives the initial state, ``fn(state, elem)`` returns
    ``(new_state, out)``; ``out`` of ``None`` emits nothing for that element. When upstream completes,
    ``on_complete(state)`` may return a last element (or ``None``).

    **Emits when** ``fn`` returns an element and downstream pulls, or ``on_complete`` returns one.
    **Backpressures when** downstream backpressures. **Completes when** upstream completes and the last
    element (if any) is emitted. **Cancels when** downstream cancels.
    Supervision: Resume keeps the state, Restart re-creates it with ``create()``."""

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

        class Logic(FlowLogic):
            state = None

            def pre_start(self):
                self.state = stage.create()

            def on_push(self):
                try:
                    r = stage.fn(self.state, self.grab(self.in_))
                    try:
                        self.state, elem = r
                    except (TypeError, ValueError):
                        raise TypeError(f"stateful_map: fn must return (new_state, element), got {r!r}") from None
                except Exception as e:  # noqa: BLE001
                    d = decide(decider, e)
                    if d == Supervision.STOP:
                        self.fail_stage(e)
                        return
                    if d == Supervision.RESTART:
                        self.state = stage.create()
                    self.pull(self.in_)
                    return
                if elem is None:
                    self.pull(self.in_)
                else:
                    self.push(self.out, elem)

            def on_upstream_finish(self):
                last = stage.on_complete(self.state) if stage.on_complete is not None else None
                if last is None:
                    self.complete_stage()
                else:
                    self.emit(self.out, last, self.complete_stage)

        return Logic(self)
