"""Blueprint: what Source, Flow, Sink and RunnableGraph share (Pekko's ``Graph``).

A blueprint is an immutable value: a traversal builder plus the shape of its open ports. Every
operation returns a new blueprint; nothing runs until ``run``.
"""
from __future__ import annotations

from typing import Any, Callable, TypeVar

from ..stage.attributes import Attributes
from ..stage.ports import connect_sugar

B = TypeVar("B", bound="Blueprint")


def builder_of(graph):
    """The traversal builder of a blueprint or a GraphStage."""
    b = getattr(graph, "builder", None)
    if b is not None:
        return b
    tb = getattr(graph, "traversal_builder", None)
    if tb is not None:
        return tb
    raise TypeError(f"expected a Source, Flow, Sink, graph or GraphStage, got {graph!r}")


class Blueprint:
    # (weakly referable: the registry of recent graphs keeps an ended graph's blueprint only while its owner does)
    __slots__ = ("builder", "shape", "__weakref__")

    def __init__(self, builder, shape):
        self.builder = builder
        self.shape = shape

    def _rewrap(self: B, builder) -> B:
        obj = object.__new__(type(self))
        obj.builder = builder
        obj.shape = self.shape
        return obj

    @property
    def traversal_builder(self):
        return self.builder

    @property
    def attributes(self) -> Attributes:
        """The attributes set on this blueprint as a whole."""
        return self.builder.attributes

    def with_attributes(self: B, attributes: Attributes) -> B:
        """Replace the attributes of this blueprint as a whole (inner stages keep theirs)."""
        if not isinstance(attributes, Attributes):
            raise TypeError(f"with_attributes expects Attributes, got {attributes!r}")
        return self._rewrap(self.builder.set_attributes(attributes))

    def add_attributes(self: B, attributes: Attributes) -> B:
        """Add ``attributes`` (more specific than those already set)."""
        if not isinstance(attributes, Attributes):
            raise TypeError(f"add_attributes expects Attributes, got {attributes!r}")
        return self.with_attributes(self.builder.attributes.and_(attributes))

    def named(self: B, name: str) -> B:
        """Give this blueprint a name (used in logs, errors and island names)."""
        return self.add_attributes(Attributes.name(name))

    def island(self: B, **ray_actor_options: Any) -> B:
        """Close an island here (Pekko's ``.async``): everything composed so far runs in its own
        island: ``name`` names it (``graph.islands()``, progress, console, metrics, errors, ``kill_island``), the other
        options are its Ray actor's (``num_cpus``, ``num_gpus``, ``resources``, ``scheduling_strategy`` ...). The
        actor is not a Ray named actor: the blueprint can run many times at once, and warm actors are reused."""
        return self.add_attributes(Attributes.async_boundary(**ray_actor_options))

    def async_boundary(self: B, **ray_actor_options: Any) -> B:
        """Alias of ``island``."""
        return self.island(**ray_actor_options)

    def __rshift__(self, other):
        """``source >> flow >> sink`` inside a GraphDSL build function (adds and connects them)."""
        return connect_sugar(self, other)

    def map_materialized_value(self: B, fn: Callable[[Any], Any]) -> B:
        """Transform the materialized value with ``fn``."""
        if not callable(fn):
            raise TypeError(f"map_materialized_value expects a callable, got {fn!r}")
        return self._rewrap(self.builder.transform_mat(fn))
