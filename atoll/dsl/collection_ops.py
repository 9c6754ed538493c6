"""CollectionOps: small element and collection operators (collect, fold_while, grouped_weighted ...), resource
and error-completion operators, and their Source/Sink factories."""
from __future__ import annotations


class CollectionOps:
    """Mixin for Source and Flow."""

    __slots__ = ()


class CollectionSources:
    """Mixin for Source."""

    __slots__ = ()


class CollectionSinks:
    """Mixin for Sink."""

    __slots__ = ()
