"""Traversal builders: slot assignment and wiring, materialized values, attributes and islands
(Pekko's TraversalBuilderSpec and LinearTraversalBuilderSpec).

``tmat(builder)`` puts every port into its global slot: ``outlets[i]`` is wired to ``inlets[i]``.
Linear chains are built sink first, so their slots count from the sink backwards.
"""
from __future__ import annotations

import pytest

from atoll import Keep, NotUsed
from atoll.materializer.composite_builder import CompositeTraversalBuilder
from atoll.materializer.debug import traversal_lines, wiring_lines
from atoll.materializer.linear_builder import LinearTraversalBuilder
from atoll.materializer.atomic_builder import CompletedTraversalBuilder, atomic
from atoll.materializer.traversal import (
    Concat,
    EmptyTraversal,
    MaterializeAtomic,
    Pop,
    PushNotUsed,
    iterate,
    normalize_concat,
)
from atoll.stage.attributes import Attributes
from atoll.stage.ports import Inlet, Outlet
from atoll.stage.shapes import ClosedShape, FanOutShape, FlowShape, SinkShape, SourceShape

from traversal_kit import (
    TEST_DEFAULT_ISLAND,
    TEST_ISLAND_1,
    TEST_ISLAND_2,
    CompositeTestFlow,
    CompositeTestSink,
    CompositeTestSource,
    LinearTestFlow,
    LinearTestSink,
    LinearTestSource,
    TestModule,
    append,
    names,
)
from traversal_kit import test_materialize as tmat

empty = CompositeTraversalBuilder


