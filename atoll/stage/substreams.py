"""Substreams: stages that run other streams (Pekko's ``SubSinkInlet``/``SubSourceOutlet``).

A logic that needs a dynamic stream (``recover_with_retries``, ``flat_map_concat`` ...) creates a
``SubSinkInlet`` (to consume a Source) or a ``SubSourceOutlet`` (to feed a Sink), and materializes it
with ``sub_materialize(logic, graph)``: the substream runs as another interpreter on the same island
host (same thread), so nothing crosses a process boundary. The parent and the substream talk through
async callbacks; a parent that stops cancels its open substreams.

Limitation: every island of a sub-materialized graph joins the parent's host (``.island()`` inside a
substream does not start another thread or actor).
"""
from __future__ import annotations

from typing import Any, Optional

from ..errors import NO_MORE_ELEMENTS_NEEDED, PortStateError
from ..markers import NotUsed
from .attributes import Attributes
from .graph_stage import GraphStage
from .handlers import InHandler, OutHandler
from .logic import GraphStageLogic
from .ports import Inlet, Outlet
from .shapes import SinkShape, SourceShape

_EMPTY = object()


def sub_materialize(logic: GraphStageLogic, graph) -> Any:
    """Run the runnable ``graph`` on ``logic``'s island host; returns its materialized value."""
    from .._impl.islands.local_materializer import materialize_in_host

    interp = logic.interpreter
    return materialize_in_host(graph, interp.host, interp.materializer, f"{interp.name}/{logic.stage_name}")


def _register(logic: GraphStageLogic, sub) -> None:
    subs = getattr(logic, "_substreams", None)  # not logic.__dict__: it would slow every attribute read
    if subs is None:
        subs = logic._substreams = []
    subs.append(sub)


def stop_substreams(logic: GraphStageLogic, failure: Optional[BaseException] = None) -> None:
    """Cancel/complete the substreams of a stopping logic (called from its ``post_stop`` path)."""
    subs = getattr(logic, "_substreams", None)
    if subs:
        logic._substreams = None
        for sub in subs:
            sub._parent_stopped(failure)


class SubSinkInlet:
    """An inlet of ``logic`` fed by a substream: put ``sink`` at the end of a Source and run it with
    ``sub_materialize``; then use ``pull``/``grab``/``cancel`` as with a port, and ``set_handler``
    for ``on_push``/``on_upstream_finish``/``on_upstream_failure``."""

    def __init__(self, logic: GraphStageLogic, name: str):
        self.logic = logic
        self.name = name
        self.handler: Optional[InHandler] = None
        self.elem = _EMPTY
        self.closed = False
        self.pulled = False
        self._sub = None  # the substream's SubSink logic once it started
        self._pending = []  # commands issued before the substream's logic exists
        self._from_sub = logic.get_async_callback(self._on_sub_signal)
        _register(logic, self)

    def __repr__(self):
        return f"SubSinkInlet({self.name})"

    @property
    def sink(self):
        """The Sink to attach to the substream (materialize it once)."""
        from ..dsl.sink import Sink

        return Sink.from_graph(_SubSinkStage(self))

    def set_handler(self, handler: InHandler) -> None:
        self.handler = handler

    def is_available(self) -> bool:
        return self.elem is not _EMPTY

    def is_closed(self) -> bool:
        return self.closed

    def has_been_pulled(self) -> bool:
        return self.pulled and not self.closed

    def grab(self) -> Any:
        if self.elem is _EMPTY:
            raise PortStateError(f"cannot grab from {self}: no element available")
        e, self.elem = self.elem, _EMPTY
        return e

    def pull(self) -> None:
        if self.pulled:
            raise PortStateError(f"cannot pull {self} twice")
        if self.closed:
            raise PortStateError(f"cannot pull closed {self}")
        self.pulled = True
        self._command(("pull",))

    def cancel(self, cause: BaseException = NO_MORE_ELEMENTS_NEEDED) -> None:
        if not self.closed:
            self.closed = True
            self._command(("cancel", cause))

    def _command(self, cmd) -> None:
        if self._sub is None:
            self._pending.append(cmd)
        else:
            self._sub.command.invoke(cmd)

    def _attached(self, sub_logic) -> None:
        self._sub = sub_logic
        for cmd in self._pending:
            sub_logic.command.invoke(cmd)
        self._pending = []

    def _on_sub_signal(self, signal) -> None:
        if self.closed:
            return
        kind = signal[0]
        if kind == "push":
            self.elem = signal[1]
            self.pulled = False
            self.handler.on_push()
        elif kind == "complete":
            self.closed = True
            self.handler.on_upstream_finish()
        else:
            self.closed = True
            self.handler.on_upstream_failure(signal[1])

    def _parent_stopped(self, failure) -> None:
        self.cancel(failure if failure is not None else NO_MORE_ELEMENTS_NEEDED)


