"""Shapes: the ordered open ports of a blueprint (Pekko's ``Shape`` family).

Ports keep a stable order; an atomic stage's port ids are their positions in ``inlets`` and
``outlets``. ``deep_copy`` gives fresh ports (``mapped_to`` the originals) for GraphDSL imports.
"""
from __future__ import annotations

from typing import Sequence

from .ports import Inlet, Outlet, connect_sugar


class Shape:
    """Base: a sequence of inlets and a sequence of outlets."""

    __slots__ = ("inlets", "outlets")

    def __init__(self, inlets: Sequence[Inlet] = (), outlets: Sequence[Outlet] = ()):
        self.inlets = tuple(inlets)
        self.outlets = tuple(outlets)
        for p in self.inlets:
            if not isinstance(p, Inlet):
                raise TypeError(f"{type(self).__name__}: expected an Inlet, got {p!r}")
        for p in self.outlets:
            if not isinstance(p, Outlet):
                raise TypeError(f"{type(self).__name__}: expected an Outlet, got {p!r}")

    def assign_ids(self) -> None:
        """Number the ports by position (done once for an atomic stage's own shape)."""
        for i, p in enumerate(self.inlets):
            p.id = i
        for i, p in enumerate(self.outlets):
            p.id = i

    def deep_copy(self) -> "Shape":
        """A shape of the same kind with fresh ports mapped to these."""
        return Shape([p.carbon_copy() for p in self.inlets], [p.carbon_copy() for p in self.outlets])

    def __rshift__(self, other):
        """``shape >> ...`` inside a GraphDSL build function: connects the shape's single outlet."""
        return connect_sugar(self, other)

    def has_same_ports_as(self, other: "Shape") -> bool:
        return set(map(id, self.inlets)) == set(map(id, other.inlets)) and set(map(id, self.outlets)) == set(
            map(id, other.outlets)
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self.inlets)}, {list(self.outlets)})"


class _ClosedShape(Shape):
    __slots__ = ()

    def deep_copy(self):
        return self

    def __repr__(self):
        return "ClosedShape"


#: The shape of a runnable graph: no open ports.
ClosedShape = _ClosedShape()


class SourceShape(Shape):
    """One outlet."""

    __slots__ = ()

    def __init__(self, out: Outlet):
        super().__init__((), (out,))

    @property
    def out(self) -> Outlet:
        return self.outlets[0]

    def deep_copy(self):
        return SourceShape(self.out.carbon_copy())


class SinkShape(Shape):
    """One inlet."""

    __slots__ = ()

    def __init__(self, in_: Inlet):
        super().__init__((in_,), ())

    @property
    def in_(self) -> Inlet:
        return self.inlets[0]

    def deep_copy(self):
        return SinkShape(self.in_.carbon_copy())


class FlowShape(Shape):
    """One inlet, one outlet."""

    __slots__ = ()

    def __init__(self, in_: Inlet, out: Outlet):
        super().__init__((in_,), (out,))

    @property
    def in_(self) -> Inlet:
        return self.inlets[0]

    @property
    def out(self) -> Outlet:
        return self.outlets[0]

    def deep_copy(self):
        return FlowShape(self.in_.carbon_copy(), self.out.carbon_copy())


class BidiShape(Shape):
    """Two flows in opposite directions: ``in1 -> out1`` and ``in2 -> out2``."""

    __slots__ = ()

    def __init__(self, in1: Inlet, out1: Outlet, in2: Inlet, out2: Outlet):
        super().__init__((in1, in2), (out1, out2))

    in1 = property(lambda self: self.inlets[0])
    in2 = property(lambda self: self.inlets[1])
    out1 = property(lambda self: self.outlets[0])
    out2 = property(lambda self: self.outlets[1])

    def deep_copy(self):
        return BidiShape(self.in1.carbon_copy(), self.out1.carbon_copy(), self.in2.carbon_copy(), self.out2.carbon_copy())


