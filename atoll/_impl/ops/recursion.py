"""Streaming recursion (the Kafka Streams KIP's ``recursively``), as one stage.

``source.recursively(op)`` emits every upstream element and every element that the step ``op``
produces, and feeds each produced element back into the step, until nothing is produced any more.
The step is built once by calling ``op(Flow())``. Each element is expanded by the step on its own:
when the step is a chain of stateless ``map``/``filter``/``filter_not``/``map_concat`` it runs as
generated code inside this stage; any other step runs as a substream per element on this island's
host (stateful operators in the step therefore see one element at a time). Because every element's
expansion is tracked to its end, the stage knows exactly how many elements are still in flight in
the loop, and completes once upstream has completed and that count is zero.

Event time: a produced element inherits the timestamp of the element it was produced from, and a
watermark from upstream is held until every element that arrived before it, and all of their
descendants, have been emitted and expanded - exact, because the stage tracks each upstream element's
descendants still in flight. Other signals pass at once.

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
from ...stage.signals import Watermark
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
                self.pending: deque = deque()  # (element, ts, root) waiting to be emitted
                self.to_expand: deque = deque()  # (element, ts, root) emitted, waiting for the step
                self.sub: Optional[SubSinkInlet] = None
                self.upstream_done = False
                self.roots = 0  # upstream elements so far: each is the root of its descendants
                self.in_flight: dict = {}  # root -> its elements not yet expanded (insertion = root order)
                self.held: deque = deque()  # (watermark, last root before it) waiting for the loop
                self.expanding = None  # (ts, root) of the element in the substream step

            # -- checkpoint state: the loop's queues, its root counter, the per-root counts of elements
            # still in the loop and the watermarks held for them; whether upstream ended is re-derived
            # (a restored upstream completes again). A running substream step cannot be saved: not ready.
            def ready_for_snapshot(self) -> bool:
                return self.sub is None

            def save_to_snapshot(self):
                return {"pending": list(self.pending), "to_expand": list(self.to_expand), "roots": self.roots,
                        "in_flight": list(self.in_flight.items()), "held": list(self.held)}

            def restore_from_snapshot(self, state) -> None:
                self.pending = deque(state["pending"])
                self.to_expand = deque(state["to_expand"])
                self.roots = state["roots"]
                self.in_flight = dict(state["in_flight"])
                self.held = deque(state["held"])

            # -- bookkeeping ----------------------------------------------------------------
            def _add(self, x, ts, root) -> None:
                self.pending.append((x, ts, root))
                self.in_flight[root] = self.in_flight.get(root, 0) + 1

            def _expanded(self, root) -> None:
                left = self.in_flight[root] - 1
                if left:
                    self.in_flight[root] = left
                    return
                del self.in_flight[root]
                held = self.held
                if held:
                    oldest = next(iter(self.in_flight), None)
                    while held and (oldest is None or held[0][1] < oldest):
                        self.forward_signal(held.popleft()[0])

            def on_signal(self, signal) -> None:
                if type(signal) is Watermark and (self.held or self.in_flight):  # some element before it is in the loop
                    self.held.append((signal, self.roots))
                else:
                    self.forward_signal(signal)

            # -- expansion ----------------------------------------------------------------
            def _expand_one(self) -> bool:
                """Start (or do) the expansion of one element; False if none can start now."""
                if not self.to_expand or self.sub is not None or len(self.pending) >= stage.max_pending:
                    return False
                x, ts, root = self.to_expand.popleft()
                if stage.fused is not None:
                    if expand_fn is None:  # identity step: never terminates, as the KIP warns
                        self._add(x, ts, root)
                    else:
                        expand_fn(x, lambda y: self._add(y, ts, root))
                    self._expanded(root)
                    return True
                self._start_sub(x, ts, root)
                return False

            def _start_sub(self, x, ts, root) -> None:
                from ...dsl.source import Source

                logic = self
                sub = SubSinkInlet(self, "recursively.step")

                class H(InHandler):
                    def on_push(self):
                        logic._add(sub.grab(), ts, root)
                        if len(logic.pending) < stage.max_pending:
                            sub.pull()
                        logic._progress()

                    def on_upstream_finish(self):
                        logic.sub = None
                        logic._expanded(root)
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
                        entry = self.pending.popleft()
                        self.push(out, entry[0], entry[1])
                        self.to_expand.append(entry)
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
                x = self.grab(self.in_)
                self.roots += 1
                self._add(x, self._ts, self.roots)
                self._progress()

            def on_upstream_finish(self):
                self.upstream_done = True
                self._progress()

            def post_stop(self):
                stop_substreams(self)

        return Logic()
