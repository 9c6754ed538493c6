"""CompositeTraversalBuilder: builds graphs that are not chains (Pekko's ``CompositeTraversalBuilder``).

Sub-builders are added in order and referred to by ``BuilderKey`` placeholders, which keeps their
position (and so every relative offset) stable while they are still incomplete. Ports are told apart
by deep-copied shapes whose ``mapped_to`` leads back to the sub-builder's own ports. Once no output is
left unwired, the steps are stitched into one traversal and the builder becomes a
``CompletedTraversalBuilder``, dropping its maps.

``CompletedTraversalBuilder`` (any fully wired part: a finished traversal plus the offsets of its open
inlets, and nothing else) lives here too, since adding to it starts a composite; the atomic and linear
builders import both from this module, never the other way round.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from ..stage.attributes import Attributes
from .builder_base import TraversalBuilder, apply_island_and_attributes
from .keep import Keep
from .traversal import (
    GRAPH_STAGE_TAG,
    Compose,
    EmptyTraversal,
    EnterIsland,
    ExitIsland,
    IslandTag,
    Pop,
    PushNotUsed,
    Transform,
    Traversal,
)


class BuilderKey:
    """Placeholder for a sub-builder's traversal inside the composite's step list."""

    __slots__ = ()

    def __repr__(self):
        return f"BuilderKey@{id(self):x}"


def _inner(port):
    return port.mapped_to if port.mapped_to is not None else port


class CompositeTraversalBuilder(TraversalBuilder):
    """Graph builder with explicit port mapping; immutable (every operation returns a new builder)."""

    __slots__ = (
        "steps",
        "in_slots",
        "in_offsets",
        "in_base_offset_for_out",
        "pending_builders",
        "out_owners",
        "unwired_outs",
        "attributes",
        "island_tag",
    )

    def __init__(
        self,
        steps: tuple = (PushNotUsed,),
        in_slots: int = 0,
        in_offsets: Optional[Dict[Any, int]] = None,
        in_base_offset_for_out: Optional[Dict[Any, int]] = None,
        pending_builders: Optional[Dict[BuilderKey, TraversalBuilder]] = None,
        out_owners: Optional[Dict[Any, BuilderKey]] = None,
        unwired_outs: int = 0,
        attributes: Attributes = Attributes.none,
        island_tag: Optional[IslandTag] = None,
    ):
        self.steps = steps
        self.in_slots = in_slots
        self.in_offsets = in_offsets if in_offsets is not None else {}
        self.in_base_offset_for_out = in_base_offset_for_out if in_base_offset_for_out is not None else {}
        self.pending_builders = pending_builders if pending_builders is not None else {}
        self.out_owners = out_owners if out_owners is not None else {}
        self.unwired_outs = unwired_outs
        self.attributes = attributes
        self.island_tag = island_tag

    @staticmethod
    def wrapping(sub: TraversalBuilder, shape) -> "TraversalBuilder":
        """A composite holding just ``sub`` with its ports exposed as ``shape`` (mat value of ``sub``)."""
        return CompositeTraversalBuilder().add(sub, shape, Keep.right)

    def _copy(self, **kw) -> "CompositeTraversalBuilder":
        b = CompositeTraversalBuilder.__new__(CompositeTraversalBuilder)
        for s in CompositeTraversalBuilder.__slots__:
            setattr(b, s, kw[s] if s in kw else getattr(self, s))
        return b

    # ------------------------------------------------------------------ adding and wiring
    def add(self, sub: TraversalBuilder, shape, combine: Callable[[Any, Any], Any]) -> TraversalBuilder:
        """Add ``sub`` whose open ports are ``shape`` (fresh ports mapped to ``sub``'s), combining
        materialized values as ``combine(current, sub's)``."""
        key = BuilderKey()
        if combine is Keep.left:
            steps = self.steps + (key, Pop)
        elif combine is Keep.right:
            steps = self.steps + (Pop, key)
        elif combine is Keep.none:
            steps = self.steps + (key, Pop, Pop, PushNotUsed)
        else:
            steps = self.steps + (key, Compose(combine))
        in_offsets = dict(self.in_offsets)
        for p in shape.inlets:
            in_offsets[p] = self.in_slots + sub.offset_of(_inner(p))
        pending = dict(self.pending_builders)
        pending[key] = sub
        if sub.is_traversal_complete:
            b = self._copy(steps=steps, in_slots=self.in_slots + sub.in_slots, in_offsets=in_offsets, pending_builders=pending)
        else:
            base = dict(self.in_base_offset_for_out)
            owners = dict(self.out_owners)
            for p in shape.outlets:
                base[p] = self.in_slots + sub.offset_of_module(_inner(p))
                owners[p] = key
            b = self._copy(
                steps=steps,
                in_slots=self.in_slots + sub.in_slots,
                in_offsets=in_offsets,
                in_base_offset_for_out=base,
                out_owners=owners,
                pending_builders=pending,
                unwired_outs=self.unwired_outs + sub.unwired_outs,
            )
        return b._complete_if_possible()

    def wire(self, out, in_) -> TraversalBuilder:
        """Connect open outlet ``out`` to open inlet ``in_``."""
        if out not in self.out_owners:
            raise ValueError(f"{out} is not an open outlet of this graph")
        if in_ not in self.in_offsets:
            raise ValueError(f"{in_} is not an open inlet of this graph")
        rel = self.in_offsets[in_] - self.in_base_offset_for_out[out]
        in_offsets = dict(self.in_offsets)
        del in_offsets[in_]
        return self._copy(in_offsets=in_offsets).assign(out, rel)

    def offset_of(self, in_) -> int:
        try:
            return self.in_offsets[in_]
        except KeyError:
            raise ValueError(f"{in_} is not an open inlet of this graph") from None

    def offset_of_module(self, out) -> int:
        try:
            return self.in_base_offset_for_out[out]
        except KeyError:
            raise ValueError(f"{out} is not an open outlet of this graph") from None

    def is_unwired(self, port) -> bool:
        return port in self.in_offsets or port in self.in_base_offset_for_out

    def assign(self, out, relative_slot: int) -> TraversalBuilder:
        key = self.out_owners[out]
        sub = self.pending_builders[key]
        pending = dict(self.pending_builders)
        pending[key] = sub.assign(_inner(out), relative_slot)
        owners = dict(self.out_owners)
        del owners[out]
        base = dict(self.in_base_offset_for_out)
        del base[out]
        b = self._copy(pending_builders=pending, out_owners=owners, in_base_offset_for_out=base, unwired_outs=self.unwired_outs - 1)
        return b._complete_if_possible()

    def _complete_if_possible(self) -> TraversalBuilder:
        if self.unwired_outs:
            return self
        t: Traversal = EmptyTraversal
        for step in self.steps:
            if type(step) is BuilderKey:
                t = t.concat(self.pending_builders[step].traversal)
            else:
                t = t.concat(step)
        if self.island_tag is not None:
            t = EnterIsland(self.island_tag).concat(t).concat(ExitIsland)
        return CompletedTraversalBuilder(t, self.in_slots, self.in_offsets, self.attributes)

    # ------------------------------------------------------------------ attributes and mat values
    def set_attributes(self, attributes: Attributes) -> TraversalBuilder:
        b = self._copy(attributes=attributes)
        return b.make_island(GRAPH_STAGE_TAG) if attributes.is_async else b

    def make_island(self, tag: IslandTag) -> TraversalBuilder:
        return self if self.island_tag is not None else self._copy(island_tag=tag)

    def transform_mat(self, fn: Callable[[Any], Any]) -> TraversalBuilder:
        return self._copy(steps=self.steps + (Transform(fn),))

    @property
    def traversal(self) -> Traversal:
        if not self.unwired_outs:  # nothing added yet (the empty builder)
            return self._complete_if_possible().traversal
        raise TypeError(
            f"graph has {self.unwired_outs} unwired output(s): "
            + ", ".join(repr(p) for p in self.out_owners)
        )

    def unwired_out_ports(self) -> List[Any]:
        return list(self.out_owners)


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
        key = BuilderKey()
        first = CompositeTraversalBuilder(
            steps=(key,), in_slots=self.in_slots, in_offsets=dict(self.in_to_offset), pending_builders={key: self}
        )
        return first.add(sub, shape, combine)

    def wire(self, out, in_) -> TraversalBuilder:
        raise TypeError(f"cannot wire {out} to {in_}: every output of this graph is already wired")
