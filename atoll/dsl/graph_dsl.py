"""GraphDSL: build graphs that are not chains — fan-in, fan-out, cycles (Pekko's ``GraphDSL``).

``GraphDSL.create(build, *graphs, combine=None)`` calls ``build(b, *shapes)``: ``b.add(graph)``
imports a blueprint and returns its shape with fresh ports (adding one blueprint twice gives two
independent copies); ``b.connect(out, in_)`` or ``b.connect(out, flow, in_)`` wires ports (``out >>
in_`` and ``out >> flow >> in_`` do the same inside ``build``); ``build`` returns the shape of the
result (``ClosedShape``, ``SourceShape(out)``, ``FlowShape(in_, out)``, ...). Mistakes are reported
when the graph is built, naming the port: a port connected twice, a port left open, a port of a
shape that was not added to this builder, a returned shape whose ports are not exactly the open ones.

Materialized value: ``NotUsed`` without imported ``graphs``; the imported graph's value with one;
``combine(v1, v2, ...)`` (default: the tuple of values) with several.

Cycles are allowed, but a cycle needs elements to circulate: a loop whose stages all wait for
demand that only the loop itself can produce deadlocks. Break it with a stage that does not wait
(``MergePreferred`` with a ``buffer(n, OverflowStrategy.drop_head)`` on the feedback edge, as in
Pekko's docs), and make sure something ends the recursion (or use ``Source.recursively``).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional

from ..materializer.composite_builder import CompositeTraversalBuilder
from ..materializer.linear_builder import LinearTraversalBuilder
from ..stage.ports import Inlet, Outlet, Port, active_graph_builder
from ..stage.shapes import ClosedShape, FlowShape, Shape, SinkShape, SourceShape
from .blueprint import builder_of
from .keep import Keep


class GraphBlueprint:
    """A graph built with GraphDSL: a traversal builder plus the shape of its open ports.

    Wrap it with ``RunnableGraph.from_graph``, ``Source.from_graph``, ``Flow.from_graph`` or
    ``Sink.from_graph``, or ``b.add`` it into another graph."""

    __slots__ = ("builder", "shape")

    def __init__(self, builder, shape: Shape):
        self.builder = builder
        self.shape = shape

    @property
    def traversal_builder(self):
        return self.builder

    def __repr__(self):
        return f"GraphBlueprint({self.shape!r})"

    def with_attributes(self, attributes) -> "GraphBlueprint":
        return GraphBlueprint(self.builder.set_attributes(attributes), self.shape)

    def add_attributes(self, attributes) -> "GraphBlueprint":
        return self.with_attributes(self.builder.attributes.and_(attributes))

    def named(self, name: str) -> "GraphBlueprint":
        from ..stage.attributes import Attributes

        return self.add_attributes(Attributes.name(name))

    def island(self, **ray_actor_options) -> "GraphBlueprint":
        from ..stage.attributes import Attributes

        return self.add_attributes(Attributes.async_boundary(**ray_actor_options))

    def map_materialized_value(self, fn) -> "GraphBlueprint":
        return GraphBlueprint(self.builder.transform_mat(fn), self.shape)


def _importable(graph):
    """The builder and shape to import ``graph`` with (the identity Flow becomes a stage)."""
    b = builder_of(graph)
    if isinstance(b, LinearTraversalBuilder) and b.is_empty:
        from .._impl.ops.identity import Identity

        stage = Identity()
        return stage.traversal_builder, stage.shape
    return b, graph.shape


class GraphBuilder:
    """The ``b`` handed to a GraphDSL build function."""

    def __init__(self):
        self._composite = CompositeTraversalBuilder()
        self._owner: Dict[int, str] = {}  # port id -> description of the shape it belongs to
        self._open: Dict[int, Port] = {}
        self._ports: Dict[int, Port] = {}

    # ------------------------------------------------------------------ importing
    def add(self, graph) -> Shape:
        """Import ``graph`` (a Source, Flow, Sink, GraphStage or graph); returns its shape with fresh ports."""
        builder, shape = _importable(graph)
        copy = shape.deep_copy()
        self._composite = self._composite.add(builder, copy, Keep.left)
        self._register(copy, graph)
        return copy

    def _import(self, graph, combine) -> Shape:
        builder, shape = _importable(graph)
        copy = shape.deep_copy()
        self._composite = self._composite.add(builder, copy, combine)
        self._register(copy, graph)
        return copy

    def _register(self, shape: Shape, graph) -> None:
        label = repr(graph)
        for p in list(shape.inlets) + list(shape.outlets):
            self._owner[id(p)] = label
            self._open[id(p)] = p
            self._ports[id(p)] = p

    # ------------------------------------------------------------------ wiring
    def _out_port(self, x) -> Outlet:
        if isinstance(x, Outlet):
            return x
        if isinstance(x, Shape):
            if len(x.outlets) == 1 and not x.inlets or isinstance(x, FlowShape):
                return x.outlets[0]
            raise ValueError(f"GraphDSL: {x!r} has no single outlet to connect from")
        shape = getattr(x, "shape", None)
        if shape is not None and len(shape.outlets) == 1 and not shape.inlets:
            return self.add(x).outlets[0]
        raise TypeError(f"GraphDSL: cannot connect from {x!r}; expected an Outlet, a shape or a Source")

    def _in_port(self, x) -> Inlet:
        if isinstance(x, Inlet):
            return x
        if isinstance(x, Shape):
            if len(x.inlets) == 1 and not x.outlets or isinstance(x, FlowShape):
                return x.inlets[0]
            raise ValueError(f"GraphDSL: {x!r} has no single inlet to connect to")
        shape = getattr(x, "shape", None)
        if shape is not None and len(shape.inlets) == 1 and not shape.outlets:
            return self.add(x).inlets[0]
        raise TypeError(f"GraphDSL: cannot connect to {x!r}; expected an Inlet, a shape or a Sink")

    def _check(self, port: Port) -> None:
        if id(port) not in self._ports:
            raise ValueError(f"GraphDSL: {port!r} belongs to a shape that was not added to this builder (use b.add)")
        if id(port) not in self._open:
            raise ValueError(f"GraphDSL: {port!r} of {self._owner[id(port)]} is already connected")

    def connect(self, out, *rest) -> "GraphBuilder":
        """``connect(out, in_)`` or ``connect(out, flow, in_)``; ``out``/``in_`` may be ports,
        single-port shapes, or a Source/Sink to add on the fly."""
        if len(rest) == 1:
            self._wire(self._out_port(out), self._in_port(rest[0]))
        elif len(rest) == 2:
            flow_shape = self.add(rest[0])
            if len(flow_shape.inlets) != 1 or len(flow_shape.outlets) != 1:
                raise TypeError(f"GraphDSL: connect(out, flow, in_) needs a Flow in the middle, got {rest[0]!r}")
            self._wire(self._out_port(out), flow_shape.inlets[0])
            self._wire(flow_shape.outlets[0], self._in_port(rest[1]))
        else:
            raise TypeError("GraphDSL: connect takes (out, in_) or (out, flow, in_)")
        return self

    def connect_sugar(self, left, right):
        """``left >> right`` inside this builder's build function (``stage.ports.connect_sugar`` calls it):
        returns the outlet to chain on when ``right`` is a flow, else None."""
        out = self._out_port(left)
        if isinstance(right, (Inlet, Shape)) and not isinstance(right, FlowShape):
            self._wire(out, self._in_port(right))
            return None
        shape = getattr(right, "shape", None)
        if isinstance(right, FlowShape) or (shape is not None and len(shape.inlets) == 1 and len(shape.outlets) == 1):
            flow_shape = right if isinstance(right, FlowShape) else self.add(right)
            self._wire(out, flow_shape.inlets[0])
            return flow_shape.outlets[0]
        self._wire(out, self._in_port(right))
        return None

    def _wire(self, out: Outlet, in_: Inlet) -> None:
        self._check(out)
        self._check(in_)
        self._composite = self._composite.wire(out, in_)
        del self._open[id(out)]
        del self._open[id(in_)]

    # ------------------------------------------------------------------ finishing
    def _result(self, shape: Shape) -> GraphBlueprint:
        if not isinstance(shape, Shape):
            raise TypeError(f"GraphDSL: the build function must return a shape, got {shape!r}")
        returned = {id(p) for p in list(shape.inlets) + list(shape.outlets)}
        for p in list(shape.inlets) + list(shape.outlets):
            if id(p) not in self._ports:
                raise ValueError(f"GraphDSL: returned shape contains {p!r}, which is not a port of this graph")
            if id(p) not in self._open:
                raise ValueError(f"GraphDSL: returned shape contains {p!r} of {self._owner[id(p)]}, which is already connected")
        left = [p for pid, p in self._open.items() if pid not in returned]
        if left:
            names = ", ".join(f"{p!r} of {self._owner[id(p)]}" for p in left)
            raise ValueError(f"GraphDSL: unconnected port(s): {names}")
        return GraphBlueprint(self._composite, shape)


class GraphDSL:
    """Entry point: ``GraphDSL.create(build, *graphs, combine=None)``; see the module docstring."""

    Builder = GraphBuilder

    @staticmethod
    def create(build: Callable[..., Shape], *graphs: Any, combine: Optional[Callable[..., Any]] = None) -> GraphBlueprint:
        if not callable(build):
            raise TypeError(f"GraphDSL.create: build must be callable, got {build!r}")
        if combine is not None and not callable(combine):
            raise TypeError(f"GraphDSL.create: combine must be callable, got {combine!r}")
        b = GraphBuilder()
        shapes = []
        for i, g in enumerate(graphs):
            if i == 0:
                shapes.append(b._import(g, Keep.right))
            elif i == 1:
                shapes.append(b._import(g, Keep.both))
            else:
                shapes.append(b._import(g, lambda acc, m: acc + (m,)))
        token = active_graph_builder.set(b)  # what ``>>`` on ports, shapes and blueprints connects through
        try:
            shape = build(b, *shapes)
        finally:
            active_graph_builder.reset(token)
        result = b._result(shape)
        if len(graphs) == 1 and combine is not None:
            result = result.map_materialized_value(combine)
        elif len(graphs) > 1 and combine is not None:
            result = result.map_materialized_value(lambda values: combine(*values))
        return result


__all__ = ["GraphDSL", "GraphBuilder", "GraphBlueprint", "ClosedShape", "SourceShape", "SinkShape", "FlowShape"]
