"""Builders for a single atomic stage with several outputs, and for any fully wired (completed) part.

``AtomicTraversalBuilder`` collects the relative slot of each output until all are assigned, then
becomes a ``CompletedTraversalBuilder``: a finished traversal plus the offsets of its open inlets, and
nothing else (the port maps of composites are shed as soon as they are complete).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional

from ..stage.attributes import Attributes
from .builder_base import TraversalBuilder, apply_island_and_attributes
from .traversal import GRAPH_STAGE_TAG, IslandTag, MaterializeAtomic, Transform, Traversal


class CompletedTraversalBuilder(TraversalBuilder):
    """All outputs wired: holds the traversal and where its open inlets sit."""

    __slots__ = ("traversal_so_far", "in_slots", "in_to_offset", "attributes", "island_tag")

    unwired_outs = 0

    def __init__(
        self,
        traversal_so_far: Traversal,
        in_slots: int,
        in_to_offset: Dict[Any, int],
        attributes: Attributes,
        island_tag: Optional[IslandTag] = None,
    ):
        self.traversal_so_far = traversal_so_far
        self.in_slots = in_slots
        self.in_to_offset = in_to_offset
        self.attributes = attributes
        self.island_tag = island_tag

    @property
    def traversal(self) -> Traversal:
        return apply_island_and_attributes(self.traversal_so_far, self.attributes, self.island_tag)

    def offset_of(self, in_) -> int:
        try:
            return self.in_to_offset[in_]
        except KeyError:
            raise ValueError(f"{in_} is not an open inlet of this graph") from None

    def is_unwired(self, port) -> bool:
        return port in self.in_to_offset

    def _copy(self, **kw) -> "CompletedTraversalBuilder":
        args = dict(
            traversal_so_far=self.traversal_so_far,
            in_slots=self.in_slots,
            in_to_offset=self.in_to_offset,
            attributes=self.attributes,
            island_tag=self.island_tag,
        )
        args.update(kw)
        return CompletedTraversalBuilder(**args)

    def set_attributes(self, attributes: Attributes) -> "CompletedTraversalBuilder":
        b = self._copy(attributes=attributes)
        return b.make_island(GRAPH_STAGE_TAG) if attributes.is_async else b

    def make_island(self, tag: IslandTag) -> "CompletedTraversalBuilder":
        return self if self.island_tag is not None else self._copy(island_tag=tag)

    def transform_mat(self, fn: Callable[[Any], Any]) -> "CompletedTraversalBuilder":
        return self._copy(traversal_so_far=self.traversal_so_far.concat(Transform(fn)))

    def add(self, sub: TraversalBuilder, shape, combine: Callable[[Any, Any], Any]) -> TraversalBuilder:
        """A composite holding this part (first, its value at the bottom of the stack) and ``sub``."""
        from .composite_builder import BuilderKey, CompositeTraversalBuilder

        key = BuilderKey()
        first = CompositeTraversalBuilder(
            steps=(key,), in_slots=self.in_slots, in_offsets=dict(self.in_to_offset), pending_builders={key: self}
        )
        return first.add(sub, shape, combine)

    def wire(self, out, in_) -> TraversalBuilder:
        raise TypeError(f"cannot wire {out} to {in_}: every output of this graph is already wired")


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
        from .composite_builder import CompositeTraversalBuilder

        return CompositeTraversalBuilder.wrapping(self, self.module.shape).make_island(tag)

    def transform_mat(self, fn: Callable[[Any], Any]) -> TraversalBuilder:
        from .composite_builder import CompositeTraversalBuilder

        return CompositeTraversalBuilder.wrapping(self, self.module.shape).transform_mat(fn)

    def add(self, sub: TraversalBuilder, shape, combine: Callable[[Any, Any], Any]) -> TraversalBuilder:
        """A composite holding this stage (first) and ``sub``."""
        from .composite_builder import CompositeTraversalBuilder

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
