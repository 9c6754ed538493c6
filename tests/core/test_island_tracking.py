"""Island tracking in the phased materializer: global slots become island-local slots, nested islands
punch holes into their parents, and wires become local assignments or publisher/subscriber pairs
(the IslandTracking part of Pekko's PhasedFusingActorMaterializer; wiring cases of TraversalBuilderSpec
run through the real materializer with a recording phase, like Pekko's TraversalTestUtils)."""
from __future__ import annotations

import pytest

from atoll import Flow, Keep, RunnableGraph, Sink, Source
from atoll.materializer.composite_builder import CompositeTraversalBuilder
from atoll.materializer.island_tracking import IslandTracking
from atoll.materializer.traversal import EnterIsland, ExitIsland, IslandTag, MaterializeAtomic, Pop, PopAttributes, PushAttributes
from atoll.stage.attributes import Attributes
from atoll.stage.ports import Inlet, Outlet
from atoll.stage.shapes import FlowShape, SinkShape, SourceShape

from traversal_kit import (
    CompositeTestSink,
    CompositeTestSource,
    LinearTestFlow,
    LinearTestSink,
    LinearTestSource,
    RecordingPhase,
    TestModule,
    append,
    concat,
    record_materialize,
)

T1, T2 = IslandTag("T1"), IslandTag("T2")


def src(name):
    return TestModule(name, SourceShape(Outlet(f"{name}.out")))


def flow(name):
    return TestModule(name, FlowShape(Inlet(f"{name}.in"), Outlet(f"{name}.out")))


def sink(name):
    return TestModule(name, SinkShape(Inlet(f"{name}.in")))


def atom(module, *slots):
    """Materialize ``module``; ``slots`` are its outputs' slots relative to its first input slot."""
    return MaterializeAtomic(module, slots)


def keep_last(*commands):
    """Pop every atom's value but the last one, so the value stack ends with one value."""
    out = []
    atoms = [c for c in commands if type(c) is MaterializeAtomic]
    for c in commands:
        out.append(c)
        if type(c) is MaterializeAtomic and c is not atoms[-1]:
            out.append(Pop)
    return concat(*out)


def assigns(rec, phase_name):
    return [(c[2], c[3]) for c in rec.of("assign_port") if c[1] == phase_name]


# ------------------------------------------------------------------------------ one island
def test_single_island_wires_locally_and_allocates_no_island_bookkeeping():
    calls = []
    tracking = IslandTracking(lambda tag, attrs, i: RecordingPhase(tag, attrs, i, calls), Attributes.none)
    s, f, k = src("s"), flow("f"), sink("k")
    # sink at slot 0, flow at slot 1 wired back to 0, source wired back to 1 (the linear layout)
    tracking.wire_in(k.shape.inlets[0], k)
    tracking.wire_in(f.shape.inlets[0], f)
    tracking.wire_out(f.shape.outlets[0], 0, f)
    tracking.wire_out(s.shape.outlets[0], 1, s)
    tracking.check_done()
    assert [(c[0], c[2], c[3]) for c in calls] == [
        ("assign_port", k.shape.inlets[0], 0),
        ("assign_port", f.shape.inlets[0], 1),
        ("assign_port", f.shape.outlets[0], 0),
        ("assign_port", s.shape.outlets[0], 1),
    ]
    assert tracking._segments is None and tracking._stack is None and tracking._forward_keys is None
    assert len(tracking.phases) == 1


def test_linear_chain_without_islands():
    s, f1, k = LinearTestSource(), LinearTestFlow("1"), LinearTestSink()
    b = append(append(s.traversal_builder, f1.traversal_builder, f1.shape, Keep.left), k.traversal_builder, k.shape, Keep.left)
    rec = record_materialize(b)
    assert len(rec.phases) == 1
    assert rec.phase(0).wires() == {0: (f1.out, k.in_), 1: (s.out, f1.in_)}
    assert rec.of("create_publisher") == [] and rec.of("take_publisher") == []
    assert rec.mat_value == "TestSource"
    assert rec.of("on_island_ready") == [("on_island_ready", "island-0")]


# ------------------------------------------------------------------------------ backward wires
def test_backward_cross_island_wire_from_an_upstream_island():
    s, f1, k = LinearTestSource(), LinearTestFlow("1"), LinearTestSink()
    b = append(s.traversal_builder.make_island(T1), f1.traversal_builder, f1.shape, Keep.left)
    b = append(b, k.traversal_builder, k.shape, Keep.left)
    rec = record_materialize(b)
    assert [p.tag for p in rec.phases] == [None, T1]
    assert rec.phase(0).wires() == {0: (f1.out, k.in_), 1: (None, f1.in_)}
    assert rec.phase(1).wires() == {}
    assert rec.cross_island() == [("island-1", s.out, "island-0", 1)]


