"""The builder of a single atomic stage with several outputs (fan-out junctions in GraphDSL).

``AtomicTraversalBuilder`` collects the relative slot of each output until all are assigned, then
becomes a ``CompletedTraversalBuilder`` (see :mod:`.composite_builder`): a finished traversal plus the
offsets of its open inlets, and nothing else. Anything else done to a stage with open outputs (an
island, a materialized-value transform, adding a sibling) wraps it in a ``CompositeTraversalBuilder``.
"""
from __future__ import annotations

from typing import Any, Callable

from ..stage.attributes import Attributes
from .builder_base import TraversalBuilder
from .composite_builder import CompletedTraversalBuilder, CompositeTraversalBuilder
from .traversal import IslandTag, MaterializeAtomic


class AtomicTraversalBuilder(TraversalBuilder):
    """One stage whose outputs are being wired one by one (fan-out junctions in GraphDSL)."""

    __slots__ = ("module", "out_to_slot", "unwired_outs", "attributes")

    def __init__(self, module, out_to_slot: tuple, unwired_outs: int, attributes: Attributes):
        self.module = module
        self.out_to_slot = out_to_slot
        self.unwired_outs = unwired_outs
        self.attributes = attributes

    @property
    def in_slots(self) -> int:
        return len(self.module.shape.inlets)

    def offset_of(self, in_) -> int:
        return in_.id

    def offset_of_module(self, out) -> int:
        return 0

    def is_unwired(self, port) -> bool:
        return True

    def assign(self, out, relative_slot: int) -> TraversalBuilder:
        slots = list(self.out_to_slot)
        slots[out.id] = relative_slot
        if self.unwired_outs == 1:
            ins = self.module.shape.inlets
            return CompletedTraversalBuilder(
                MaterializeAtomic(self.module, slots), len(ins), {p: p.id for p in ins}, Attributes.none
            ).set_attributes(self.attributes)
        return AtomicTraversalBuilder(self.module, tuple(slots), self.unwired_outs - 1, self.attributes)

    def set_attributes(self, attributes: Attributes) -> "AtomicTraversalBuilder":
        return AtomicTraversalBuilder(self.module, self.out_to_slot, self.unwired_outs, attributes)

    def make_island(self, tag: IslandTag) -> TraversalBuilder:
        # An island around a single stage with open outputs: a composite that carries the tag.
        return CompositeTraversalBuilder.wrapping(self, self.module.shape).make_island(tag)

    def transform_mat(self, fn: Callable[[Any], Any]) -> TraversalBuilder:
        return CompositeTraversalBuilder.wrapping(self, self.module.shape).transform_mat(fn)

    def add(self, sub: TraversalBuilder, shape, combine: Callable[[Any, Any], Any]) -> TraversalBuilder:
        """A composite holding this stage (first) and ``sub``."""
        return CompositeTraversalBuilder.wrapping(self, self.module.shape).add(sub, shape, combine)

    def wire(self, out, in_) -> TraversalBuilder:
        """Wire an output of this stage to one of its own inputs."""
        return self.assign(out, self.offset_of(in_) - self.offset_of_module(out))


def atomic(module, attributes: Attributes) -> TraversalBuilder:
    """The builder of one atomic stage with any number of ports (Pekko's ``TraversalBuilder.atomic``)."""
    shape = module.shape
    if not shape.outlets:
        ins = shape.inlets
        b = CompletedTraversalBuilder(MaterializeAtomic(module, ()), len(ins), {p: p.id for p in ins}, Attributes.none)
        return b.set_attributes(attributes)
    return AtomicTraversalBuilder(module, (0,) * len(shape.outlets), len(shape.outlets), attributes)
