"""Helpers for traversal and builder tests (the counterpart of Pekko's ``TraversalTestUtils``).

* Test modules: sources, flows and sinks that are only shapes. The ``Composite*`` ones start with the
  generic (atomic/composite) builder, the ``Linear*`` ones with the linear builder.
* ``test_materialize(builder)`` walks a finished traversal the way the materializer does, but only
  records where every port lands: ``inlets[slot]`` / ``outlets[slot]`` in global slots, the attributes
  each module sees, the island (tag and attributes) each module is in, and the materialized value
  (each module's value is its name).
* ``RecordingPhase`` is a ``PhaseIsland`` that records ``materialize_atomic`` / ``assign_port`` /
  ``create_publisher`` / ``take_publisher`` / ``on_island_ready``; ``record_materialize`` runs the real
  phased materializer with it.
"""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

from atoll.markers import NotUsed
from atoll.materializer import phased
from atoll.materializer.atomic_builder import atomic
from atoll.materializer.linear_builder import LinearTraversalBuilder
from atoll.materializer.phase import PhaseIsland
from atoll.materializer.traversal import (
    Compose,
    EnterIsland,
    IslandTag,
    MaterializeAtomic,
    PushAttributes,
    Transform,
    Traversal,
    _ExitIsland,
    _Pop,
    _PopAttributes,
    _PushNotUsed,
    iterate,
)
from atoll.stage.attributes import Attributes
from atoll.stage.ports import Inlet, Outlet
from atoll.stage.shapes import FlowShape, SinkShape, SourceShape


# ---------------------------------------------------------------------------------------------- modules
class TestModule:
    """An atomic module that is nothing but a shape and a name."""

    __test__ = False

    def __init__(self, name: str, shape):
        self.name = name
        self.shape = shape
        shape.assign_ids()

    def __repr__(self):
        return self.name


def _source_shape(prefix):
    return SourceShape(Outlet(f"{prefix}.out"))


def _sink_shape(prefix):
    return SinkShape(Inlet(f"{prefix}.in"))


def _flow_shape(prefix):
    return FlowShape(Inlet(f"{prefix}.in"), Outlet(f"{prefix}.out"))


class CompositeTestSource(TestModule):
    def __init__(self):
        super().__init__("TestSource", _source_shape("testSourceC"))
        self.out = self.shape.out
        self.traversal_builder = atomic(self, Attributes.name("testSource"))


class CompositeTestSink(TestModule):
    def __init__(self):
        super().__init__("TestSink", _sink_shape("testSinkC"))
        self.in_ = self.shape.in_
        self.traversal_builder = atomic(self, Attributes.name("testSink"))


class CompositeTestFlow(TestModule):
    def __init__(self, tag: str):
        super().__init__(f"TestFlow{tag}", _flow_shape(f"testFlowC{tag}"))
        self.in_, self.out = self.shape.in_, self.shape.out
        self.traversal_builder = atomic(self, Attributes.name(f"testFlow{tag}"))


class LinearTestSource(TestModule):
    def __init__(self):
        super().__init__("TestSource", _source_shape("testSource"))
        self.out = self.shape.out
        self.traversal_builder = LinearTraversalBuilder.from_module(self, Attributes.name("testSource"))


class LinearTestSink(TestModule):
    def __init__(self):
        super().__init__("TestSink", _sink_shape("testSink"))
        self.in_ = self.shape.in_
        self.traversal_builder = LinearTraversalBuilder.from_module(self, Attributes.name("testSink"))


class LinearTestFlow(TestModule):
    def __init__(self, tag: str):
        super().__init__(f"TestFlow{tag}", _flow_shape(f"testFlow{tag}"))
        self.in_, self.out = self.shape.in_, self.shape.out
        self.traversal_builder = LinearTraversalBuilder.from_module(self, Attributes.name(f"testFlow{tag}"))


def append(builder: LinearTraversalBuilder, other, shape, combine) -> LinearTraversalBuilder:
    """Pekko's ``LinearTraversalBuilder.append(toAppend, shape, matCompose)``."""
    return builder.append(LinearTraversalBuilder.from_builder(other, shape), combine)


TEST_DEFAULT_ISLAND = IslandTag("TestDefaultIsland")
TEST_ISLAND_1 = IslandTag("TestIsland1")
TEST_ISLAND_2 = IslandTag("TestIsland2")
TEST_ISLAND_3 = IslandTag("TestIsland3")


def names(*ns: str) -> Attributes:
    """``Attributes.name(ns[0]) and Attributes.name(ns[1]) and ...`` (later names are more specific)."""
    attrs = Attributes.none
    for n in ns:
        attrs = attrs.and_(Attributes.name(n))
    return attrs


# ---------------------------------------------------------------------------------------------- test_materialize
class MaterializationResult:
    def __init__(self, connections, inlets, outlets, mat_value, attributes_assignments, island_assignments):
        self.connections = connections
        self.inlets = inlets
        self.outlets = outlets
        self.mat_value = mat_value
        self.attributes_assignments = attributes_assignments
        self.island_assignments = island_assignments

    def __repr__(self):
        return "connections: " + ", ".join(f"{o!r}->{i!r}" for o, i in zip(self.outlets, self.inlets))


