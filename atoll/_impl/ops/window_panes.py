"""The panes of one key for pane-based sliding windows, with a FIFO aggregation (Two-Stacks) over the window span.

A key's non-empty panes sit in ``panes`` (pane start -> accumulator) and, sorted, in ``starts``; empty panes are
never materialized. On-time firings of a key come in increasing window start order, so the panes of the window
being fired form a FIFO: panes enter at the back as the window slides forward and leave at the front. Two-Stacks
keeps that FIFO aggregated without an inverse: the back holds the entered panes (``back_ps``/``back_acc``, oldest
first) with their running aggregate ``back_agg``, the front is a stack of suffix aggregates (``front_agg[-1]``
covers every front pane; ``front_ps[-1]`` is the oldest), rebuilt from the back when a pane must leave and the
front is empty. A window is then ``front_agg[-1] + back_agg``: each pane is merged a constant number of times
whatever ``size / slide`` is, and a gap between panes costs nothing.

Panes enter the FIFO when a window containing them fires, so they are complete (behind the watermark): only late
elements change them afterwards, and those call ``invalidate()`` (the next firing rebuilds the FIFO from ``panes``).
``hi`` is the bound below which panes have entered the FIFO.

For the invertible helpers (int sums and counts) the engine keeps ``run``, the sum of the panes in ``[run_lo, hi)``,
instead of the two stacks (``invalidate()`` drops it too).

Everything is kept in dicts and parallel lists of plain values, so a pane allocates no container of its own (no
garbage-collector work per pane when the accumulators are numbers).

Accumulators: ``merge(a, b)`` may mutate ``a``, never ``b``: every aggregate held here or returned starts from a
fresh ``create()``, so neither a pane's accumulator nor a held aggregate is ever mutated through another.
"""
from __future__ import annotations

from bisect import bisect_left, insort
from typing import Any, Callable, Dict, List, Tuple

NEG_INF = float("-inf")


