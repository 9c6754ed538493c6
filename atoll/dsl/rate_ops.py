"""RateOps: operators that decouple a fast side from a slow one - conflate, batch, expand, extrapolate,
detach (Pekko's rate-decoupling operators)."""
from __future__ import annotations


class RateOps:
    """Mixin for Source and Flow."""

    __slots__ = ()
