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

    def run(self, materializer: Optional[Any] = None, *, name: Optional[str] = None, restore_from: Any = None) -> Any:
        """Materialize and start the graph; returns its materialized value. ``name``: the running graph's name
        (``materializer.running_graph(name)``, and the directory its checkpoints go to); ``restore_from``: a
        checkpoint (``CheckpointInfo``, a ``chk-*`` directory or a graph's checkpoint directory for its latest)
        to start from instead of the beginning."""
        if materializer is None:
            from ..materializer.materializer import default_materializer

            materializer = default_materializer()
        from ..materializer.graph_registry import materializing

        with materializing(self):  # consoles draw the running graph from this blueprint
            if name is None and restore_from is None:
                return materializer.materialize(self)
            return materializer.materialize(self, name=name, restore_from=restore_from)

    def to_dot(self) -> str:
        """This graph's islands and stages as Graphviz DOT text (``atoll.materializer.graph_drawing``)."""
        from ..materializer.graph_drawing import to_dot

        return to_dot(self)

    def to_svg(self) -> str:
        """This graph's islands and stages as an SVG picture, laid out without Graphviz."""
        from ..materializer.graph_drawing import to_svg

        return to_svg(self)

    def __repr__(self):
        return "RunnableGraph"