class KeyPanes:
    """One key's panes and the FIFO aggregation of the panes of its last fired window."""

    __slots__ = ("key", "panes", "starts", "front_ps", "front_agg", "back_ps", "back_acc", "back_agg", "hi", "dirty",
                 "run", "run_lo")

    def __init__(self, key: Any):
        self.key = key
        self.panes: Dict[Any, Any] = {}
        self.starts: List[Any] = []
        self.front_ps: List[Any] = []    # pane starts, newest first (the top, [-1], is the oldest)
        self.front_agg: List[Any] = []   # aggregate of this pane and the newer front ones
        self.back_ps: List[Any] = []     # pane starts, oldest first
        self.back_acc: List[Any] = []    # their accumulators
        self.back_agg: Any = None        # aggregate of the back (None: empty)
        self.hi: Any = NEG_INF           # panes below ``hi`` have entered the FIFO
        self.dirty: Any = None           # processing-time early firings: the panes changed since the last tick
        self.run: Any = None             # invertible helpers: the int sum of the panes in [run_lo, hi) (None: none)
        self.run_lo: Any = NEG_INF

    def add_pane(self, ps: Any, acc: Any) -> None:
        self.panes[ps] = acc
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
        self.front_ps.clear()
        self.front_agg.clear()
        self.back_ps.clear()
        self.back_acc.clear()
        self.back_agg = None
        self.hi = NEG_INF
        self.run = None

    def window(self, start: Any, end: Any, create: Callable, merge: Callable, pure: bool = False) -> Any:
        """A fresh aggregate of the panes in ``[start, end)``, for an on-time firing; ``start`` must not be below
        the start of the previous call since the last ``invalidate()``. ``pure``: ``merge`` never mutates either
        argument, so the front aggregates are built without fresh copies (a result is still never one of the
        held aggregates)."""
        front_ps, back_ps = self.front_ps, self.back_ps
        hi = self.hi
        if hi <= start:               # the whole FIFO is behind the window (a gap): drop it
            if front_ps or back_ps:
                self.invalidate()
            lo = start
        else:                         # evict the panes before ``start``
            lo = hi
            if front_ps and front_ps[-1] < start:
                front_agg = self.front_agg
                front_ps.pop()
                front_agg.pop()
                while front_ps and front_ps[-1] < start:
                    front_ps.pop()
                    front_agg.pop()
            if not front_ps and back_ps and back_ps[0] < start:
                self._flip(create, merge, pure)
                front_agg = self.front_agg
                while front_ps and front_ps[-1] < start:
                    front_ps.pop()
                    front_agg.pop()
        # the panes in [max(hi, start), end) enter at the back
        starts = self.starts
        i = bisect_left(starts, lo)
        n = len(starts)
        agg = self.back_agg
        if i < n and starts[i] < end:
            panes, back_acc = self.panes, self.back_acc
            if agg is None:
                agg = create()
            while i < n:
                ps = starts[i]
                if ps >= end:
                    break
                acc = panes[ps]
                back_ps.append(ps)
                back_acc.append(acc)
                agg = merge(agg, acc)
                i += 1
            self.back_agg = agg
        self.hi = end
        if front_ps:
            if agg is None:
                return merge(create(), self.front_agg[-1])
            return merge(self.front_agg[-1], agg) if pure else merge(merge(create(), self.front_agg[-1]), agg)
        return create() if agg is None else merge(create(), agg)

    def _flip(self, create: Callable, merge: Callable, pure: bool = False) -> None:
        """Move the back into the front as suffix aggregates (the front is empty)."""
        front_ps, front_agg, back_ps, back_acc = self.front_ps, self.front_agg, self.back_ps, self.back_acc
        if pure:   # nothing is mutated: a suffix is the pane's accumulator merged with the next suffix
            i = len(back_ps) - 1
            agg = back_acc[i]
            front_ps.append(back_ps[i])
            front_agg.append(agg)
            for i in range(i - 1, -1, -1):
                agg = merge(back_acc[i], agg)
                front_ps.append(back_ps[i])
                front_agg.append(agg)
            back_ps.clear()
            back_acc.clear()
            self.back_agg = None
            return
        agg = None
        for i in range(len(back_ps) - 1, -1, -1):
            a = merge(create(), back_acc[i])
            if agg is not None:
                a = merge(a, agg)
            agg = a
            front_ps.append(back_ps[i])
            front_agg.append(a)
        back_ps.clear()
        back_acc.clear()
        self.back_agg = None

    def running_sum(self, start: Any, end: Any) -> Any:
        """The int sum of the panes in ``[start, end)`` for the invertible helpers: ``run`` plus the panes from
        ``hi`` when ``run`` covers ``[start, hi)``, else from the panes themselves; ``None`` at a pane whose
        accumulator is not an int (nothing is changed)."""
        starts, panes = self.starts, self.panes
        run = self.run
        if run is not None and self.run_lo == start:
            i = bisect_left(starts, self.hi)
        else:                     # the first window of the key since a gap or a late element
            run = 0
            i = bisect_left(starts, start)
        n = len(starts)
        while i < n:
            ps = starts[i]
            if ps >= end:
                break
            a = panes[ps]
            if type(a) is not int:
                return None
            run += a
            i += 1
        return run

    def reader(self) -> "KeyPanes":
        """A FIFO of its own over these panes (read only), for a run of windows in increasing start order that
        must not move this one's FIFO (early firings of windows the on-time firings have not reached)."""
        r = KeyPanes(self.key)
        r.panes = self.panes
        r.starts = self.starts
        return r

    def combine(self, start: Any, end: Any, create: Callable, merge: Callable) -> Any:
        """A fresh aggregate of the panes in ``[start, end)`` from the panes themselves (late firings)."""
        starts, panes = self.starts, self.panes
        i = bisect_left(starts, start)
        n = len(starts)
        acc = create()
        while i < n and starts[i] < end:
            acc = merge(acc, panes[starts[i]])
            i += 1
        return acc
