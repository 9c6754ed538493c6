"""Shared pieces of the traversal builders: the builder interface and the two wrapping helpers.

A builder is an immutable value that accumulates a ``Traversal`` while tracking which ports are still
open. Builders exist to compute the relative output wiring; input slots follow from position alone.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, Optional

from ..stage.attributes import Attributes
from .keep import Keep
from .traversal import (
    Compose,
    EnterIsland,
    ExitIsland,
    IslandTag,
    Pop,
    PopAttributes,
    PushAttributes,
    PushNotUsed,
    Traversal,
)


def add_mat_compose(t: Traversal, combine: Callable[[Any, Any], Any]) -> Traversal:
    """Append the stack commands that combine the value under ``t``'s value (the *right* one) with
    ``t``'s own value (the *left* one) as ``combine(left, right)``. Keep.* become plain pops."""
    if combine is Keep.left:
        return Pop.concat(t)
    if combine is Keep.right:
        return t.concat(Pop)
    if combine is Keep.none:
        return t.concat(Pop).concat(Pop).concat(PushNotUsed)
    return t.concat(Compose(combine, reverse=True))


def apply_island_and_attributes(t: Traversal, attributes: Attributes, island_tag: Optional[IslandTag]) -> Traversal:
    """Wrap ``t`` in its island markers (inside) and attribute push/pop (outside)."""
    if island_tag is not None:
        t = EnterIsland(island_tag).concat(t).concat(ExitIsland)
    if attributes.attribute_list:
        t = PushAttributes(attributes).concat(t).concat(PopAttributes)
    return t


class TraversalBuilder(ABC):
    """Interface shared by the linear, atomic, composite and completed builders."""

    __slots__ = ()

    attributes: Attributes
    in_slots: int
    unwired_outs: int

    @property
    def is_traversal_complete(self) -> bool:
        return self.unwired_outs == 0

    @property
    def traversal(self) -> Traversal:
        raise TypeError(f"{type(self).__name__} has unwired outputs; no traversal yet")

    def offset_of(self, in_) -> int:
        """Slot of the open inlet ``in_`` relative to the start of this builder's traversal."""
        raise TypeError(f"{type(self).__name__}: {in_} is not an open inlet")

    def offset_of_module(self, out) -> int:
        """Offset of the module owning open outlet ``out``, relative to this builder's start."""
        raise TypeError(f"{type(self).__name__}: {out} is not an open outlet")

    def assign(self, out, relative_slot: int) -> "TraversalBuilder":
        """Wire ``out`` to ``offset_of_module(out) + relative_slot``."""
        raise TypeError(f"{type(self).__name__}: {out} is not an open outlet")

    @abstractmethod
    def set_attributes(self, attributes: Attributes) -> "TraversalBuilder":
        """See the concrete builders."""

    @abstractmethod
    def make_island(self, tag: IslandTag) -> "TraversalBuilder":
        """See the concrete builders."""

    @abstractmethod
    def transform_mat(self, fn: Callable[[Any], Any]) -> "TraversalBuilder":
        """See the concrete builders."""
