"""The Traversal: an immutable command list describing how to materialize a graph (Pekko's ``Traversal``).

Commands are kept as a tree of ``Concat`` nodes so that appends are O(1); the materializer recovers
the sequence with a small explicit stack. Wiring is relative: input ports take consecutive slots in
visit order, and each ``MaterializeAtomic`` maps its outputs to slots relative to its own offset (the
slot of its first input), so sub-traversals can be combined without touching their insides.

Besides atoms the list holds a stack language for materialized values (``PushNotUsed``, ``Pop``,
``Transform``, ``Compose``), one for attributes (``PushAttributes``, ``PopAttributes``) and island
markers (``EnterIsland``, ``ExitIsland``).
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from ..markers import NotUsed


class Traversal:
    """Base of all traversal commands."""

    __slots__ = ()

    def concat(self, that: "Traversal") -> "Traversal":
        """This traversal followed by ``that``."""
        return normalize_concat(self, that)

    def rewire_first_to(self, relative_offset: int) -> Optional["Traversal"]:
        """Rewire the output of the first atom to ``relative_offset``; ``None`` if there is no atom here."""
        return None


class _EmptyTraversal(Traversal):
    __slots__ = ()

    def concat(self, that: Traversal) -> Traversal:
        return that

    def __repr__(self):
        return "EmptyTraversal"


EmptyTraversal = _EmptyTraversal()


class MaterializeAtomic(Traversal):
    """Materialize one atomic stage; output ``i`` goes to slot ``offset + out_to_slots[i]``."""

    __slots__ = ("module", "out_to_slots")

    def __init__(self, module, out_to_slots: Sequence[int]):
        self.module = module
        self.out_to_slots = tuple(out_to_slots)

    def rewire_first_to(self, relative_offset: int) -> Traversal:
        return MaterializeAtomic(self.module, (relative_offset,))

    def __repr__(self):
        return f"MaterializeAtomic({self.module!r}, {list(self.out_to_slots)})"


class Concat(Traversal):
    """``first`` then ``next``."""

    __slots__ = ("first", "next")

    def __init__(self, first: Traversal, next: Traversal):
        self.first = first
        self.next = next

    def rewire_first_to(self, relative_offset: int) -> Optional[Traversal]:
        r = self.first.rewire_first_to(relative_offset)
        if r is not None:
            return r.concat(self.next)
        n = self.next.rewire_first_to(relative_offset)
        if n is None:
            return None
        return self.first.concat(n)

    def __repr__(self):
        return f"Concat({self.first!r}, {self.next!r})"


class _PushNotUsed(Traversal):
    __slots__ = ()

    def __repr__(self):
        return "PushNotUsed"


PushNotUsed = _PushNotUsed()


class _Pop(Traversal):
    __slots__ = ()

    def __repr__(self):
        return "Pop"


Pop = _Pop()


class Transform(Traversal):
    """Replace the top of the materialized-value stack by ``fn(top)``."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any], Any]):
        self.fn = fn

    def __repr__(self):
        return f"Transform({getattr(self.fn, '__name__', self.fn)})"


class Compose(Traversal):
    """Pop two values and push ``fn(first, second)`` (``fn(second, first)`` when ``reverse``)."""

    __slots__ = ("fn", "reverse")

    def __init__(self, fn: Callable[[Any, Any], Any], reverse: bool = False):
        self.fn = fn
        self.reverse = reverse

    def __repr__(self):
        return f"Compose({getattr(self.fn, '__name__', self.fn)}, reverse={self.reverse})"


class PushAttributes(Traversal):
    """Push (top of the attribute stack) refined by ``attributes``."""

    __slots__ = ("attributes",)

    def __init__(self, attributes):
        self.attributes = attributes

    def __repr__(self):
        return f"PushAttributes({self.attributes!r})"


class _PopAttributes(Traversal):
    __slots__ = ()

    def __repr__(self):
        return "PopAttributes"


PopAttributes = _PopAttributes()


class IslandTag:
    """Selects which ``PhaseIsland`` plugin materializes an island."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self):
        return f"IslandTag({self.name})"


#: The default island kind: a fused GraphInterpreter.
GRAPH_STAGE_TAG = IslandTag("GraphStage")


class EnterIsland(Traversal):
    """Following commands belong to a new (possibly nested) island."""

    __slots__ = ("tag",)

    def __init__(self, tag: IslandTag):
        self.tag = tag

    def __repr__(self):
        return f"EnterIsland({self.tag.name})"


class _ExitIsland(Traversal):
    __slots__ = ()

    def __repr__(self):
        return "ExitIsland"


ExitIsland = _ExitIsland()


def normalize_concat(first: Traversal, second: Traversal) -> Traversal:
    """Concat with two cheap normalizations: ``PushNotUsed; Pop`` cancels out, and a left-nested
    ``Concat`` is rotated once so trees stay shallow on the left (the materializer's stack)."""
    if second is EmptyTraversal:
        return first
    if first is EmptyTraversal:
        return second
    if first is PushNotUsed:
        if second is Pop:
            return EmptyTraversal
        if type(second) is Concat and second.first is Pop:
            return second.next
        return Concat(PushNotUsed, second)
    if type(first) is Concat:
        return Concat(first.first, Concat(first.next, second))
    return Concat(first, second)


def iterate(traversal: Traversal):
    """Yield the commands of ``traversal`` in order (used by debug printers and tests)."""
    stack = []
    current = traversal
    while True:
        while type(current) is Concat:
            if current.next is not EmptyTraversal:
                stack.append(current.next)
            current = current.first
        if current is not EmptyTraversal:
            yield current
        if not stack:
            return
        current = stack.pop()


__all__ = [
    "Traversal",
    "EmptyTraversal",
    "MaterializeAtomic",
    "Concat",
    "PushNotUsed",
    "Pop",
    "Transform",
    "Compose",
    "PushAttributes",
    "PopAttributes",
    "EnterIsland",
    "ExitIsland",
    "IslandTag",
    "GRAPH_STAGE_TAG",
    "normalize_concat",
    "iterate",
    "NotUsed",
]
