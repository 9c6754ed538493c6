"""PoolOps: ``map_pool`` - elements through a pool of Ray actors built once each from a factory (a model
loads once per actor), with a ``PoolControl`` materialized value."""
from __future__ import annotations


class PoolOps:
    """Mixin for Source and Flow."""

    __slots__ = ()
