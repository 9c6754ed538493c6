"""AsyncOps: operators whose function returns an awaitable, a future or a Ray ObjectRef (Pekko's ``mapAsync``
family), and their Source/Sink factories."""
from __future__ import annotations


class AsyncOps:
    """Mixin for Source and Flow."""

    __slots__ = ()


class AsyncSources:
    """Mixin for Source."""

    __slots__ = ()


class AsyncSinks:
    """Mixin for Sink."""

    __slots__ = ()
