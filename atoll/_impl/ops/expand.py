"""expand / extrapolate: emit more elements when downstream is faster than upstream (Pekko's
``Expand``; ``extrapolate`` is ``expand`` over ``[elem, *fn(elem)]`` with an optional initial element)."""
from __future__ import annotations

from typing import Any

from ...stage.handlers import InHandler, OutHandler
from ...stage.logic import GraphStageLogic
from ...stage.supervision import Supervision, decide
from .base import FlowStage, decider_of, require_callable

_END = object()
_EMPTY = iter(())


def _extrapolate_arg(fn):
    """``elem`` first, then the elements of ``fn(elem)``, made lazily once ``elem`` was taken (as
    Pekko's ``Iterator.single(u) ++ extrapolator(u)``)."""

    def expander(elem):
        yield elem
        yield from fn(elem)

    return expander


class Expand(FlowStage):
    """When downstream is faster than upstream, emits the next element of the iterator
    ``expander(last_elem)``; a new upstream element replaces the iterator. Upstream is pulled as soon
    as the first element of an iterator was emitted, so a fast upstream passes without expansion
    (``extrapolate``: with the original element first, and ``initial`` before anything arrived).

    **Emits when** downstream pulls and the current iterator has elements. **Backpressures when**
    downstream backpressures and the iterator's first element was not emitted yet. **Completes when**
    upstream completes (after the first element of the current iterator, if it was not emitted).
    **Cancels when** downstream cancels.

    Supervision (an exception from ``expander`` or from the iterator): Resume and Restart drop the
    element (an iterator that raised is dropped)."""

    def __init__(self, expander, op: str = "expand", initial: Any = None, has_initial: bool = False):
        require_callable(op, "extrapolate" if op == "expand" else "fn", expander)
        super().__init__(op)
        self.expander = expander
        self.initial = initial
        self.has_initial = has_initial

    @staticmethod
    def extrapolate(fn, initial: Any = None) -> "Expand":
        require_callable("extrapolate", "fn", fn)
        return Expand(_extrapolate_arg(fn), "extrapolate", initial, initial is not None)

    def create_logic(self, attributes):
        return _ExpandLogic(self, decider_of(attributes))


class _ExpandLogic(GraphStageLogic, InHandler, OutHandler):
    """The iterator is kept with a one-element lookahead (``nxt``; ``_END`` when exhausted), so
    ``hasNext`` is ``nxt is not _END``; ``advance`` can raise (the iterator failed)."""
    pulls_ahead = expands = True  # pulls eagerly, extrapolates several outputs from one input

    def __init__(self, stage: Expand, decider):
        super().__init__(stage.shape)
        self.in_ = stage.in_
        self.out = stage.out
        self.expander = stage.expander
        self.decider = decider
        self.it = _EMPTY
        self.nxt = _END
        self.looked = True  # nxt is valid
        self.expanded = False
        self.stage = stage
        self.src = None  # (element,) the current iterator was made from
        self.pos = 0  # elements of the current iterator pushed
        self.restored = None
        self.set_handler(stage.in_, self)
        self.set_handler(stage.out, self)

    # checkpoint state: the element the iterator came from and how far it went; a restore calls the
    # expander again (pure, as every function given to a built-in) and skips what went out
    def save_to_snapshot(self):
        return (self.src, self.pos, self.expanded)

    def restore_from_snapshot(self, state) -> None:
        self.restored = state

    def _resume(self, state) -> None:
        self.src, pos, self.expanded = state
        if self.src is not None:
            try:
                self.it = iter(self.expander(self.src[0]))
                self.looked = False
                for _ in range(pos):
                    self._next()
            except Exception as exc:
                self._on_iterator_failure(exc)
                return
        if self.src is None or self.expanded:
            self.pull(self.in_)

    def pre_start(self) -> None:
        stage = self.stage
        if self.restored is not None:
            state, self.restored = self.restored, None
            self._resume(state)
            return
        if stage.has_initial:
            # as Pekko's ``prepend(Source.single(initial)).via(expand)``: the initial element is the
            # first "upstream" element; the real upstream is pulled once it was emitted
            try:
                self.it = iter(self.expander(stage.initial))
                self.looked = False
                self.src, self.pos = (stage.initial,), 0
            except Exception as exc:
                self._on_expander_failure(exc)
        else:
            self.pull(self.in_)

    # ------------------------------------------------------------------ iterator with lookahead
    def _has_next(self) -> bool:
        if not self.looked:
            self.nxt = next(self.it, _END)
            self.looked = True
        return self.nxt is not _END

    def _next(self):
        self._has_next()
        x = self.nxt
        self.looked = False
        self.pos += 1
        return x

    def reset_state(self) -> None:
        self.it = _EMPTY
        self.nxt = _END
        self.looked = True
        self.expanded = False
        self.src, self.pos = None, 0

    # ------------------------------------------------------------------ handlers
    def _on_expander_failure(self, exc) -> None:
        d = decide(self.decider, exc)
        if d == Supervision.STOP:
            self.fail_stage(exc)
            return
        if d == Supervision.RESTART:
            self.reset_state()
        if not self.is_closed(self.in_) and not self.has_been_pulled(self.in_):
            self.pull(self.in_)

    def _on_iterator_failure(self, exc) -> None:
        if decide(self.decider, exc) == Supervision.STOP:
            self.fail_stage(exc)
            return
        self.reset_state()  # an iterator that raised is corrupt, for Resume as for Restart
        if self.is_closed(self.in_):
            self.complete_stage()
        elif not self.has_been_pulled(self.in_):
            self.pull(self.in_)

    def on_push(self) -> None:
        elem = self.grab(self.in_)
        try:
            it = iter(self.expander(elem))
        except Exception as exc:
            self._on_expander_failure(exc)
            return
        self.it = it
        self.looked = False
        self.src, self.pos = (elem,), 0
        try:
            if self._has_next():
                if self.is_available(self.out):
                    self.expanded = True
                    self.pull(self.in_)
                    self.push(self.out, self._next())
                else:
                    self.expanded = False
            else:
                self.pull(self.in_)
        except Exception as exc:
            self._on_iterator_failure(exc)

    def on_upstream_finish(self) -> None:
        try:
            if self._has_next() and not self.expanded:
                return  # the first element of the iterator still has to go
            self.complete_stage()
        except Exception as exc:
            self._on_iterator_failure(exc)

    def on_pull(self) -> None:
        try:
            if self._has_next():
                if not self.expanded:
                    self.expanded = True
                    if self.is_closed(self.in_):
                        self.push(self.out, self._next())
                        self.complete_stage()
                    else:
                        # pull first, to be fair when upstream is not actually slow
                        if not self.has_been_pulled(self.in_):
                            self.pull(self.in_)
                        self.push(self.out, self._next())
                else:
                    self.push(self.out, self._next())
        except Exception as exc:
            self._on_iterator_failure(exc)