class UniformFanInShape(Shape):
    """``n`` inlets of one kind, one outlet."""

    __slots__ = ()

    def __init__(self, out: Outlet, ins: Sequence[Inlet]):
        super().__init__(ins, (out,))

    @property
    def out(self) -> Outlet:
        return self.outlets[0]

    @property
    def ins(self) -> tuple:
        return self.inlets

    def in_(self, i: int) -> Inlet:
        return self.inlets[i]

    def deep_copy(self):
        return UniformFanInShape(self.out.carbon_copy(), [p.carbon_copy() for p in self.inlets])


class FanInShape(UniformFanInShape):
    """Fan-in whose inlets may carry different element types (``Zip``, ``MergePreferred`` ...)."""

    __slots__ = ()

    def deep_copy(self):
        return FanInShape(self.out.carbon_copy(), [p.carbon_copy() for p in self.inlets])


class UniformFanOutShape(Shape):
    """One inlet, ``n`` outlets."""

    __slots__ = ()

    def __init__(self, in_: Inlet, outs: Sequence[Outlet]):
        super().__init__((in_,), outs)

    @property
    def in_(self) -> Inlet:
        return self.inlets[0]

    @property
    def outs(self) -> tuple:
        return self.outlets

    def out(self, i: int) -> Outlet:
        return self.outlets[i]

    def deep_copy(self):
        return UniformFanOutShape(self.in_.carbon_copy(), [p.carbon_copy() for p in self.outlets])


class FanOutShape(UniformFanOutShape):
    """Fan-out whose outlets may carry different element types (``Unzip`` ...)."""

    __slots__ = ()

    def deep_copy(self):
        return FanOutShape(self.in_.carbon_copy(), [p.carbon_copy() for p in self.outlets])


class MergePreferredShape(UniformFanInShape):
    """``MergePreferred``'s shape: ``n`` secondary inlets ``ins``, one ``preferred`` inlet, one outlet.

    ``inlets`` lists the secondary inlets first and ``preferred`` last (Pekko's order), so
    ``in_(i)`` is the ``i``-th secondary inlet."""

    __slots__ = ()

    def __init__(self, out: Outlet, ins: Sequence[Inlet], preferred: Inlet):
        super().__init__(out, list(ins) + [preferred])

    @property
    def preferred(self) -> Inlet:
        return self.inlets[-1]

    @property
    def ins(self) -> tuple:
        """The secondary inlets."""
        return self.inlets[:-1]

    @property
    def secondary_ports(self) -> int:
        return len(self.inlets) - 1

    def deep_copy(self):
        return MergePreferredShape(
            self.out.carbon_copy(), [p.carbon_copy() for p in self.ins], self.preferred.carbon_copy()
        )


def _port_number(name: str, prefix: str) -> int:
    """``3`` for ``prefix + "3"``; -1 when ``name`` is not a numbered port name."""
    digits = name[len(prefix):]
    if name.startswith(prefix) and digits.isdigit() and (digits == "0" or not digits.startswith("0")):
        return int(digits)
    return -1


class FanInShapeN(FanInShape):
    """A ``FanInShape`` whose inlets are also reachable as ``in0``, ``in1``, ... (Pekko's
    ``FanInShape2`` .. ``FanInShape22``, used by ``Zip``, ``ZipWith``, ``MergeSorted``)."""

    __slots__ = ()

    def __getattr__(self, name: str):
        i = _port_number(name, "in")
        if i >= 0 and i < len(self.inlets):
            return self.inlets[i]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def deep_copy(self):
        return FanInShapeN(self.out.carbon_copy(), [p.carbon_copy() for p in self.inlets])


class FanOutShapeN(FanOutShape):
    """A ``FanOutShape`` whose outlets are also reachable as ``out0``, ``out1``, ... (Pekko's
    ``FanOutShape2`` .. ``FanOutShape22``, used by ``Unzip`` and ``UnzipWith``)."""

    __slots__ = ()

    def __getattr__(self, name: str):
        i = _port_number(name, "out")
        if i >= 0 and i < len(self.outlets):
            return self.outlets[i]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def deep_copy(self):
        return FanOutShapeN(self.in_.carbon_copy(), [p.carbon_copy() for p in self.outlets])