# ==================================================================================== composite builder
class TestCompositeTraversalBuilder:
    source = CompositeTestSource()
    sink = CompositeTestSink()
    flow1 = CompositeTestFlow("1")
    flow2 = CompositeTestFlow("2")

    def test_single_source_and_sink(self):
        source, sink = self.source, self.sink
        b = source.traversal_builder.add(sink.traversal_builder, sink.shape, Keep.left).wire(source.out, sink.in_)
        m = tmat(b)
        assert m.connections == 1
        assert m.outlets[0] is source.out and m.inlets[0] is sink.in_

    def test_nested_source_and_sink(self):
        source, sink = self.source, self.sink
        nested = empty().add(source.traversal_builder, source.shape, Keep.left)
        b = sink.traversal_builder.add(nested, source.shape, Keep.left).wire(source.out, sink.in_)
        m = tmat(b)
        assert m.connections == 1
        assert m.outlets[0] is source.out and m.inlets[0] is sink.in_

    def test_remapped_source_and_sink(self):
        source, sink = self.source, self.sink
        remapped = SourceShape(Outlet("remapped.out"))
        remapped.out.mapped_to = source.out
        b = sink.traversal_builder.add(source.traversal_builder, remapped, Keep.left).wire(remapped.out, sink.in_)
        m = tmat(b)
        assert m.connections == 1
        assert m.outlets[0] is source.out and m.inlets[0] is sink.in_

    def _two_flows(self, m):
        assert m.connections == 3
        assert m.outlets[0] is self.source.out and m.inlets[0] is self.flow1.in_
        assert m.outlets[1] is self.flow1.out and m.inlets[1] is self.flow2.in_
        assert m.outlets[2] is self.flow2.out and m.inlets[2] is self.sink.in_

    def _four(self):
        return (
            self.source.traversal_builder.add(self.flow1.traversal_builder, self.flow1.shape, Keep.left)
            .add(self.flow2.traversal_builder, self.flow2.shape, Keep.left)
            .add(self.sink.traversal_builder, self.sink.shape, Keep.left)
        )

    def test_two_flows(self):
        s, f1, f2, k = self.source, self.flow1, self.flow2, self.sink
        b = self._four().wire(s.out, f1.in_).wire(f1.out, f2.in_).wire(f2.out, k.in_)
        self._two_flows(tmat(b))

    def test_two_flows_wired_in_opposite_order(self):
        s, f1, f2, k = self.source, self.flow1, self.flow2, self.sink
        b = self._four().wire(f2.out, k.in_).wire(f1.out, f2.in_).wire(s.out, f1.in_)
        self._two_flows(tmat(b))

    def test_two_flows_wired_in_an_irregular_order(self):
        s, f1, f2, k = self.source, self.flow1, self.flow2, self.sink
        b = (
            s.traversal_builder.add(k.traversal_builder, k.shape, Keep.left)
            .add(f2.traversal_builder, f2.shape, Keep.left)
            .wire(f2.out, k.in_)
            .add(f1.traversal_builder, f1.shape, Keep.left)
            .wire(s.out, f1.in_)
            .wire(f1.out, f2.in_)
        )
        m = tmat(b)
        assert m.connections == 3
        assert m.outlets[0] is f2.out and m.inlets[0] is k.in_
        assert m.outlets[1] is f1.out and m.inlets[1] is f2.in_
        assert m.outlets[2] is s.out and m.inlets[2] is f1.in_

    def test_flow_wired_to_its_imported_self(self):
        s, f1, k = self.source, self.flow1, self.sink
        remapped = f1.shape.deep_copy()
        b = (
            s.traversal_builder.add(f1.traversal_builder, f1.shape, Keep.left)
            .add(f1.traversal_builder, remapped, Keep.left)
            .add(k.traversal_builder, k.shape, Keep.left)
            .wire(s.out, f1.in_)
            .wire(f1.out, remapped.inlets[0])
            .wire(remapped.outlets[0], k.in_)
        )
        m = tmat(b)
        assert m.connections == 3
        assert m.outlets[0] is s.out and m.inlets[0] is f1.in_
        assert m.outlets[1] is f1.out and m.inlets[1] is f1.in_
        assert m.outlets[2] is f1.out and m.inlets[2] is k.in_

    def test_nested_flow_chain(self):
        s, f1, f2, k = self.source, self.flow1, self.flow2, self.sink
        nested = f1.traversal_builder.add(f2.traversal_builder, f2.shape, Keep.left).wire(f1.out, f2.in_)
        b = (
            s.traversal_builder.add(nested, FlowShape(f1.in_, f2.out), Keep.left)
            .add(k.traversal_builder, k.shape, Keep.left)
            .wire(s.out, f1.in_)
            .wire(f2.out, k.in_)
        )
        self._two_flows(tmat(b))

    def test_nested_flow_chain_imported(self):
        s, f1, f2, k = self.source, self.flow1, self.flow2, self.sink
        imported = FlowShape(Inlet("imported.in"), Outlet("imported.out"))
        imported.in_.mapped_to = f1.in_
        imported.out.mapped_to = f2.out
        nested = f1.traversal_builder.add(f2.traversal_builder, f2.shape, Keep.left).wire(f1.out, f2.in_)
        b = (
            s.traversal_builder.add(nested, imported, Keep.left)
            .add(k.traversal_builder, k.shape, Keep.left)
            .wire(s.out, imported.in_)
            .wire(imported.out, k.in_)
        )
        self._two_flows(tmat(b))

    def test_flow_wired_to_self(self):
        f1 = self.flow1
        m = tmat(f1.traversal_builder.wire(f1.out, f1.in_))
        assert m.connections == 1
        assert m.outlets[0] is f1.out and m.inlets[0] is f1.in_

    def test_empty_builder(self):
        m = tmat(empty())
        assert m.connections == 0 and m.outlets == [] and m.inlets == []
        assert m.mat_value is NotUsed

    # -- materialized values
    def _source_sink(self, combine):
        s, k = self.source, self.sink
        return s.traversal_builder.add(k.traversal_builder, k.shape, combine).wire(s.out, k.in_)

    def _with_flow(self, c1, c2):
        s, f1, k = self.source, self.flow1, self.sink
        return (
            s.traversal_builder.add(f1.traversal_builder, f1.shape, c1)
            .add(k.traversal_builder, k.shape, c2)
            .wire(s.out, f1.in_)
            .wire(f1.out, k.in_)
        )

    def test_mat_value_keep_left(self):
        assert tmat(self._source_sink(Keep.left)).mat_value == "TestSource"

    def test_mat_value_keep_right(self):
        assert tmat(self._source_sink(Keep.right)).mat_value == "TestSink"

    def test_mat_value_keep_both(self):
        assert tmat(self._source_sink(Keep.both)).mat_value == ("TestSource", "TestSink")

    def test_mat_value_keep_none(self):
        assert tmat(self._source_sink(Keep.none)).mat_value is NotUsed

    def test_mat_value_custom_combiner_gets_left_then_right(self):
        assert tmat(self._source_sink(lambda a, b: f"{a}+{b}")).mat_value == "TestSource+TestSink"

    def test_keep_mapped_mat_value_of_empty_builder(self):
        s, k = self.source, self.sink
        b = (
            empty()
            .transform_mat(lambda _: "NOTUSED")
            .add(s.traversal_builder, s.shape, Keep.left)
            .add(k.traversal_builder, k.shape, Keep.left)
            .wire(s.out, k.in_)
        )
        assert tmat(b).mat_value == "NOTUSED"

    @pytest.mark.parametrize(
        "c1,c2,expected",
        [
            (Keep.left, Keep.left, "TestSource"),
            (Keep.right, Keep.left, "TestFlow1"),
            (Keep.left, Keep.right, "TestSink"),
            (Keep.both, Keep.left, ("TestSource", "TestFlow1")),
            (Keep.both, Keep.both, (("TestSource", "TestFlow1"), "TestSink")),
        ],
    )
    def test_mat_value_with_flow_in_middle(self, c1, c2, expected):
        assert tmat(self._with_flow(c1, c2)).mat_value == expected

    def test_map_materialized_value(self):
        b = self._with_flow(Keep.right, Keep.left).transform_mat(lambda v: "MAPPED: " + v)
        assert tmat(b).mat_value == "MAPPED: TestFlow1"

    def test_map_materialized_value_nested(self):
        s, f1, k = self.source, self.flow1, self.sink
        flow_b = f1.traversal_builder.transform_mat(lambda v: "M1: " + v)
        b = (
            s.traversal_builder.add(flow_b, f1.shape, Keep.right)
            .add(k.traversal_builder, k.shape, Keep.left)
            .wire(s.out, f1.in_)
            .wire(f1.out, k.in_)
            .transform_mat(lambda v: "M2: " + v)
        )
        assert tmat(b).mat_value == "M2: M1: TestFlow1"

    # -- attributes and islands
    def test_attributes_for_whole_chain(self):
        b = self._source_sink(Keep.left).set_attributes(Attributes.name("test"))
        assert tmat(b).attributes_assignments == [
            (self.source, names("test", "testSource")),
            (self.sink, names("test", "testSink")),
        ]

    def test_overwrite_last_attributes_until_embedded_in_other_builder(self):
        s, k = self.source, self.sink
        inner = (
            s.traversal_builder.add(k.traversal_builder.set_attributes(Attributes.name("testSinkB")), k.shape, Keep.left)
            .wire(s.out, k.in_)
            .set_attributes(Attributes.name("test"))
            .set_attributes(Attributes.name("test2"))
        )
        b = empty().add(inner, ClosedShape, Keep.left).set_attributes(Attributes.name("outer")).set_attributes(Attributes.name("outer2"))
        assert tmat(b).attributes_assignments == [
            (s, names("outer2", "test2", "testSource")),
            (k, names("outer2", "test2", "testSinkB")),
        ]

    def test_propagate_attributes_to_embedded_flow(self):
        s, f1, k = self.source, self.flow1, self.sink
        b = (
            s.traversal_builder.add(f1.traversal_builder.set_attributes(Attributes.name("flow")), f1.shape, Keep.left)
            .add(k.traversal_builder, k.shape, Keep.left)
            .wire(s.out, f1.in_)
            .wire(f1.out, k.in_)
            .set_attributes(Attributes.name("test"))
        )
        assert tmat(b).attributes_assignments == [
            (s, names("test", "testSource")),
            (f1, names("test", "flow")),
            (k, names("test", "testSink")),
        ]

    @pytest.mark.parametrize("tags", [(TEST_ISLAND_1,), (TEST_ISLAND_1, TEST_ISLAND_2)], ids=["one", "redundant"])
    def test_track_embedded_island_and_its_attributes(self, tags):
        s, f1, k = self.source, self.flow1, self.sink
        flow_b = f1.traversal_builder
        for tag in tags:
            flow_b = flow_b.make_island(tag)
        flow_b = flow_b.set_attributes(Attributes.name("flow"))
        b = (
            s.traversal_builder.add(flow_b, f1.shape, Keep.left)
            .add(k.traversal_builder, k.shape, Keep.left)
            .wire(s.out, f1.in_)
            .wire(f1.out, k.in_)
            .set_attributes(Attributes.name("test"))
        )
        assert tmat(b).island_assignments == [
            (s, Attributes.none, TEST_DEFAULT_ISLAND),
            (f1, names("test", "flow"), TEST_ISLAND_1),
            (k, Attributes.none, TEST_DEFAULT_ISLAND),
        ]

    def test_mark_only_the_assigned_output_as_wired(self):
        s = self.source
        fan_out = TestModule("TestFanOut2", FanOutShape(Inlet("testFanOut2.in"), [Outlet("testFanOut2.out0"), Outlet("testFanOut2.out1")]))
        fan_b = atomic(fan_out, Attributes.name("testFanOut2"))
        in_, out0, out1 = fan_out.shape.inlets[0], fan_out.shape.outlets[0], fan_out.shape.outlets[1]
        sink1, sink2 = CompositeTestSink(), CompositeTestSink()
        partial = (
            s.traversal_builder.add(fan_b, fan_out.shape, Keep.left)
            .add(sink1.traversal_builder, sink1.shape, Keep.left)
            .add(sink2.traversal_builder, sink2.shape, Keep.left)
            .wire(s.out, in_)
            .wire(out0, sink1.in_)
        )
        assert not partial.is_unwired(out0)
        assert partial.is_unwired(out1)
        assert partial.unwired_outs == 1
        m = tmat(partial.wire(out1, sink2.in_))
        assert m.connections == 3
        assert m.outlets[0] is s.out and m.inlets[0] is in_
        assert m.outlets[1] is out0 and m.inlets[1] is sink1.in_
        assert m.outlets[2] is out1 and m.inlets[2] is sink2.in_

    def test_a_completed_builder_cannot_be_wired_and_an_incomplete_one_has_no_traversal(self):
        s, k = self.source, self.sink
        done = self._source_sink(Keep.left)
        assert isinstance(done, CompletedTraversalBuilder)
        with pytest.raises(TypeError):
            done.wire(s.out, k.in_)
        partial = s.traversal_builder.add(k.traversal_builder, k.shape, Keep.left)
        with pytest.raises(TypeError, match="unwired"):
            partial.traversal
        with pytest.raises(ValueError):
            partial.wire(s.out, Inlet("stranger"))


