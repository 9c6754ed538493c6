"""Flow: a blueprint with one open input and one open output (Pekko's ``Flow``)."""
from __future__ import annotations

from typing import Any, Callable, Optional

from ..materializer.linear_builder import LinearTraversalBuilder
from ..stage.ports import Inlet, Outlet
from ..stage.shapes import FlowShape
from .blueprint import Blueprint, builder_of
from .flow_ops import FlowOps
from .graph_ops import GraphOps
from .event_time_ops import EventTimeOps
from .async_ops import AsyncOps
from .collection_ops import CollectionOps
from .rate_ops import RateOps
from .time_ops import TimeOps
from .pool_ops import PoolOps
from .keep import Keep
from .source import _check_flow, _check_sink, _linear


class Flow(FlowOps, GraphOps, EventTimeOps, AsyncOps, PoolOps, TimeOps, RateOps, CollectionOps, Blueprint):
    """``Flow()`` is the identity flow that starts a reusable chain: ``Flow().map(f).filter(p)``."""

    __slots__ = ()

    def __init__(self, builder: Optional[LinearTraversalBuilder] = None):
        if builder is None:
            builder = LinearTraversalBuilder.empty()
        if builder.is_empty:
            shape = FlowShape(Inlet("identity.in"), Outlet("identity.out"))
        else:
            shape = FlowShape(builder.in_port, builder.out_port)
        Blueprint.__init__(self, builder, shape)

    def __repr__(self):
        return "Flow()" if self.builder.is_empty else f"Flow({self.shape.in_!r} -> {self.shape.out!r})"

    # ------------------------------------------------------------------ composition
    def via(self, flow) -> "Flow":
        """This flow followed by ``flow`` (keeps this flow's materialized value)."""
        return self.via_mat(flow, Keep.left)

    def via_mat(self, flow, combine: Callable[[Any, Any], Any]) -> "Flow":
        _check_flow(flow, "via")
        return Flow(self.builder.append(_linear(flow), combine))

    def to(self, sink):
        """This flow into ``sink``: a Sink (keeps this flow's materialized value)."""
        return self.to_mat(sink, Keep.left)

    def to_mat(self, sink, combine: Callable[[Any, Any], Any]):
        from .sink import Sink

        _check_sink(sink, "to")
        return Sink(self.builder.append(_linear(sink), combine))

    def run_with(self, source, sink, materializer: Optional[Any] = None):
        """Run ``source`` through this flow into ``sink``; returns ``(source's, sink's)`` values."""
        from .source import Source

        return Source.from_graph(source).via_mat(self, Keep.right).to_mat(sink, Keep.both).run(materializer)

    # ------------------------------------------------------------------ factories
    @staticmethod
    def from_graph(graph) -> "Flow":
        """A Flow from a GraphStage or graph with one open inlet and one open outlet."""
        if isinstance(graph, Flow):
            return graph
        shape = graph.shape
        if len(shape.inlets) != 1 or len(shape.outlets) != 1:
            raise ValueError(f"Flow.from_graph needs a graph with exactly one inlet and one outlet, got {shape!r}")
        return Flow(_linear(graph))

    @staticmethod
    def from_function(fn: Callable[[Any], Any]) -> "Flow":
        """``Flow().map(fn)``."""
        return Flow().map(fn)