def test_materialize(builder) -> MaterializationResult:
    """Walk ``builder``'s traversal and put every port into its global slot."""
    assert builder.is_traversal_complete, "the builder still has unwired outputs"
    connections = builder.in_slots
    inlets: List[Any] = [None] * connections
    outlets: List[Any] = [None] * connections
    attributes_result: List[Tuple[Any, Attributes]] = []
    islands_result: List[Tuple[Any, Attributes, IslandTag]] = []
    island_stack: List[Tuple[IslandTag, Attributes]] = [(TEST_DEFAULT_ISLAND, Attributes.none)]
    attributes_stack: List[Attributes] = [Attributes.none]
    mat_stack: List[Any] = []
    in_offs = 0
    for cmd in iterate(builder.traversal):
        t = type(cmd)
        if t is MaterializeAtomic:
            module = cmd.module
            for i, in_ in enumerate(module.shape.inlets):
                inlets[in_offs + i] = in_
            for out in module.shape.outlets:
                outlets[in_offs + cmd.out_to_slots[out.id]] = out
            attributes_result.append((module, attributes_stack[-1]))
            tag, island_attrs = island_stack[-1]
            islands_result.append((module, island_attrs, tag))
            mat_stack.append(repr(module))
            in_offs += len(module.shape.inlets)
        elif t is _Pop:
            mat_stack.pop()
        elif t is _PushNotUsed:
            mat_stack.append(NotUsed)
        elif t is Transform:
            mat_stack.append(cmd.fn(mat_stack.pop()))
        elif t is Compose:
            second = mat_stack.pop()
            first = mat_stack.pop()
            mat_stack.append(cmd.fn(second, first) if cmd.reverse else cmd.fn(first, second))
        elif t is PushAttributes:
            attributes_stack.append(attributes_stack[-1].and_(cmd.attributes))
        elif t is _PopAttributes:
            attributes_stack.pop()
        elif t is EnterIsland:
            island_stack.append((cmd.tag, attributes_stack[-1]))
        elif t is _ExitIsland:
            island_stack.pop()
    assert len(island_stack) == 1 and len(attributes_stack) == 1, "unbalanced island/attribute commands"
    return MaterializationResult(
        connections, inlets, outlets, mat_stack[-1] if mat_stack else None, attributes_result, islands_result
    )


test_materialize.__test__ = False  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------------- recording phase
class Publisher:
    """What ``RecordingPhase.create_publisher`` returns."""

    def __init__(self, phase: "RecordingPhase", out, handle):
        self.phase = phase
        self.out = out
        self.handle = handle

    def __repr__(self):
        return f"Publisher({self.phase.name}:{self.out!r})"


class RecordingPhase(PhaseIsland):
    """Records every call the materializer makes; ``calls`` is shared by all phases of one run."""

    def __init__(self, tag: Optional[IslandTag], attributes: Attributes, index: int, calls: list):
        self.tag = tag
        self.attributes = attributes
        self.index = index
        self.name = f"island-{index}"
        self.calls = calls
        self.ready = False

    def __repr__(self):
        return self.name

    def materialize_atomic(self, module, attributes):
        self.calls.append(("materialize_atomic", self.name, module, attributes))
        value = getattr(module, "mat_value", None)
        return module, (repr(module) if value is None else value)

    def assign_port(self, port, slot, handle):
        self.calls.append(("assign_port", self.name, port, slot, handle))

    def create_publisher(self, out, handle):
        pub = Publisher(self, out, handle)
        self.calls.append(("create_publisher", self.name, out, handle))
        return pub

    def take_publisher(self, slot, publisher, attributes):
        self.calls.append(("take_publisher", self.name, slot, publisher))

    def on_island_ready(self):
        self.ready = True
        self.calls.append(("on_island_ready", self.name))

    # -- views
    def wires(self) -> dict:
        """local slot -> (outlet, inlet) assigned in this island (None where a side is missing)."""
        slots: dict = {}
        for c in self.calls:
            if c[0] == "assign_port" and c[1] == self.name:
                port, slot = c[2], c[3]
                out, in_ = slots.get(slot, (None, None))
                slots[slot] = (port, in_) if isinstance(port, Outlet) else (out, port)
        return slots


class Recording:
    def __init__(self, mat_value, phases, calls):
        self.mat_value = mat_value
        self.phases = phases
        self.calls = calls

    def phase(self, i: int) -> RecordingPhase:
        return self.phases[i]

    def of(self, kind: str) -> list:
        return [c for c in self.calls if c[0] == kind]

    def cross_island(self) -> list:
        """``(producer island, outlet, consumer island, local slot)`` for every cross-island wire."""
        return [(c[3].phase.name, c[3].out, c[1], c[2]) for c in self.of("take_publisher")]


def record_materialize(traversal_or_builder, top_attributes: Attributes = Attributes.none, debug=None) -> Recording:
    """Run the phased materializer over a traversal (or a complete builder) with recording phases."""
    t = traversal_or_builder if isinstance(traversal_or_builder, Traversal) else traversal_or_builder.traversal
    calls: list = []
    mat, phases = phased.materialize(
        t, lambda tag, attrs, index: RecordingPhase(tag, attrs, index, calls), top_attributes, debug
    )
    return Recording(mat, phases, calls)


def concat(*commands: Traversal) -> Traversal:
    """The commands in order, as one traversal."""
    from atoll.materializer.traversal import EmptyTraversal

    t: Traversal = EmptyTraversal
    for c in commands:
        t = t.concat(c)
    return t


__all__ = [
    "TestModule",
    "CompositeTestSource",
    "CompositeTestSink",
    "CompositeTestFlow",
    "LinearTestSource",
    "LinearTestSink",
    "LinearTestFlow",
    "append",
    "names",
    "TEST_DEFAULT_ISLAND",
    "TEST_ISLAND_1",
    "TEST_ISLAND_2",
    "TEST_ISLAND_3",
    "MaterializationResult",
    "test_materialize",
    "RecordingPhase",
    "Recording",
    "record_materialize",
    "concat",
]