# ==================================================================================== linear builder
class TestLinearTraversalBuilder:
    source = LinearTestSource()
    sink = LinearTestSink()
    flow1 = LinearTestFlow("1")
    flow2 = LinearTestFlow("2")
    c_source = CompositeTestSource()
    c_sink = CompositeTestSink()
    c_flow1 = CompositeTestFlow("C1")
    c_flow2 = CompositeTestFlow("C2")

    def _chain3(self, m, a_out, a_in, b_out, b_in, c_out, c_in):
        """Built sink first: slot 0 is the last connection."""
        assert m.connections == 3
        assert m.outlets[2] is a_out and m.inlets[2] is a_in
        assert m.outlets[1] is b_out and m.inlets[1] is b_in
        assert m.outlets[0] is c_out and m.inlets[0] is c_in

    def test_single_source_and_sink(self):
        m = tmat(append(self.source.traversal_builder, self.sink.traversal_builder, self.sink.shape, Keep.left))
        assert m.connections == 1
        assert m.outlets[0] is self.source.out and m.inlets[0] is self.sink.in_

    def test_two_flows(self):
        s, f1, f2, k = self.source, self.flow1, self.flow2, self.sink
        b = append(append(append(s.traversal_builder, f1.traversal_builder, f1.shape, Keep.left), f2.traversal_builder, f2.shape, Keep.left), k.traversal_builder, k.shape, Keep.left)
        self._chain3(tmat(b), s.out, f1.in_, f1.out, f2.in_, f2.out, k.in_)
        # the optimistic -1 wiring was right everywhere
        assert [c.out_to_slots for c in iterate(b.traversal) if type(c) is MaterializeAtomic] == [(), (-1,), (-1,), (-1,)]

    def test_two_flows_wired_in_opposite_order(self):
        s, f1, f2, k = self.source, self.flow1, self.flow2, self.sink
        s1 = append(f2.traversal_builder, k.traversal_builder, k.shape, Keep.left)
        s2 = append(f1.traversal_builder, s1, SinkShape(f2.in_), Keep.left)
        b = append(s.traversal_builder, s2, SinkShape(f1.in_), Keep.left)
        self._chain3(tmat(b), s.out, f1.in_, f1.out, f2.in_, f2.out, k.in_)

    def test_two_flows_wired_in_an_irregular_order(self):
        s, f1, f2, k = self.source, self.flow1, self.flow2, self.sink
        source2 = append(s.traversal_builder, f1.traversal_builder, f1.shape, Keep.left)
        sink2 = append(f2.traversal_builder, k.traversal_builder, k.shape, Keep.left)
        b = append(source2, sink2, SinkShape(f2.in_), Keep.left)
        self._chain3(tmat(b), s.out, f1.in_, f1.out, f2.in_, f2.out, k.in_)

    def test_flow_appended_to_its_imported_self(self):
        s, f1, k = self.source, self.flow1, self.sink
        b = s.traversal_builder
        for _ in range(2):
            b = append(b, f1.traversal_builder, f1.shape, Keep.left)
        b = append(b, k.traversal_builder, k.shape, Keep.left)
        self._chain3(tmat(b), s.out, f1.in_, f1.out, f1.in_, f1.out, k.in_)

    def test_nested_flow_chain(self):
        s, f1, f2, k = self.source, self.flow1, self.flow2, self.sink
        nested = append(f1.traversal_builder, f2.traversal_builder, f2.shape, Keep.left)
        b = append(append(s.traversal_builder, nested, FlowShape(f1.in_, f2.out), Keep.left), k.traversal_builder, k.shape, Keep.left)
        self._chain3(tmat(b), s.out, f1.in_, f1.out, f2.in_, f2.out, k.in_)

    def test_nested_flow_chain_used_twice(self):
        s, f1, f2, k = self.source, self.flow1, self.flow2, self.sink
        nested = append(f1.traversal_builder, f2.traversal_builder, f2.shape, Keep.left)
        b = s.traversal_builder
        for _ in range(2):
            b = append(b, nested, FlowShape(f1.in_, f2.out), Keep.left)
        m = tmat(append(b, k.traversal_builder, k.shape, Keep.left))
        assert m.connections == 5
        expected = [(f2.out, k.in_), (f1.out, f2.in_), (f2.out, f1.in_), (f1.out, f2.in_), (s.out, f1.in_)]
        assert all(m.outlets[i] is o and m.inlets[i] is n for i, (o, n) in enumerate(expected))

    def test_flow_wired_to_self(self):
        f1 = self.flow1
        m = tmat(f1.traversal_builder.wire(f1.out, f1.in_))
        assert m.connections == 1
        assert m.outlets[0] is f1.out and m.inlets[0] is f1.in_

    def test_two_flows_wired_back_to_self(self):
        f1, f2 = self.flow1, self.flow2
        b = append(f1.traversal_builder, f2.traversal_builder, f2.shape, Keep.left).wire(f2.out, f1.in_)
        m = tmat(b)
        assert m.connections == 2
        assert m.outlets[0] is f1.out and m.inlets[0] is f2.in_
        assert m.outlets[1] is f2.out and m.inlets[1] is f1.in_
        # the optimistic -1 of flow2 had to be rewired forward to flow1's inlet
        assert [c.out_to_slots for c in iterate(b.traversal) if type(c) is MaterializeAtomic] == [(1,), (-1,)]

    def test_flow_appended_to_self_then_wired_back_to_self(self):
        f1 = self.flow1
        b = append(f1.traversal_builder, f1.traversal_builder, f1.shape, Keep.left).wire(f1.out, f1.in_)
        m = tmat(b)
        assert m.connections == 2
        assert m.outlets[0] is f1.out and m.inlets[0] is f1.in_
        assert m.outlets[1] is f1.out and m.inlets[1] is f1.in_

    def test_used_with_a_composite_source(self):
        cs, k = self.c_source, self.sink
        b = cs.traversal_builder.add(k.traversal_builder, k.shape, Keep.left).wire(cs.out, k.in_)
        m = tmat(b)
        assert m.connections == 1
        assert m.outlets[0] is cs.out and m.inlets[0] is k.in_

    def test_used_with_a_composite_sink(self):
        ck, s = self.c_sink, self.source
        b = ck.traversal_builder.add(s.traversal_builder, s.shape, Keep.left).wire(s.out, ck.in_)
        m = tmat(b)
        assert m.connections == 1
        assert m.outlets[0] is s.out and m.inlets[0] is ck.in_

    def test_joined_with_a_composite_flow(self):
        cf1, f1, f2 = self.c_flow1, self.flow1, self.flow2
        embedded = append(f1.traversal_builder, f2.traversal_builder, f2.shape, Keep.left)
        b = cf1.traversal_builder.add(embedded, FlowShape(f1.in_, f2.out), Keep.left).wire(cf1.out, f1.in_).wire(f2.out, cf1.in_)
        self._chain3(tmat(b), cf1.out, f1.in_, f1.out, f2.in_, f2.out, cf1.in_)

    def test_linear_flow_with_composite_source_and_sink(self):
        cs, ck, f1 = self.c_source, self.c_sink, self.flow1
        b = (
            cs.traversal_builder.add(ck.traversal_builder, ck.shape, Keep.left)
            .add(f1.traversal_builder, f1.shape, Keep.left)
            .wire(cs.out, f1.in_)
            .wire(f1.out, ck.in_)
        )
        m = tmat(b)
        assert m.connections == 2
        assert m.outlets[0] is f1.out and m.inlets[0] is ck.in_
        assert m.outlets[1] is cs.out and m.inlets[1] is f1.in_

    def test_flow_added_to_an_empty_composite_and_joined_to_itself(self):
        f1 = self.flow1
        b = empty().add(f1.traversal_builder, f1.shape, Keep.left).wire(f1.out, f1.in_)
        m = tmat(b)
        assert m.connections == 1
        assert m.outlets[0] is f1.out and m.inlets[0] is f1.in_

    def test_embed_a_composite_sink(self):
        s, ck = self.source, self.c_sink
        m = tmat(append(s.traversal_builder, ck.traversal_builder, ck.shape, Keep.left))
        assert m.connections == 1
        assert m.outlets[0] is s.out and m.inlets[0] is ck.in_

    def test_embed_a_composite_flow(self):
        s, cf1, k = self.source, self.c_flow1, self.sink
        b = append(append(s.traversal_builder, cf1.traversal_builder, cf1.shape, Keep.left), k.traversal_builder, k.shape, Keep.left)
        m = tmat(b)
        assert m.connections == 2
        assert m.outlets[1] is s.out and m.inlets[1] is cf1.in_
        assert m.outlets[0] is cf1.out and m.inlets[0] is k.in_

    def test_embed_a_composite_sink_with_an_irregular_wiring(self):
        s, cf1, cf2, ck = self.source, self.c_flow1, self.c_flow2, self.c_sink
        sink_b = (
            empty()
            .add(cf2.traversal_builder, cf2.shape, Keep.left)
            .add(ck.traversal_builder, ck.shape, Keep.left)
            .add(cf1.traversal_builder, cf1.shape, Keep.left)
            .wire(cf2.out, ck.in_)
            .wire(cf1.out, cf2.in_)
        )
        b = append(s.traversal_builder, sink_b, SinkShape(cf1.in_), Keep.left)
        m = tmat(b)
        assert m.connections == 3
        assert m.outlets[2] is s.out and m.inlets[2] is cf1.in_
        assert m.outlets[1] is cf2.out and m.inlets[1] is ck.in_
        assert m.outlets[0] is cf1.out and m.inlets[0] is cf2.in_
        # the composite's open inlet is not its last slot: the source's -1 guess was rewired
        source_atom = [c for c in iterate(b.traversal) if type(c) is MaterializeAtomic][-1]
        assert source_atom.module is s and source_atom.out_to_slots == (-1,)

    def test_embed_a_composite_flow_multiple_times(self):
        s, cf1, k = self.source, self.c_flow1, self.sink
        b = s.traversal_builder
        for _ in range(2):
            b = append(b, cf1.traversal_builder, cf1.shape, Keep.left)
        b = append(b, k.traversal_builder, k.shape, Keep.left)
        self._chain3(tmat(b), s.out, cf1.in_, cf1.out, cf1.in_, cf1.out, k.in_)

    def test_embed_a_composite_flow_multiple_times_alternating_with_linear_flow(self):
        s, cf1, f1, k = self.source, self.c_flow1, self.flow1, self.sink
        b = s.traversal_builder
        for part in (cf1, f1, cf1, f1):
            b = append(b, part.traversal_builder, part.shape, Keep.left)
        m = tmat(append(b, k.traversal_builder, k.shape, Keep.left))
        assert m.connections == 5
        expected = [(f1.out, k.in_), (cf1.out, f1.in_), (f1.out, cf1.in_), (cf1.out, f1.in_), (s.out, cf1.in_)]
        assert all(m.outlets[i] is o and m.inlets[i] is n for i, (o, n) in enumerate(expected))

    def test_embed_a_composite_flow_whose_inlet_is_on_its_second_module(self):
        s, cf1, cf2, f1, k = self.source, self.c_flow1, self.c_flow2, self.flow1, self.sink
        composite = (
            cf2.traversal_builder.add(cf1.traversal_builder, cf1.shape, Keep.left)
            .add(f1.traversal_builder, f1.shape, Keep.left)
            .wire(cf1.out, cf2.in_)
            .wire(cf2.out, f1.in_)
        )
        shape = FlowShape(cf1.in_, f1.out)
        embedded = append(LinearTraversalBuilder.empty(), composite, shape, Keep.left)
        b = append(append(s.traversal_builder, embedded, shape, Keep.left), k.traversal_builder, k.shape, Keep.left)
        m = tmat(b)
        assert m.connections == 4
        expected = [(f1.out, k.in_), (cf1.out, cf2.in_), (s.out, cf1.in_), (cf2.out, f1.in_)]
        assert all(m.outlets[i] is o and m.inlets[i] is n for i, (o, n) in enumerate(expected))
        # the source's optimistic -1 was rewired to the composite's inlet, one slot further back
        source_atom = [c for c in iterate(b.traversal) if type(c) is MaterializeAtomic][-1]
        assert source_atom.module is s and source_atom.out_to_slots == (-2,)

    def test_empty_builder(self):
        m = tmat(LinearTraversalBuilder.empty())
        assert m.connections == 0 and m.outlets == [] and m.inlets == []
        assert m.mat_value is NotUsed

    # -- materialized values
    def _sk(self, combine):
        return append(self.source.traversal_builder, self.sink.traversal_builder, self.sink.shape, combine)

    def _sfk(self, c1, c2, flow=None):
        f = flow or self.flow1
        return append(append(self.source.traversal_builder, f.traversal_builder, f.shape, c1), self.sink.traversal_builder, self.sink.shape, c2)

    @pytest.mark.parametrize(
        "combine,expected",
        [(Keep.left, "TestSource"), (Keep.right, "TestSink"), (Keep.both, ("TestSource", "TestSink")), (Keep.none, NotUsed)],
        ids=["left", "right", "both", "none"],
    )
    def test_mat_value_source_sink(self, combine, expected):
        assert tmat(self._sk(combine)).mat_value == expected

    def test_keep_mapped_mat_value_of_empty_builder(self):
        s, k = self.source, self.sink
        b = append(
            append(LinearTraversalBuilder.empty().transform_mat(lambda _: "NOTUSED"), s.traversal_builder, s.shape, Keep.left),
            k.traversal_builder,
            k.shape,
            Keep.left,
        )
        assert tmat(b).mat_value == "NOTUSED"

    @pytest.mark.parametrize(
        "c1,c2,expected",
        [
            (Keep.left, Keep.left, "TestSource"),
            (Keep.right, Keep.left, "TestFlow1"),
            (Keep.left, Keep.right, "TestSink"),
            (Keep.both, Keep.left, ("TestSource", "TestFlow1")),
            (Keep.both, Keep.both, (("TestSource", "TestFlow1"), "TestSink")),
            (Keep.none, Keep.left, NotUsed),
        ],
    )
    def test_mat_value_with_flow_in_middle(self, c1, c2, expected):
        assert tmat(self._sfk(c1, c2)).mat_value == expected

    def test_mat_value_keep_right_with_composite_flow_in_middle(self):
        assert tmat(self._sfk(Keep.right, Keep.left, self.c_flow1)).mat_value == "TestFlowC1"

    def test_mat_value_keep_right_with_composite_source_as_start(self):
        cs, f1, k = self.c_source, self.flow1, self.sink
        b = append(LinearTraversalBuilder.empty(), cs.traversal_builder, cs.shape, Keep.right)
        b = append(append(b, f1.traversal_builder, f1.shape, Keep.left), k.traversal_builder, k.shape, Keep.left)
        assert tmat(b).mat_value == "TestSource"

    def test_mat_value_keep_right_with_composite_sink_as_end(self):
        s, f1, ck = self.source, self.flow1, self.c_sink
        b = append(append(s.traversal_builder, f1.traversal_builder, f1.shape, Keep.left), ck.traversal_builder, ck.shape, Keep.right)
        assert tmat(b).mat_value == "TestSink"

    def test_mat_value_keep_both_all_composite(self):
        cs, cf1, ck = self.c_source, self.c_flow1, self.c_sink
        b = LinearTraversalBuilder.empty()
        for part in (cs, cf1, ck):
            b = append(b, part.traversal_builder, part.shape, Keep.both)
        assert tmat(b).mat_value == (((NotUsed, "TestSource"), "TestFlowC1"), "TestSink")

    def test_map_materialized_value(self):
        b = self._sfk(Keep.right, Keep.left).transform_mat(lambda v: "MAPPED: " + v)
        assert tmat(b).mat_value == "MAPPED: TestFlow1"

    def test_map_materialized_value_nested(self):
        s, f1, k = self.source, self.flow1, self.sink
        flow_b = f1.traversal_builder.transform_mat(lambda v: "M1: " + v)
        b = append(append(s.traversal_builder, flow_b, f1.shape, Keep.right), k.traversal_builder, k.shape, Keep.left)
        assert tmat(b.transform_mat(lambda v: "M2: " + v)).mat_value == "M2: M1: TestFlow1"

    # -- attributes
    def test_attributes_for_whole_chain(self):
        b = self._sk(Keep.left).set_attributes(Attributes.name("test"))
        assert tmat(b).attributes_assignments == [
            (self.sink, names("test", "testSink")),
            (self.source, names("test", "testSource")),
        ]

    def test_accumulate_attributes_in_chain(self):
        s, k = self.source, self.sink
        b = append(s.traversal_builder.set_attributes(Attributes.name("source")), k.traversal_builder, k.shape, Keep.left)
        b = b.set_attributes(Attributes.name("test"))
        assert tmat(b).attributes_assignments == [(k, names("test", "testSink")), (s, names("test", "source"))]

    def test_overwrite_last_attributes_until_a_new_module_is_added(self):
        s, k = self.source, self.sink
        b = s.traversal_builder.set_attributes(Attributes.name("source")).set_attributes(Attributes.name("source2"))
        b = append(b, k.traversal_builder, k.shape, Keep.left)
        b = b.set_attributes(Attributes.name("test")).set_attributes(Attributes.name("test2"))
        assert tmat(b).attributes_assignments == [(k, names("test2", "testSink")), (s, names("test2", "source2"))]

    def test_propagate_attributes_to_embedded_linear_sink_and_source(self):
        s, k = self.source, self.sink
        b = append(
            s.traversal_builder.set_attributes(Attributes.name("source")),
            k.traversal_builder.set_attributes(Attributes.name("sink")),
            k.shape,
            Keep.left,
        ).set_attributes(Attributes.name("test"))
        assert tmat(b).attributes_assignments == [(k, names("test", "sink")), (s, names("test", "source"))]

    def test_propagate_attributes_to_embedded_linear_flow(self):
        s, f1, k = self.source, self.flow1, self.sink
        b = append(
            s.traversal_builder.set_attributes(Attributes.name("source")),
            f1.traversal_builder.set_attributes(Attributes.name("flow")),
            f1.shape,
            Keep.left,
        ).set_attributes(Attributes.name("compositeSource"))
        b = append(b, k.traversal_builder.set_attributes(Attributes.name("sink")), k.shape, Keep.left)
        b = b.set_attributes(Attributes.name("test"))
        assert tmat(b).attributes_assignments == [
            (k, names("test", "sink")),
            (f1, names("test", "compositeSource", "flow")),
            (s, names("test", "compositeSource", "source")),
        ]

    def test_propagate_attributes_to_embedded_composite_sink(self):
        s, f1, ck = self.source, self.flow1, self.c_sink
        b = append(
            s.traversal_builder.set_attributes(Attributes.name("source")),
            f1.traversal_builder.set_attributes(Attributes.name("flow")),
            f1.shape,
            Keep.left,
        )
        b = append(b, ck.traversal_builder.set_attributes(Attributes.name("sink")), ck.shape, Keep.left)
        b = b.set_attributes(Attributes.name("test"))
        assert tmat(b).attributes_assignments == [
            (ck, names("test", "sink")),
            (f1, names("test", "flow")),
            (s, names("test", "source")),
        ]

    def test_propagate_attributes_to_embedded_composite_source(self):
        cs, f1, k = self.c_source, self.flow1, self.sink
        b = append(LinearTraversalBuilder.empty(), cs.traversal_builder.set_attributes(Attributes.name("source")), cs.shape, Keep.left)
        b = b.set_attributes(Attributes.name("source-outer"))
        b = append(b, f1.traversal_builder.set_attributes(Attributes.name("flow")), f1.shape, Keep.left)
        b = append(b, k.traversal_builder.set_attributes(Attributes.name("sink")), k.shape, Keep.left)
        b = b.set_attributes(Attributes.name("test"))
        assert tmat(b).attributes_assignments == [
            (k, names("test", "sink")),
            (f1, names("test", "flow")),
            (cs, names("test", "source-outer", "source")),
        ]

    def test_propagate_attributes_to_embedded_composite_flow(self):
        s, cf1, k = self.source, self.c_flow1, self.sink
        b = append(
            s.traversal_builder.set_attributes(Attributes.name("source")),
            cf1.traversal_builder.set_attributes(Attributes.name("flow")),
            cf1.shape,
            Keep.left,
        )
        b = append(b, k.traversal_builder.set_attributes(Attributes.name("sink")), k.shape, Keep.left)
        b = b.set_attributes(Attributes.name("test"))
        assert tmat(b).attributes_assignments == [
            (k, names("test", "sink")),
            (cf1, names("test", "flow")),
            (s, names("test", "source")),
        ]

    def test_most_specific_attribute_wins(self):
        s, f1, k = self.source, self.flow1, self.sink
        b = append(s.traversal_builder, f1.traversal_builder.set_attributes(Attributes.name("inner")), f1.shape, Keep.left)
        b = append(b, k.traversal_builder, k.shape, Keep.left).set_attributes(Attributes.name("outer"))
        seen = dict((m, a) for m, a in tmat(b).attributes_assignments)
        assert seen[f1].name_or_default() == "inner"
        assert seen[s].name_or_default() == "testSource"
        assert seen[s].name_lifted() == "outer-testSource"

    # -- appending to the empty builder
    def test_append_source_sink_flow_to_empty_linear(self):
        s, f1, k = self.source, self.flow1, self.sink
        b = append(append(LinearTraversalBuilder.empty(), s.traversal_builder, s.shape, Keep.right), k.traversal_builder, k.shape, Keep.right)
        m = tmat(b)
        assert m.connections == 1 and m.outlets[0] is s.out and m.inlets[0] is k.in_

        nested_sink = append(LinearTraversalBuilder.empty(), k.traversal_builder, k.shape, Keep.right)
        m = tmat(append(s.traversal_builder, nested_sink, k.shape, Keep.right))
        assert m.connections == 1 and m.outlets[0] is s.out and m.inlets[0] is k.in_

        nested_flow = append(LinearTraversalBuilder.empty(), f1.traversal_builder, f1.shape, Keep.right)
        b = append(append(s.traversal_builder, nested_flow, f1.shape, Keep.right), k.traversal_builder, k.shape, Keep.right)
        m = tmat(b)
        assert m.connections == 2
        assert m.outlets[1] is s.out and m.inlets[1] is f1.in_
        assert m.outlets[0] is f1.out and m.inlets[0] is k.in_

    def test_append_composites_to_empty_linear(self):
        s, cs, cf1, ck, k = self.source, self.c_source, self.c_flow1, self.c_sink, self.sink
        b = append(append(LinearTraversalBuilder.empty(), cs.traversal_builder, cs.shape, Keep.right), k.traversal_builder, k.shape, Keep.right)
        m = tmat(b)
        assert m.connections == 1 and m.outlets[0] is cs.out and m.inlets[0] is k.in_

        nested_sink = append(LinearTraversalBuilder.empty(), ck.traversal_builder, ck.shape, Keep.right)
        m = tmat(append(s.traversal_builder, nested_sink, ck.shape, Keep.right))
        assert m.connections == 1 and m.outlets[0] is s.out and m.inlets[0] is ck.in_

        nested_flow = append(LinearTraversalBuilder.empty(), cf1.traversal_builder, cf1.shape, Keep.right)
        b = append(append(s.traversal_builder, nested_flow, cf1.shape, Keep.right), k.traversal_builder, k.shape, Keep.right)
        m = tmat(b)
        assert m.connections == 2
        assert m.outlets[1] is s.out and m.inlets[1] is cf1.in_
        assert m.outlets[0] is cf1.out and m.inlets[0] is k.in_

    # -- islands
    def test_nest_islands_and_attributes(self):
        s, f1, f2, k = self.source, self.flow1, self.flow2, self.sink
        b = s.traversal_builder.set_attributes(Attributes.name("island1")).make_island(TEST_ISLAND_1)
        b = b.append(f1.traversal_builder, Keep.left).make_island(TEST_ISLAND_2).set_attributes(Attributes.name("island2"))
        b = b.append(f2.traversal_builder, Keep.left).append(k.traversal_builder, Keep.left)
        assert tmat(b).island_assignments == [
            (k, Attributes.none, TEST_DEFAULT_ISLAND),
            (f2, Attributes.none, TEST_DEFAULT_ISLAND),
            (f1, names("island2"), TEST_ISLAND_2),
            (s, names("island2", "island1"), TEST_ISLAND_1),
        ]

    def _nested_flow(self):
        f1, f2 = self.flow1, self.flow2
        return f1.traversal_builder.append(f2.traversal_builder, Keep.left).set_attributes(Attributes.name("nestedFlow")).make_island(TEST_ISLAND_1)

    def test_nest_flow_with_islands(self):
        s, f1, f2, k = self.source, self.flow1, self.flow2, self.sink
        b = s.traversal_builder.set_attributes(Attributes.name("source")).append(self._nested_flow(), Keep.left)
        b = b.append(k.traversal_builder, Keep.left).set_attributes(Attributes.name("wholeThing"))
        assert tmat(b).island_assignments == [
            (k, Attributes.none, TEST_DEFAULT_ISLAND),
            (f2, names("wholeThing", "nestedFlow"), TEST_ISLAND_1),
            (f1, names("wholeThing", "nestedFlow"), TEST_ISLAND_1),
            (s, Attributes.none, TEST_DEFAULT_ISLAND),
        ]

    def test_nest_flow_with_island_inside_another_island(self):
        s, f1, f2, k = self.source, self.flow1, self.flow2, self.sink
        b = s.traversal_builder.set_attributes(Attributes.name("source")).append(self._nested_flow(), Keep.left).make_island(TEST_ISLAND_2)
        b = b.append(k.traversal_builder, Keep.left).set_attributes(Attributes.name("wholeThing"))
        assert tmat(b).island_assignments == [
            (k, Attributes.none, TEST_DEFAULT_ISLAND),
            (f2, names("wholeThing", "nestedFlow"), TEST_ISLAND_1),
            (f1, names("wholeThing", "nestedFlow"), TEST_ISLAND_1),
            (s, names("wholeThing"), TEST_ISLAND_2),
        ]

    def test_nest_flow_with_islands_from_linear_enclosing_a_composite(self):
        s, cf1, f2, k = self.source, self.c_flow1, self.flow2, self.sink
        nested = f2.traversal_builder.set_attributes(Attributes.name("nestedFlow")).make_island(TEST_ISLAND_1)
        b = append(s.traversal_builder, cf1.traversal_builder, cf1.shape, Keep.left).make_island(TEST_ISLAND_2)
        b = b.append(nested, Keep.left).append(k.traversal_builder, Keep.left).set_attributes(Attributes.name("wholeThing"))
        assert tmat(b).island_assignments == [
            (k, Attributes.none, TEST_DEFAULT_ISLAND),
            (f2, names("wholeThing", "nestedFlow"), TEST_ISLAND_1),
            (cf1, names("wholeThing"), TEST_ISLAND_2),
            (s, names("wholeThing"), TEST_ISLAND_2),
        ]

    def test_nest_flow_containing_composite_with_islands(self):
        s, f1, cf2, k = self.source, self.flow1, self.c_flow2, self.sink
        nested = append(f1.traversal_builder, cf2.traversal_builder, cf2.shape, Keep.left)
        nested = nested.set_attributes(Attributes.name("nestedFlow")).make_island(TEST_ISLAND_1)
        b = s.traversal_builder.append(nested, Keep.left).append(k.traversal_builder, Keep.left).set_attributes(Attributes.name("wholeThing"))
        assert tmat(b).island_assignments == [
            (k, Attributes.none, TEST_DEFAULT_ISLAND),
            (cf2, names("wholeThing", "nestedFlow"), TEST_ISLAND_1),
            (f1, names("wholeThing", "nestedFlow"), TEST_ISLAND_1),
            (s, Attributes.none, TEST_DEFAULT_ISLAND),
        ]

    def test_redundant_island_is_ignored(self):
        s = self.source
        b = s.traversal_builder.make_island(TEST_ISLAND_1).make_island(TEST_ISLAND_2)
        b = b.append(self.sink.traversal_builder, Keep.left)
        assert [(m, tag) for m, _, tag in tmat(b).island_assignments] == [(self.sink, TEST_DEFAULT_ISLAND), (s, TEST_ISLAND_1)]

    def test_async_attribute_makes_an_island(self):
        s, k = self.source, self.sink
        b = append(s.traversal_builder.set_attributes(Attributes.async_boundary()), k.traversal_builder, k.shape, Keep.left)
        tags = [(m, tag.name) for m, _, tag in tmat(b).island_assignments]
        assert tags == [(k, "TestDefaultIsland"), (s, "GraphStage")]

    # -- errors
    def test_misuse_is_refused(self):
        s, k, f1 = self.source, self.sink, self.flow1
        with pytest.raises(ValueError):
            s.traversal_builder.append(s.traversal_builder, Keep.left)  # a source has no inlet
        done = s.traversal_builder.append(k.traversal_builder, Keep.left)
        with pytest.raises(ValueError):
            done.append(f1.traversal_builder, Keep.left)  # nothing left to append to
        with pytest.raises(ValueError):
            f1.traversal_builder.wire(f1.out, Inlet("stranger"))
        with pytest.raises(ValueError):
            LinearTraversalBuilder.from_module(TestModule("fan", FanOutShape(Inlet("i"), [Outlet("a"), Outlet("b")])), Attributes.none)


