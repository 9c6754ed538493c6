"""The panes of one key for pane-based sliding windows, with a FIFO aggregation (Two-Stacks) over the window span.

A key's non-empty panes sit in ``panes`` (pane start -> ``[acc, end of its first window]``) and, sorted, in
``starts``; empty panes are never materialized. On-time firings of a key come in increasing window start order, so
the panes of the window being fired form a FIFO: panes enter at the back as the window slides forward and leave at
the front. Two-Stacks keeps that FIFO aggregated without an inverse: ``back`` holds the entered panes with their
running aggregate ``back_agg``, ``front`` is a stack of suffix aggregates (``front[-1]`` covers every front pane,
oldest first), rebuilt from ``back`` when a pane must leave and ``front`` is empty. A window is then
``front[-1] + back_agg``: each pane is merged a constant number of times whatever ``size / slide`` is, and a gap
between panes costs nothing.

Panes enter the FIFO when a window containing them fires, so they are complete (behind the watermark): only late
elements change them afterwards, and those call ``invalidate()`` (the next firing rebuilds the FIFO from ``panes``).
``hi`` is the bound below which panes have entered the FIFO.

Accumulators: ``merge(a, b)`` may mutate ``a``, never ``b``: every aggregate held here or returned starts from a
fresh ``create()``, so neither a pane's accumulator nor a held aggregate is ever mutated through another.
"""
from __future__ import annotations

from bisect import bisect_left, insort
from typing import Any, Callable, Dict, List, Tuple

NEG_INF = float("-inf")


class KeyPanes:
    """One key's panes and the FIFO aggregation of the panes of its last fired window."""

    __slots__ = ("key", "panes", "starts", "front", "back", "back_agg", "hi")

    def __init__(self, key: Any):
        self.key = key
        self.panes: Dict[Any, list] = {}
        self.starts: List[Any] = []
        self.front: List[Tuple[Any, Any]] = []    # (pane start, aggregate of this pane and the newer front ones)
        self.back: List[Tuple[Any, Any]] = []     # (pane start, pane accumulator), oldest first
        self.back_agg: Any = None                 # aggregate of ``back`` (None: empty)
        self.hi: Any = NEG_INF                    # panes below ``hi`` have entered the FIFO

    def add_pane(self, ps: Any, pane: list) -> None:
        self.panes[ps] = pane
        starts = self.starts
        if not starts or ps > starts[-1]:
            starts.append(ps)
        else:
            insort(starts, ps)
        if ps < self.hi:
            self.invalidate()

    def remove_below(self, bound: Any) -> None:
        """Forget the panes starting before ``bound`` (expired: the oldest ones)."""
        starts, panes = self.starts, self.panes
        i = bisect_left(starts, bound)
        for ps in starts[:i]:
            del panes[ps]
        del starts[:i]

    def neighbours(self, ps: Any) -> Tuple[Any, Any]:
        """The existing panes just before and just after ``ps`` (None where there is none)."""
        starts = self.starts
        i = bisect_left(starts, ps)
        return (starts[i - 1] if i else None), (starts[i] if i < len(starts) else None)

    def invalidate(self) -> None:
        """A pane that entered the FIFO changed (a late element): the next firing rebuilds it."""
        self.front = []
        self.back = []
        self.back_agg = None
        self.hi = NEG_INF

    def window(self, start: Any, end: Any, create: Callable, merge: Callable) -> Any:
        """A fresh aggregate of the panes in ``[start, end)``, for an on-time firing; ``start`` must not be below
        the start of the previous call since the last ``invalidate()``."""
        front, back = self.front, self.back
        if self.hi <= start:          # the whole FIFO is behind the window (a gap): drop it
            if front or back:
                self.front = front = []
                self.back = back = []
                self.back_agg = None
        else:                         # evict the panes before ``start``
            while True:
                if front:
                    if front[-1][0] >= start:
                        break
                    front.pop()
                elif back and back[0][0] < start:
                    self._flip(create, merge)
                else:
                    break
        # the panes in [max(hi, start), end) enter at the back
        lo = self.hi if self.hi > start else start
        starts = self.starts
        i = bisect_left(starts, lo)
        n = len(starts)
        if i < n and starts[i] < end:
            panes, agg = self.panes, self.back_agg
            if agg is None:
                agg = create()
            while i < n:
                ps = starts[i]
                if ps >= end:
                    break
                acc = panes[ps][0]
                back.append((ps, acc))
                agg = merge(agg, acc)
                i += 1
            self.back_agg = agg
        self.hi = end
        if front:
            acc = merge(create(), front[-1][1])
            return acc if self.back_agg is None else merge(acc, self.back_agg)
        return create() if self.back_agg is None else merge(create(), self.back_agg)

    def _flip(self, create: Callable, merge: Callable) -> None:
        """Move ``back`` into ``front`` as suffix aggregates (front is empty)."""
        front, back = self.front, self.back
        agg = None
        for ps, acc in reversed(back):
            a = merge(create(), acc)
            if agg is not None:
                a = merge(a, agg)
            agg = a
            front.append((ps, a))
        back.clear()
        self.back_agg = None

    def combine(self, start: Any, end: Any, create: Callable, merge: Callable) -> Any:
        """A fresh aggregate of the panes in ``[start, end)`` from the panes themselves (late firings)."""
        starts, panes = self.starts, self.panes
        i = bisect_left(starts, start)
        n = len(starts)
        acc = create()
        while i < n and starts[i] < end:
            acc = merge(acc, panes[starts[i]][0])
            i += 1
        return acc
