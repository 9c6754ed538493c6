"""RateOps: operators that decouple a fast side from a slow one - conflate, batch, expand, extrapolate,
detach (Pekko's rate-decoupling operators)."""
from __future__ import annotations

from typing import Any, Callable, Iterable, Optional

from .._impl.ops.batch import Batch
from .._impl.ops.detach import Detach
from .._impl.ops.expand import Expand


class RateOps:
    """Mixin for Source and Flow."""

    __slots__ = ()

    def conflate(self, aggregate: Callable[[Any, Any], Any]):
        """While downstream backpressures, fold the arriving elements with ``aggregate(acc, elem)``;
        never backpressures."""
        return self._stage(Batch.conflate(aggregate))

    def conflate_with_seed(self, seed: Callable[[Any], Any], aggregate: Callable[[Any, Any], Any]):
        """``conflate`` starting each aggregate with ``seed(elem)``."""
        return self._stage(Batch.conflate_with_seed(seed, aggregate))

    def batch(self, max: int, seed: Callable[[Any], Any], aggregate: Callable[[Any, Any], Any]):
        """Aggregate up to ``max`` elements while downstream backpressures (``seed`` then
        ``aggregate``); backpressures when full."""
        return self._stage(Batch.batch(max, seed, aggregate))

    def batch_weighted(self, max_weight: int, cost: Callable[[Any], int], seed: Callable[[Any], Any],
                       aggregate: Callable[[Any, Any], Any]):
        """``batch`` bounded by the summed ``cost(elem)`` instead of the count."""
        return self._stage(Batch(max_weight, cost, seed, aggregate, "batch_weighted"))

    def expand(self, extrapolate: Callable[[Any], Iterable[Any]]):
        """When downstream is faster, emit from ``extrapolate(last_elem)``; a new element replaces it."""
        return self._stage(Expand(extrapolate))

    def extrapolate(self, fn: Callable[[Any], Iterable[Any]], initial: Optional[Any] = None):
        """``expand`` emitting each element first, then ``fn(elem)``; ``initial`` (if given) goes first
        when upstream has not produced yet."""
        return self._stage(Expand.extrapolate(fn, initial))

    def detach(self):
        """A one-element buffer between upstream and downstream."""
        return self._stage(Detach())
