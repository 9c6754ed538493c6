"""BidiFlow: two flows in opposite directions, stackable like protocol layers (Pekko's ``BidiFlow``).

Shape: ``in1 -> out1`` (outbound) and ``in2 -> out2`` (inbound). ``atop`` stacks another BidiFlow
below this one, ``join`` closes the bottom with a Flow (giving a Flow from ``in1`` to ``out2``),
``reversed`` swaps the directions.
"""
from __future__ import annotations

from typing import Any, Callable

from ..stage.shapes import BidiShape, FlowShape
from .graph_dsl import GraphBlueprint, GraphDSL
from .keep import Keep


class BidiFlow(GraphBlueprint):
    __slots__ = ()

    def __init__(self, builder, shape: BidiShape):
        if not isinstance(shape, BidiShape):
            raise TypeError(f"BidiFlow needs a BidiShape, got {shape!r}")
        super().__init__(builder, shape)

    def __repr__(self):
        return f"BidiFlow({self.shape!r})"

    @staticmethod
    def from_graph(graph) -> "BidiFlow":
        """A BidiFlow from a graph whose shape is a ``BidiShape``."""
        if isinstance(graph, BidiFlow):
            return graph
        from .blueprint import builder_of

        return BidiFlow(builder_of(graph), graph.shape)

    @staticmethod
    def from_flows(outbound, inbound, combine: Callable[[Any, Any], Any] = Keep.none) -> "BidiFlow":
        """``outbound`` for ``in1 -> out1``, ``inbound`` for ``in2 -> out2``; the materialized
        value is ``combine(outbound's, inbound's)`` (default ``NotUsed``, as Pekko's ``fromFlows``)."""
        g = GraphDSL.create(
            lambda b, o, i: BidiShape(o.inlets[0], o.outlets[0], i.inlets[0], i.outlets[0]),
            outbound,
            inbound,
            combine=combine,
        )
        return BidiFlow(g.builder, g.shape)

    @staticmethod
    def from_function(outbound: Callable[[Any], Any], inbound: Callable[[Any], Any]) -> "BidiFlow":
        """Map outbound elements with ``outbound`` and inbound ones with ``inbound``."""
        from .flow import Flow

        return BidiFlow.from_flows(Flow().map(outbound), Flow().map(inbound))

    def atop(self, other: "BidiFlow", combine: Callable[[Any, Any], Any] = Keep.left) -> "BidiFlow":
        """Stack ``other`` below this one: ``this.out1 -> other.in1`` and ``other.out2 -> this.in2``."""

        def build(b, top, bottom):
            b.connect(top.out1, bottom.in1)
            b.connect(bottom.out2, top.in2)
            return BidiShape(top.in1, bottom.out1, bottom.in2, top.out2)

        g = GraphDSL.create(build, self, other, combine=combine)
        return BidiFlow(g.builder, g.shape)

    def join(self, flow, combine: Callable[[Any, Any], Any] = Keep.left):
        """Close the bottom with ``flow`` (``out1 -> flow -> in2``): a Flow from ``in1`` to ``out2``."""
        from .flow import Flow

        def build(b, bidi, f):
            b.connect(bidi.out1, f.inlets[0])
            b.connect(f.outlets[0], bidi.in2)
            return FlowShape(bidi.in1, bidi.out2)

        return Flow.from_graph(GraphDSL.create(build, self, flow, combine=combine))

    def reversed(self) -> "BidiFlow":
        """The same stages with the two directions swapped."""
        g = GraphDSL.create(lambda b, bidi: BidiShape(bidi.in2, bidi.out2, bidi.in1, bidi.out1), self)
        return BidiFlow(g.builder, g.shape)

    def with_attributes(self, attributes) -> "BidiFlow":
        return BidiFlow(self.builder.set_attributes(attributes), self.shape)

    def map_materialized_value(self, fn) -> "BidiFlow":
        return BidiFlow(self.builder.transform_mat(fn), self.shape)
