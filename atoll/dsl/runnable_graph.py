"""RunnableGraph: a blueprint with no open ports, ready to ``run``."""
from __future__ import annotations

from typing import Any, Optional

from ..stage.shapes import ClosedShape
from .blueprint import Blueprint, builder_of


class RunnableGraph(Blueprint):
    __slots__ = ()

    def __init__(self, builder):
        super().__init__(builder, ClosedShape)

    @staticmethod
    def from_graph(graph) -> "RunnableGraph":
        """Wrap a closed graph (e.g. built with GraphDSL) as a RunnableGraph."""
        if isinstance(graph, RunnableGraph):
            return graph
        shape = getattr(graph, "shape", None)
        if shape is not ClosedShape:
            raise ValueError(f"RunnableGraph.from_graph needs a closed graph, got one with shape {shape!r}")
        return RunnableGraph(builder_of(graph))

    def run(self, materializer: Optional[Any] = None) -> Any:
        """Materialize and start the graph; returns its materialized value."""
        if materializer is None:
            from ..materializer.materializer import default_materializer

            materializer = default_materializer()
        return materializer.materialize(self)

    def __repr__(self):
        return "RunnableGraph"
