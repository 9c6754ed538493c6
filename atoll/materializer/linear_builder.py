"""LinearTraversalBuilder: the fast path for Source/Flow/Sink chains (Pekko's ``LinearTraversalBuilder``).

A chain has at most one open inlet and one open outlet, so it needs no port mapping. The traversal is
built **in reverse** (sink first, source last): the upstream part is appended *after* the downstream
part, so its output is wired backwards, and optimistically to relative slot ``-1`` (the slot just
before it), which is right whenever the downstream part's open inlet is its last input slot. When it is
not (a composite downstream), ``rewire_first_to`` fixes the one atom concerned.

A composite with an open output at the end of a chain cannot produce a traversal yet; it is carried as
``pending`` (with ``before``: the attribute/island openers that enclose it) until its output is wired.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from ..stage.attributes import Attributes
from ..stage.graph_stage import install_builder_factory
from .atomic_builder import atomic
from .builder_base import TraversalBuilder, add_mat_compose, apply_island_and_attributes
from .composite_builder import CompletedTraversalBuilder
from .keep import Keep
from .traversal import (
    GRAPH_STAGE_TAG,
    Compose,
    Pop,
    EmptyTraversal,
    EnterIsland,
    ExitIsland,
    IslandTag,
    MaterializeAtomic,
    PopAttributes,
    PushAttributes,
    PushNotUsed,
    Transform,
    Traversal,
)


class LinearTraversalBuilder(TraversalBuilder):
    __slots__ = (
        "in_port",
        "out_port",
        "in_offset",
        "in_slots",
        "traversal_so_far",
        "pending",
        "before",
        "attributes",
        "island_tag",
        "is_empty",
    )

    def __init__(
        self,
        in_port,
        out_port,
        in_offset: int,
        in_slots: int,
        traversal_so_far: Traversal,
        pending: Optional[TraversalBuilder] = None,
        before: Traversal = EmptyTraversal,
        attributes: Attributes = Attributes.none,
        island_tag: Optional[IslandTag] = None,
        is_empty: bool = False,
    ):
        self.in_port = in_port
        self.out_port = out_port
        self.in_offset = in_offset
        self.in_slots = in_slots
        self.traversal_so_far = traversal_so_far
        self.pending = pending
        self.before = before
        self.attributes = attributes
        self.island_tag = island_tag
        self.is_empty = is_empty

    def _copy(self, **kw) -> "LinearTraversalBuilder":
        b = LinearTraversalBuilder.__new__(LinearTraversalBuilder)
        for s in LinearTraversalBuilder.__slots__:
            setattr(b, s, kw[s] if s in kw else getattr(self, s))
        return b

    # ------------------------------------------------------------------ construction
    @staticmethod
    def empty() -> "LinearTraversalBuilder":
        """The identity chain (``Flow()``): no stage at all, materializes ``NotUsed``."""
        return LinearTraversalBuilder(None, None, 0, 0, PushNotUsed, is_empty=True)

    @staticmethod
    def from_module(module, attributes: Attributes) -> "LinearTraversalBuilder":
        shape = module.shape
        if len(shape.inlets) > 1 or len(shape.outlets) > 1:
            raise ValueError(f"{module!r}: a stage with more than one inlet or outlet cannot be linear")
        in_port = shape.inlets[0] if shape.inlets else None
        out_port = shape.outlets[0] if shape.outlets else None
        wiring = (-1,) if out_port is not None else ()
        b = LinearTraversalBuilder(
            in_port, out_port, 0, 1 if in_port is not None else 0, MaterializeAtomic(module, wiring), attributes=attributes
        )
        return b.make_island(GRAPH_STAGE_TAG) if attributes.is_async else b

    @staticmethod
    def from_builder(builder: TraversalBuilder, shape, combine: Callable[[Any, Any], Any] = Keep.right) -> "LinearTraversalBuilder":
        """View any builder with at most one open inlet and outlet (``shape``) as a linear one."""
        if isinstance(builder, LinearTraversalBuilder):
            if combine is Keep.right:
                return builder
            return LinearTraversalBuilder.empty().append(builder, combine)
        in_port = shape.inlets[0] if shape.inlets else None
        in_offset = builder.offset_of(in_port) if in_port is not None else 0
        if isinstance(builder, CompletedTraversalBuilder):
            return LinearTraversalBuilder(
                in_port, None, in_offset, builder.in_slots, builder.traversal.concat(add_mat_compose(PushNotUsed, combine))
            )
        if len(shape.outlets) != 1 or builder.unwired_outs != 1:
            raise ValueError(f"a graph with shape {shape} cannot be used as a linear Source/Flow/Sink")
        return LinearTraversalBuilder(
            in_port,
            shape.outlets[0],
            in_offset,
            builder.in_slots,
            add_mat_compose(PushNotUsed, combine),
            pending=builder,
        )

    # ------------------------------------------------------------------ queries
    @property
    def unwired_outs(self) -> int:
        return 1 if self.out_port is not None else 0

    @property
    def traversal(self) -> Traversal:
        """The finished traversal (only meaningful once the output is wired or there is none)."""
        if self.pending is not None:
            raise TypeError("chain ends in a graph whose output is still open; no traversal yet")
        return apply_island_and_attributes(self.traversal_so_far, self.attributes, self.island_tag)

    def offset_of(self, in_) -> int:
        if self.in_port is None or in_ is not self.in_port:
            raise ValueError(f"{in_} is not the open inlet of this chain")
        return self.in_offset

    def offset_of_module(self, out) -> int:
        if self.out_port is None or out is not self.out_port:
            raise ValueError(f"{out} is not the open outlet of this chain")
        if self.pending is not None:
            return self.pending.offset_of_module(out)
        return 0  # the outlet belongs to the first atom of the (reversed) traversal

    def is_unwired(self, port) -> bool:
        return port is self.in_port or port is self.out_port

    # ------------------------------------------------------------------ wiring
    def assign(self, out, relative_slot: int) -> "LinearTraversalBuilder":
        if self.out_port is None or out is not self.out_port:
            raise ValueError(f"{out} is not the open outlet of this chain")
        if self.pending is not None:
            done = self.pending.assign(out, relative_slot)
            t = self.before.concat(done.traversal).concat(self.traversal_so_far)
            return self._copy(out_port=None, traversal_so_far=t, pending=None, before=EmptyTraversal)
        t = self.traversal_so_far.rewire_first_to(relative_slot)
        return self._copy(out_port=None, traversal_so_far=t)

    def wire(self, out, in_) -> "LinearTraversalBuilder":
        """Wire this chain's open outlet to its own open inlet (a flow wired to itself)."""
        if self.in_port is None or in_ is not self.in_port:
            raise ValueError(f"{in_} is not the open inlet of this chain")
        wired = self.assign(out, self.in_offset - self.offset_of_module(out))
        return wired._copy(in_port=None)

    def _wire_out_to(self, down: "LinearTraversalBuilder") -> Traversal:
        """This chain's complete traversal with its outlet wired to ``down``'s open inlet, assuming
        ``down``'s traversal is placed right before this one."""
        if self.pending is not None:
            p_off = self.pending.offset_of_module(self.out_port)
            done = self.pending.assign(self.out_port, down.in_offset - (down.in_slots + p_off))
            t = self.before.concat(done.traversal).concat(self.traversal_so_far)
        elif down.in_offset != down.in_slots - 1:
            t = self.traversal_so_far.rewire_first_to(down.in_offset - down.in_slots)
        else:
            t = self.traversal_so_far
        return apply_island_and_attributes(t, self.attributes, self.island_tag)

    def append(self, to_append: "LinearTraversalBuilder", combine: Callable[[Any, Any], Any]) -> "LinearTraversalBuilder":
        """This chain followed (downstream) by ``to_append``; mat value ``combine(this, appended)``."""
        down = to_append
        if down.is_empty:
            # the identity contributes its value (NotUsed, possibly transformed) as the right-hand one
            if combine is Keep.left:
                return self
            if combine is Keep.right:
                ops = Pop.concat(down.traversal_so_far)
            elif combine is Keep.none:
                ops = Pop.concat(PushNotUsed)
            else:
                ops = down.traversal_so_far.concat(Compose(combine))
            return self._copy(traversal_so_far=self.traversal_so_far.concat(ops))
        if self.is_empty:
            if combine is Keep.right:
                return down
            # the identity's value (NotUsed, possibly transformed) is the left-hand one
            return down._copy(traversal_so_far=down.traversal_so_far.concat(add_mat_compose(self.traversal_so_far, combine)))
        if self.out_port is None:
            raise ValueError("cannot append to a chain that has no open output (a Sink or runnable graph)")
        if down.in_port is None:
            raise ValueError("cannot append a chain that has no open input (a Source or runnable graph)")

        up_t = add_mat_compose(self._wire_out_to(down), combine)
        in_port, in_offset = self.in_port, down.in_slots + self.in_offset
        in_slots = down.in_slots + self.in_slots
        if down.pending is None:
            t = apply_island_and_attributes(down.traversal_so_far, down.attributes, down.island_tag).concat(up_t)
            return LinearTraversalBuilder(in_port, down.out_port, in_offset, in_slots, t)
        # the downstream part still ends in an open composite: keep it pending, close its wrappers around it
        opener: Traversal = EmptyTraversal
        closer: Traversal = EmptyTraversal
        if down.attributes.attribute_list:
            opener = PushAttributes(down.attributes)
            closer = PopAttributes
        if down.island_tag is not None:
            opener = opener.concat(EnterIsland(down.island_tag))
            closer = ExitIsland.concat(closer)
        return LinearTraversalBuilder(
            in_port,
            down.out_port,
            in_offset,
            in_slots,
            down.traversal_so_far.concat(closer).concat(up_t),
            pending=down.pending,
            before=opener.concat(down.before),
        )

    # ------------------------------------------------------------------ attributes and mat values
    def set_attributes(self, attributes: Attributes) -> "LinearTraversalBuilder":
        b = self._copy(attributes=attributes)
        return b.make_island(GRAPH_STAGE_TAG) if attributes.is_async else b

    def make_island(self, tag: IslandTag) -> "LinearTraversalBuilder":
        if self.island_tag is not None:
            return self  # an island directly around an island would be empty
        if self.is_empty:
            return self
        return self._copy(island_tag=tag)

    def transform_mat(self, fn: Callable[[Any], Any]) -> "LinearTraversalBuilder":
        return self._copy(traversal_so_far=self.traversal_so_far.concat(Transform(fn)))


def stage_builder(stage) -> TraversalBuilder:
    """A fresh builder for one ``GraphStage`` alone (Pekko's ``GraphStage.traversalBuilder``): linear when
    it has at most one port of each kind, atomic otherwise. ``GraphStage.traversal_builder`` calls it."""
    shape = stage.shape
    shape.assign_ids()
    attrs = stage.initial_attributes
    if len(shape.inlets) <= 1 and len(shape.outlets) <= 1:
        return LinearTraversalBuilder.from_module(stage, attrs)
    return atomic(stage, attrs)


install_builder_factory(stage_builder)