def test_island_in_the_middle_takes_from_and_publishes_to_its_parent():
    s, f1, k = LinearTestSource(), LinearTestFlow("1"), LinearTestSink()
    b = append(s.traversal_builder, f1.traversal_builder.make_island(T1), f1.shape, Keep.left)
    b = append(b, k.traversal_builder, k.shape, Keep.left)
    rec = record_materialize(b)
    # sink: global 0 (island-0 local 0); flow: global 1 (island-1 local 0)
    assert assigns(rec, "island-0") == [(k.in_, 0)]
    assert assigns(rec, "island-1") == [(f1.in_, 0)]
    assert rec.cross_island() == [("island-1", f1.out, "island-0", 0), ("island-0", s.out, "island-1", 0)]


def test_nested_island_punches_a_hole_into_its_parent():
    x, y, z, v, u = sink("x"), sink("y"), flow("z"), src("v"), src("u")
    t = keep_last(
        atom(x),  # global 0 -> island-0 local 0
        EnterIsland(T1),
        atom(y),  # global 1 -> island-1 local 0
        ExitIsland,
        atom(z, -1),  # global 2 -> island-0 local 1 (one slot skipped); out -> global 1 (in T1)
        atom(v, -3),  # out -> global 0: an earlier segment of the same island
        atom(u, -1),  # out -> global 2: same segment
    )
    rec = record_materialize(t)
    assert assigns(rec, "island-0") == [
        (x.shape.inlets[0], 0),
        (z.shape.inlets[0], 1),
        (v.shape.outlets[0], 0),
        (u.shape.outlets[0], 1),
    ]
    assert assigns(rec, "island-1") == [(y.shape.inlets[0], 0)]
    assert rec.cross_island() == [("island-0", z.shape.outlets[0], "island-1", 0)]


def test_two_levels_of_nesting_keep_each_islands_slots_contiguous():
    a, b, c, d, e = sink("a"), sink("b"), sink("c"), sink("d"), sink("e")
    w = src("w")  # in T1, after T2: feeds b across T2's hole
    feeders = {m.name: src(f"to-{m.name}") for m in (a, c, d, e)}
    t = keep_last(
        atom(a),  # g0: island-0 local 0
        EnterIsland(T1),
        atom(b),  # g1: T1 local 0
        EnterIsland(T2),
        atom(c),  # g2: T2 local 0
        ExitIsland,
        atom(d),  # g3: T1 local 1 (T2's slot skipped)
        atom(w, -3),  # at offset 4, out -> g1: an earlier segment of T1
        ExitIsland,
        atom(e),  # g4: island-0 local 1 (three slots skipped)
        # feeders in island-0 at offset 5, wired back to a (g0), c (g2), d (g3), e (g4)
        *[atom(feeders[n], g - 5) for n, g in (("a", 0), ("c", 2), ("d", 3), ("e", 4))],
    )
    rec = record_materialize(t)
    assert [p.tag for p in rec.phases] == [None, T1, T2]
    assert rec.phase(1).wires() == {0: (w.shape.outlets[0], b.shape.inlets[0]), 1: (None, d.shape.inlets[0])}
    assert rec.phase(2).wires() == {0: (None, c.shape.inlets[0])}
    assert rec.phase(0).wires() == {
        0: (feeders["a"].shape.outlets[0], a.shape.inlets[0]),
        1: (feeders["e"].shape.outlets[0], e.shape.inlets[0]),
    }
    assert rec.cross_island() == [
        ("island-0", feeders["c"].shape.outlets[0], "island-2", 0),
        ("island-0", feeders["d"].shape.outlets[0], "island-1", 1),
    ]


# ------------------------------------------------------------------------------ forward wires
def test_forward_wire_in_the_same_island_is_resolved_when_its_target_is_visited():
    s, k = CompositeTestSource(), CompositeTestSink()
    b = CompositeTraversalBuilder().add(s.traversal_builder, s.shape, Keep.left).add(k.traversal_builder, k.shape, Keep.right).wire(s.out, k.in_)
    rec = record_materialize(b)
    # the source comes first in the traversal, so its outlet is wired before the inlet exists
    assert [(c[2], c[3]) for c in rec.of("assign_port")] == [(k.in_, 0), (s.out, 0)]
    assert rec.mat_value == "TestSink"


