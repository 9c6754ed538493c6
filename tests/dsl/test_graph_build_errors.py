"""Mistakes in a GraphDSL build function are reported when the graph is built, naming the port and
the stage it belongs to (Pekko's GraphMergePreferredSpec "disallow multiple preferred inputs /
outputs", and the builder checks of Pekko's GraphDSL: ports connected twice, ports left open, ports
of another builder, returned shapes that do not match the open ports). No graph is run here.
"""
from __future__ import annotations

import re

import pytest

from atoll import (
    Broadcast,
    ClosedShape,
    Flow,
    FlowShape,
    GraphDSL,
    Merge,
    MergePreferred,
    RunnableGraph,
    Sink,
    SinkShape,
    Source,
    SourceShape,
    Zip,
)


def build_error(build, *graphs, exc=ValueError) -> str:
    with pytest.raises(exc) as info:
        GraphDSL.create(build, *graphs)
    return str(info.value)


# ---------------------------------------------------------------------------------------------- connected twice


def test_merge_preferred_disallows_multiple_preferred_inputs():
    s = Source.range(0, 4)

    def build(b):
        merge = b.add(MergePreferred(1))
        s >> merge.preferred
        s >> merge.preferred
        s >> merge.in_(0)
        merge.out >> Sink.head()
        return ClosedShape

    msg = build_error(build)
    assert "MergePreferred.preferred" in msg and "already connected" in msg
    assert "MergePreferred(1)" in msg


def test_merge_preferred_disallows_multiple_outputs():
    s = Source.range(0, 4)

    def build(b):
        merge = b.add(MergePreferred(1))
        s >> merge.preferred
        s >> merge.in_(0)
        merge.out >> Sink.head()
        merge.out >> Sink.head()
        return ClosedShape

    msg = build_error(build)
    assert "MergePreferred.out" in msg and "already connected" in msg


def test_outlet_connected_twice_with_connect():
    def build(b):
        bc = b.add(Broadcast(2))
        src = b.add(Source.single(1))
        b.connect(src.out, bc.in_)
        b.connect(bc.out(0), Sink.ignore())
        b.connect(bc.out(0), Sink.ignore())
        return ClosedShape

    msg = build_error(build)
    assert "Broadcast.out0" in msg and "Broadcast(2)" in msg and "already connected" in msg


def test_inlet_connected_twice_through_a_flow():
    def build(b):
        z = b.add(Zip())
        Source.single(1) >> Flow().map(str) >> z.in0
        Source.single(2) >> Flow().map(str) >> z.in0
        return ClosedShape

    msg = build_error(build)
    assert "Zip.in0" in msg and "already connected" in msg


# ---------------------------------------------------------------------------------------------- open ports


def test_unconnected_port_is_named():
    def build(b):
        merge = b.add(Merge(3))
        Source.single(1) >> merge.in_(0)
        Source.single(2) >> merge.in_(2)
        merge.out >> Sink.ignore()
        return ClosedShape

    msg = build_error(build)
    assert "unconnected" in msg and "Merge.in1" in msg and "Merge(3)" in msg
    assert "Merge.in0" not in msg and "Merge.in2" not in msg


def test_every_unconnected_port_is_named():
    def build(b):
        bc = b.add(Broadcast(3))
        Source.single(1) >> bc.in_
        bc.out(1) >> Sink.ignore()
        return ClosedShape

    msg = build_error(build)
    assert "Broadcast.out0" in msg and "Broadcast.out2" in msg and "Broadcast.out1" not in msg


def test_unconnected_port_of_an_imported_graph_is_named():
    def build(b, sink):
        return ClosedShape

    msg = build_error(build, Sink.seq())
    assert "unconnected" in msg and "seq.in" in msg


# ---------------------------------------------------------------------------------------------- ports of another builder


def test_port_from_another_builder():
    leaked = {}

    def first(b):
        merge = b.add(Merge(2))
        leaked["merge"] = merge
        Source.single(1) >> merge.in_(0)
        Source.single(2) >> merge.in_(1)
        return SourceShape(merge.out)

    GraphDSL.create(first)

    def second(b):
        b.connect(Source.single(3), leaked["merge"].in_(0))
        return ClosedShape

    msg = build_error(second)
    assert "Merge.in0" in msg and "not added to this builder" in msg


def test_shape_of_a_blueprint_that_was_not_added():
    merge = Merge(2)  # the stage's own shape, not a copy imported with b.add

    def build(b):
        Source.single(1) >> merge.shape.inlets[0]
        return ClosedShape

    msg = build_error(build)
    assert "Merge.in0" in msg and "not added to this builder" in msg


# ---------------------------------------------------------------------------------------------- returned shape


def test_returned_shape_with_a_port_of_another_graph():
    other = Flow().map(str).shape

    def build(b):
        f = b.add(Flow().map(str))
        return FlowShape(f.in_, other.outlets[0])

    msg = build_error(build)
    assert "not a port of this graph" in msg and "map.out" in msg


def test_returned_shape_with_a_connected_port():
    def build(b):
        bc = b.add(Broadcast(2))
        bc.out(0) >> Sink.ignore()
        return FlowShape(bc.in_, bc.out(0))

    msg = build_error(build)
    assert "Broadcast.out0" in msg and "already connected" in msg


def test_returned_shape_leaving_an_open_port_out():
    def build(b):
        bc = b.add(Broadcast(2))
        bc.out(1) >> Sink.ignore()
        return SinkShape(bc.in_)  # Broadcast.out0 is still open

    msg = build_error(build)
    assert "unconnected" in msg and "Broadcast.out0" in msg


def test_build_function_must_return_a_shape():
    msg = build_error(lambda b: None, exc=TypeError)
    assert "must return a shape" in msg


def test_wrapping_a_graph_in_the_wrong_kind_of_blueprint():
    def build(b):
        src = b.add(Source.single(1))
        return SourceShape(src.out)

    graph = GraphDSL.create(build)
    with pytest.raises(ValueError, match=re.escape("Flow.from_graph")):
        Flow.from_graph(graph)
    with pytest.raises(ValueError, match="closed graph"):
        RunnableGraph.from_graph(graph)
    assert Source.from_graph(graph) is not None


# ---------------------------------------------------------------------------------------------- misuse of the builder


def test_connect_sugar_outside_a_build_function():
    shape = Merge(2).shape
    with pytest.raises(TypeError, match="only inside a GraphDSL build function"):
        shape.out >> shape.inlets[0]


def test_connect_needs_a_flow_in_the_middle():
    def build(b):
        m = b.add(Merge(2))
        b.connect(m.out, Sink.ignore(), m.in_(0))
        return ClosedShape

    msg = build_error(build, exc=TypeError)
    assert "needs a Flow in the middle" in msg and "ignore.in" in msg


def test_create_checks_its_arguments():
    with pytest.raises(TypeError, match="build must be callable"):
        GraphDSL.create("not a function")
    with pytest.raises(TypeError, match="combine must be callable"):
        GraphDSL.create(lambda b: ClosedShape, combine=3)