# ==================================================================================== the Traversal itself
def test_concat_normalization():
    a = MaterializeAtomic(object(), ())
    assert normalize_concat(PushNotUsed, Pop) is EmptyTraversal
    assert PushNotUsed.concat(Pop.concat(a)) is a
    assert EmptyTraversal.concat(a) is a and a.concat(EmptyTraversal) is a
    # left-nested concats are rotated, so the tree stays flat on the left
    t = a.concat(a).concat(a)
    assert type(t) is Concat and type(t.first) is MaterializeAtomic
    assert list(iterate(t)) == [a, a, a]


def test_rewire_first_to_touches_only_the_first_atom():
    m1, m2 = object(), object()
    t = PushNotUsed.concat(MaterializeAtomic(m1, (-1,))).concat(MaterializeAtomic(m2, (-1,)))
    r = t.rewire_first_to(3)
    atoms = [c for c in iterate(r) if type(c) is MaterializeAtomic]
    assert [(c.module, c.out_to_slots) for c in atoms] == [(m1, (3,)), (m2, (-1,))]
    assert PushNotUsed.rewire_first_to(1) is None


def test_debug_printers():
    s, f1, k = LinearTestSource(), LinearTestFlow("1"), LinearTestSink()
    b = append(append(s.traversal_builder, f1.traversal_builder, f1.shape, Keep.left), k.traversal_builder, k.shape, Keep.left)
    wiring = wiring_lines(b.traversal)
    assert wiring == [
        "TestSink.testSink.in (in)  = slot 0",
        "TestFlow1.testFlow1.in (in)  = slot 1",
        "TestFlow1.testFlow1.out (out) -> slot 0",
        "TestSource.testSource.out (out) -> slot 1",
    ]
    lines = traversal_lines(b.set_attributes(Attributes.name("x")).traversal)
    assert lines[0].startswith("PushAttributes") and lines[-1] == "PopAttributes"
    assert "    MaterializeAtomic(TestFlow1, [-1])" in lines  # nested in two attribute scopes