def test_forward_wire_out_of_an_island():
    s, k = CompositeTestSource(), CompositeTestSink()
    b = (
        CompositeTraversalBuilder()
        .add(s.traversal_builder.make_island(T1), s.shape, Keep.left)
        .add(k.traversal_builder, k.shape, Keep.left)
        .wire(s.out, k.in_)
    )
    rec = record_materialize(b)
    assert assigns(rec, "island-0") == [(k.in_, 0)]
    assert rec.cross_island() == [("island-1", s.out, "island-0", 0)]


def test_forward_wire_into_an_island():
    s, k = CompositeTestSource(), CompositeTestSink()
    b = (
        CompositeTraversalBuilder()
        .add(s.traversal_builder, s.shape, Keep.left)
        .add(k.traversal_builder.make_island(T1), k.shape, Keep.left)
        .wire(s.out, k.in_)
    )
    rec = record_materialize(b)
    assert assigns(rec, "island-1") == [(k.in_, 0)]
    assert rec.cross_island() == [("island-0", s.out, "island-1", 0)]


def test_several_forward_wires_resolve_in_slot_order():
    s1, s2, k1, k2 = src("s1"), src("s2"), sink("k1"), sink("k2")
    t = keep_last(atom(s1, 1), atom(s2, 0), atom(k1), atom(k2))
    rec = record_materialize(t)
    assert [(c[2], c[3]) for c in rec.of("assign_port")] == [
        (k1.shape.inlets[0], 0),
        (s2.shape.outlets[0], 0),
        (k2.shape.inlets[0], 1),
        (s1.shape.outlets[0], 1),
    ]


def test_unresolved_forward_wire_is_an_error():
    s = src("s")
    with pytest.raises(RuntimeError, match="unresolved forward wires"):
        record_materialize(atom(s, 0))


# ------------------------------------------------------------------------------ phases
def test_island_phases_get_the_attributes_in_effect_and_are_all_made_ready():
    s, k = src("s"), sink("k")
    t = keep_last(
        PushAttributes(Attributes.name("outer")),
        atom(k),
        EnterIsland(T1),
        PushAttributes(Attributes.name("inner")),
        atom(s, -1),
        PopAttributes,
        ExitIsland,
        PopAttributes,
    )
    rec = record_materialize(t, top_attributes=Attributes.name("top"))
    default, island = rec.phases
    assert default.attributes == Attributes.name("top")
    assert island.attributes.name_lifted() == "top-outer"
    atoms = {c[2]: c[3] for c in rec.of("materialize_atomic")}
    assert atoms[k].name_lifted() == "top-outer" and atoms[s].name_lifted() == "top-outer-inner"
    assert default.ready and island.ready
    assert rec.of("on_island_ready") == [("on_island_ready", "island-0"), ("on_island_ready", "island-1")]


def test_dsl_blueprint_islands_through_the_recording_phase():
    graph = Source.range(0, 3).island().via(Flow().map(lambda x: x).island()).to(Sink.ignore())
    rec = record_materialize(graph.builder)
    assert [p.tag.name if p.tag else None for p in rec.phases] == [None, "GraphStage", "GraphStage"]
    # sink (island-0) <- map (island-1) <- range (island-2), each edge a publisher/subscriber pair
    assert [(p, o.name, c, slot) for p, o, c, slot in rec.cross_island()] == [
        ("island-1", "map.out", "island-0", 0),
        ("island-2", "range.out", "island-1", 0),
    ]


# ------------------------------------------------------------------------------ real islands
def test_real_backward_wires_across_islands(mat):
    got = Source.range(0, 50).island().map(lambda x: x * 2).island().run_with(Sink.seq(), mat).result(timeout=3)
    assert got == [x * 2 for x in range(50)]


def test_real_forward_wire_out_of_an_island(mat):
    source = Source.range(0, 20).island()
    sink = Sink.seq()
    b = (
        CompositeTraversalBuilder()
        .add(source.builder, source.shape, Keep.left)
        .add(sink.builder, sink.shape, Keep.right)
        .wire(source.shape.out, sink.shape.in_)
    )
    assert list(RunnableGraph(b).run(mat).result(timeout=3)) == list(range(20))


def test_real_forward_wire_into_an_island(mat):
    source = Source.range(0, 20)
    sink = Sink.seq().island()
    b = (
        CompositeTraversalBuilder()
        .add(source.builder, source.shape, Keep.left)
        .add(sink.builder, sink.shape, Keep.right)
        .wire(source.shape.out, sink.shape.in_)
    )
    assert list(RunnableGraph(b).run(mat).result(timeout=3)) == list(range(20))
