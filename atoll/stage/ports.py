"""Ports: the typed endpoints of a stage's shape (Pekko's ``Inlet``/``Outlet``).

A port's ``id`` is its index among its shape's inlets (or outlets); a stage logic finds the
connection of a port by that index. ``mapped_to`` links a deep copy back to the port it copies,
which the composite traversal builder uses to tell repeated imports of one blueprint apart.

``out >> in_`` connects ports inside a GraphDSL build function. The builder lives a layer up (in
``atoll.dsl.graph_dsl``), so it is reached through ``active_graph_builder``, a context variable that
the GraphDSL sets while a build function runs; this package never imports the DSL.
"""
from __future__ import annotations

import contextvars

#: The GraphDSL builder whose build function is running in this context (None outside one). Set by
#: ``GraphDSL.create``; read by ``>>`` on ports, shapes and blueprints.
active_graph_builder: contextvars.ContextVar = contextvars.ContextVar("atoll_graph_builder", default=None)


def connect_sugar(left, right):
    """``left >> right`` inside a GraphDSL build function: connects through the active builder."""
    b = active_graph_builder.get()
    if b is None:
        raise TypeError("'>>' between ports works only inside a GraphDSL build function")
    return b.connect_sugar(left, right)


class Port:
    __slots__ = ("name", "id", "mapped_to", "__weakref__")

    def __init__(self, name: str):
        if not isinstance(name, str) or not name:
            raise ValueError(f"port name must be a non-empty string, got {name!r}")
        self.name = name
        self.id = -1
        self.mapped_to: Port | None = None

    def carbon_copy(self):
        """A fresh port with the same name whose ``mapped_to`` points at this port."""
        p = type(self)(self.name)
        p.id = self.id
        p.mapped_to = self
        return p

    def __rshift__(self, other):
        """``out >> in_`` / ``out >> flow >> in_``: connect inside a GraphDSL build function."""
        return connect_sugar(self, other)

    def origin(self) -> "Port":
        """The port this one was (transitively) copied from."""
        p = self
        while p.mapped_to is not None:
            p = p.mapped_to
        return p


class Inlet(Port):
    """Input port of a stage."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Inlet({self.name})"


class Outlet(Port):
    """Output port of a stage."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Outlet({self.name})"
