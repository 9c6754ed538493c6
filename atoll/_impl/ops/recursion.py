"""Streaming recursion (the Kafka Streams KIP's ``recursively``), as one stage.

``source.recursively(op)`` emits every upstream element and every element that the step ``op``
produces, and feeds each produced element back into the step, until nothing is produced any more.
The step is built once by calling ``op(Flow())``. Each element is expanded by the step on its own:
when the step is a chain of stateless ``map``/``filter``/``filter_not``/``map_concat`` it runs as
generated code inside this stage; any other step runs as a substream per element on this island's
host (stateful operators in the step therefore see one element at a time). Because every element's
expansion is tracked to its end, the stage knows exactly how many elements are still in flight in
the loop, and completes once upstream has completed and that count is zero.

**Emits when** an upstream or produced element is waiting and downstream pulls.
**Backpressures when** downstream backpressures; upstream is pulled only when no produced
element is waiting and at most ``max_pending`` elements wait to be expanded.
**Completes when** upstream completed and every element has been emitted and expanded.
**Cancels when** downstream cancels. A failure of the step fails the stream.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Callable, List, Optional

from ...dsl.keep import Keep
from ...stage.attributes import Name
from ...stage.handlers import InHandler
from ...stage.substreams import SubSinkInlet, stop_substreams, sub_materialize
from .base import FlowLogic, FlowStage, require_callable, require_int
from .forms import IDENTITY, expand


def _stateless_forms(flow) -> Optional[list]:
    """The declared ``StatelessForm``s of ``flow``'s stages when it is a plain chain of stateless
    stages (no islands, no attributes but names), else None: such a step is expanded directly."""
    from ...materializer.traversal import (
        EnterIsland,
        MaterializeAtomic,
        PushAttributes,
        iterate,
    )

    b = flow.builder
    if getattr(b, "is_empty", False):
        return []
    if getattr(b, "pending", None) is not None or b.island_tag is not None:
        return None
    atoms = []
    for cmd in iterate(b.traversal):
        if isinstance(cmd, EnterIsland):
            return None
        if isinstance(cmd, PushAttributes) and any(type(a) is not Name for a in cmd.attributes):
            return None
        if isinstance(cmd, MaterializeAtomic):
            atoms.append(cmd.module)
    forms = []
    for m in reversed(atoms):  # a linear traversal lists the stages sink-first
        declare = getattr(m, "stateless_form", None)
        form = declare() if declare is not None else None
        if form is None:
            return None
        if form.kind != IDENTITY:
            forms.append(form)
    return forms


class Recursively(FlowStage):
    def __init__(self, step, max_pending: int = 1024):
        require_int("recursively", "max_pending", max_pending, 1)
        shape = getattr(step, "shape", None)
        if shape is None or len(shape.inlets) != 1 or len(shape.outlets) != 1:
            raise TypeError(f"recursively: op must return a Flow (one inlet, one outlet), got {step!r}")
        super().__init__("recursively")
        self.step = step
        self.max_pending = max_pending
        self.fused = _stateless_forms(step)

    @staticmethod
    def flow(op: Callable[[Any], Any], max_pending: int = 1024):
        from ...dsl.flow import Flow

        require_callable("recursively", "op", op)
        step = op(Flow())
        if step is None:
            raise TypeError("recursively: op returned None; it must return the step, e.g. lambda s: s.filter(...)")
        return Flow.from_graph(Recursively(step, max_pending))

    def create_logic(self, attributes):
        stage = self
        expand_fn = None
        if stage.fused:
            forms = stage.fused
            expand_fn = lambda x, emit: expand(forms, x, emit)  # noqa: E731

        class Logic(FlowLogic):
            def __init__(self):
                super().__init__(stage)
                self.pending: deque = deque()  # waiting to be emitted
                self.to_expand: deque = deque()  # emitted, waiting for the step
                self.sub: Optional[SubSinkInlet] = None
                self.upstream_done = False

            # -- expansion ----------------------------------------------------------------
            def _expand_one(self) -> bool:
                """Start (or do) the expansion of one element; False if none can start now."""
                if not self.to_expand or self.sub is not None or len(self.pending) >= stage.max_pending:
                    return False
                x = self.to_expand.popleft()
                if stage.fused is not None:
                    if expand_fn is None:  # identity step: never terminates, as the KIP warns
                        self.pending.append(x)
                    else:
                        expand_fn(x, self.pending.append)
                    return True
                self._start_sub(x)
                return False

            def _start_sub(self, x) -> None:
                from ...dsl.source import Source

                logic = self
                sub = SubSinkInlet(self, "recursively.step")

                class H(InHandler):
                    def on_push(self):
                        logic.pending.append(sub.grab())
                        if len(logic.pending) < stage.max_pending:
                            sub.pull()
                        logic._progress()

                    def on_upstream_finish(self):
                        logic.sub = None
                        logic._progress()

                    def on_upstream_failure(self, exc):
                        logic.sub = None
                        logic.fail_stage(exc)

                sub.set_handler(H())
                self.sub = sub
                sub_materialize(self, Source.single(x).via(stage.step).to_mat(sub.sink, Keep.left))
                sub.pull()

            # -- the state machine --------------------------------------------------------
            def _progress(self) -> None:
                out, in_ = self.out, self.in_
                while True:
                    if self.pending and self.is_available(out):
                        x = self.pending.popleft()
                        self.push(out, x)
                        self.to_expand.append(x)
                    if self.sub is not None and not self.sub.has_been_pulled() and not self.sub.is_closed() and len(self.pending) < stage.max_pending:
                        self.sub.pull()
                    if not self._expand_one():
                        break
                if self.upstream_done:
                    if not self.pending and not self.to_expand and self.sub is None:
                        self.complete_stage()
                elif (
                    not self.pending
                    and self.is_available(out)
                    and len(self.to_expand) < stage.max_pending
                    and not self.has_been_pulled(in_)
                ):
                    self.pull(in_)

            def on_pull(self):
                self._progress()

            def on_push(self):
                self.pending.append(self.grab(self.in_))
                self._progress()

            def on_upstream_finish(self):
                self.upstream_done = True
                self._progress()

            def post_stop(self):
                stop_substreams(self)

        return Logic()