class _SubSinkStage(GraphStage):
    def __init__(self, owner: SubSinkInlet):
        self.in_ = Inlet(f"{owner.name}.in")
        self.shape = SinkShape(self.in_)
        self.initial_attributes = Attributes.name(owner.name)
        self.owner = owner

    def create_logic(self, attributes):
        owner = self.owner
        in_ = self.in_

        class Logic(GraphStageLogic, InHandler):
            def __init__(self):
                super().__init__(SinkShape(in_))
                self.set_handler(in_, self)
                self.command = self.get_async_callback(self._on_command)
                self.done = False

            def pre_start(self):
                owner._attached(self)

            def _on_command(self, cmd):
                if cmd[0] == "pull":
                    if not self.is_closed(in_) and not self.has_been_pulled(in_):
                        self.pull(in_)
                else:
                    self.done = True
                    self.cancel(in_, cmd[1])

            def _signal(self, sig):
                self.done = True
                owner._from_sub.invoke(sig)

            def on_push(self):
                owner._from_sub.invoke(("push", self.grab(in_)))

            def on_upstream_finish(self):
                self._signal(("complete",))

            def on_upstream_failure(self, exc):
                self._signal(("error", exc))

        return Logic()


class SubSourceOutlet:
    """An outlet of ``logic`` feeding a substream: put ``source`` in front of a Sink and run it with
    ``sub_materialize``; then ``push``/``complete``/``fail``, with ``set_handler`` for ``on_pull``
    and ``on_downstream_finish``."""

    def __init__(self, logic: GraphStageLogic, name: str):
        self.logic = logic
        self.name = name
        self.handler: Optional[OutHandler] = None
        self.available = False
        self.closed = False
        self._sub = None
        self._pending = []
        self._from_sub = logic.get_async_callback(self._on_sub_signal)
        _register(logic, self)

    def __repr__(self):
        return f"SubSourceOutlet({self.name})"

    @property
    def source(self):
        from ..dsl.source import Source

        return Source.from_graph(_SubSourceStage(self))

    def set_handler(self, handler: OutHandler) -> None:
        self.handler = handler

    def is_available(self) -> bool:
        return self.available and not self.closed

    def is_closed(self) -> bool:
        return self.closed

    def push(self, elem: Any) -> None:
        if not self.available:
            raise PortStateError(f"cannot push to {self}: not pulled")
        if self.closed:
            raise PortStateError(f"cannot push to closed {self}")
        if elem is None:
            raise PortStateError(f"cannot push None to {self} (Reactive Streams rule 2.13)")
        self.available = False
        self._command(("push", elem))

    def complete(self) -> None:
        if not self.closed:
            self.closed = True
            self.available = False
            self._command(("complete",))

    def fail(self, exc: BaseException) -> None:
        if not self.closed:
            self.closed = True
            self.available = False
            self._command(("fail", exc))

    def _command(self, cmd) -> None:
        if self._sub is None:
            self._pending.append(cmd)
        else:
            self._sub.command.invoke(cmd)

    def _attached(self, sub_logic) -> None:
        self._sub = sub_logic
        for cmd in self._pending:
            sub_logic.command.invoke(cmd)
        self._pending = []

    def _on_sub_signal(self, signal) -> None:
        if self.closed:
            return
        if signal[0] == "pull":
            self.available = True
            self.handler.on_pull()
        else:
            self.closed = True
            self.available = False
            self.handler.on_downstream_finish(signal[1])

    def _parent_stopped(self, failure) -> None:
        if failure is None:
            self.complete()
        else:
            self.fail(failure)


class _SubSourceStage(GraphStage):
    def __init__(self, owner: SubSourceOutlet):
        self.out = Outlet(f"{owner.name}.out")
        self.shape = SourceShape(self.out)
        self.initial_attributes = Attributes.name(owner.name)
        self.owner = owner

    def create_logic(self, attributes):
        owner = self.owner
        out = self.out

        class Logic(GraphStageLogic, OutHandler):
            def __init__(self):
                super().__init__(SourceShape(out))
                self.set_handler(out, self)
                self.command = self.get_async_callback(self._on_command)

            def pre_start(self):
                owner._attached(self)

            def _on_command(self, cmd):
                kind = cmd[0]
                if kind == "push":
                    self.push(out, cmd[1])
                elif kind == "complete":
                    self.complete(out)
                else:
                    self.fail(out, cmd[1])

            def on_pull(self):
                owner._from_sub.invoke(("pull",))

            def on_downstream_finish(self, cause):
                owner._from_sub.invoke(("cancel", cause))
                self.complete_stage()

        return Logic()


__all__ = ["SubSinkInlet", "SubSourceOutlet", "sub_materialize", "stop_substreams", "NotUsed"]
