"""Pane-based sliding windows (Jet frames): no state per window, only per pane and per key.

A key's elements go into panes of ``gcd(size, slide)`` (``window_panes.KeyPanes``); a window of the key exists
while it is not expired and one of its panes has elements, so a window needs no record of its own. What the
engine keeps per window is one reference: the key's ``KeyPanes`` in the bucket of the window's end (unfired,
``_due``, creation order, under a heap of ends) or of its expiry time ``end + allowed_lateness`` (fired,
``_exp``). The bucket order is the creation order, so windows of one end fire in the order they were opened,
as in the per-window engine. A pane leaves its key when its last window expires, which is when the window
``[s, s + size)`` expiring removes the key's panes below ``s + slide``; a key leaves with its last pane.

An on-time firing reads the window's aggregate from the key's Two-Stacks FIFO; a late firing (allowed
lateness, accumulating) merges the window's panes. For ``Aggregate.sum`` and ``Aggregate.count`` (``+`` merges,
``-`` undoes it) the on-time firing uses a running sum per key instead (subtract-on-evict: the panes entering are
added, the panes leaving before the next window's start subtracted, ``KeyPanes.run``), exact on ints only: the
first accumulator of another type turns the engine to the FIFO for good.
"""
from __future__ import annotations

import math
from bisect import bisect_left
from heapq import heappop, heappush
from typing import Any, Dict, List

from ...windowing.records import Window, make_window
from .window_engine import Recs, Stamps, WindowEngine, max_timestamp
from .window_panes import KeyPanes

_NONE = object()   # no pane there (an accumulator may be None)
_WINDOW_SETTERS = (object.__new__,) + tuple(
    Window.__dict__[name].__set__ for name in ("key", "start", "end", "value", "timing", "superseded"))


class PaneSlidingEngine(WindowEngine):
    """Sliding windows over panes: one ``add`` per element into its pane; a window fires from its key's FIFO
    aggregation of panes (Two-Stacks), so a firing merges a constant number of accumulators amortized, whatever
    ``size / slide``; no inverse is needed. Late firings merge the window's non-empty panes."""

    __slots__ = ("_size", "_slide", "_offset", "_pane", "_pure", "_zero", "_keys", "_due", "_due_heap", "_exp",
                 "_exp_heap", "_unfired_from", "_step")

    @staticmethod
    def applies(spec: Any, key: Any = None, aggregate: Any = None, **opts: Any) -> bool:
        """Panes need ``merge`` and integer bounds, and serve no early firings (per-window deltas)."""
        ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (spec.size, spec.slide, spec.offset))
        return (ints and aggregate is not None and getattr(aggregate, "merge", None) is not None
                and opts.get("early_count") is None and opts.get("early_every") is None)

    def _init_state(self) -> None:
        spec = self.spec
        self._size = spec.size
        self._slide = spec.slide
        self._offset = spec.offset
        self._pane = math.gcd(spec.size, spec.slide)
        # the slide when the panes are the slide and nothing bounds the open windows (``element``'s inline paths), else 0
        self._step = spec.slide if self._pane == spec.slide and self._max_open is None else 0
        self._pure = self._aggregate_pure
        # pure helpers never mutate an accumulator: one ``create()`` serves every new pane
        self._zero = self._create() if self._pure else _NONE
        self._keys: Dict[Any, KeyPanes] = {}      # key -> its panes
        self._due: Dict[Any, List[KeyPanes]] = {}  # end -> the keys with an unfired window ending there
        self._due_heap: List[Any] = []
        self._exp: Dict[Any, List[KeyPanes]] = {}  # end + allowed_lateness -> the keys with a fired window
        self._exp_heap: List[Any] = []
        self._unfired_from = self._fired_below(self.watermark)

    def _fired_below(self, w: Any) -> Any:
        """The bound of the panes with a fired window at watermark ``w``: the last window end ``<= w``. A pane
        ``ps`` has only unfired windows iff ``ps >= `` it (its first window ends after ``ps``, after the bound)."""
        if w == -math.inf or w == math.inf:
            return w
        off, size, slide = self._offset, self._size, self._slide
        return (w - off - size) // slide * slide + off + size

    # -------------------------------------------------------------------------------------------- windows
    def _exists(self, kp: KeyPanes, start: Any) -> bool:
        """Whether the (unexpired) window starting at ``start`` has a pane with elements."""
        starts = kp.starts
        i = bisect_left(starts, start)
        return i < len(starts) and starts[i] < start + self._size

    def _register(self, kp: KeyPanes, end: Any) -> None:
        """A new window of ``kp`` ending at ``end``: unfired (due at ``end``) or already fired (late)."""
        if end <= self.watermark:
            t = end + self._lateness
            bucket = self._exp.get(t)
            if bucket is None:
                self._exp[t] = [kp]
                heappush(self._exp_heap, t)
            else:
                bucket.append(kp)
        else:
            bucket = self._due.get(end)
            if bucket is None:
                self._due[end] = [kp]
                heappush(self._due_heap, end)
            else:
                bucket.append(kp)

    def _open_unfired(self, kp: KeyPanes, lo: Any, hi: Any) -> None:
        """Open the windows of ``kp`` starting in ``[lo, hi]`` (ascending), all ending after the watermark."""
        size, slide = self._size, self._slide
        n = (hi - lo) // slide + 1
        if self._max_open is not None and self.stats.open_windows + n > self._max_open:
            fits = self._max_open - self.stats.open_windows   # open those that fit, then fail on the next
            if fits > 0:
                self._open_unfired(kp, lo, lo + (fits - 1) * slide)
            start = lo + max(fits, 0) * slide
            self._opened(1, kp.key, start, start + size)
        due, heap = self._due, self._due_heap
        get = due.get
        first = lo + size
        # ends as ``first + i * slide`` (not ``range``, which refuses float timestamps; nor a running sum, which
        # would drift from the starts the other paths compute for float slides)
        for end in (range(first, hi + size + 1, slide) if type(first) is int and type(slide) is int
                    else [first + i * slide for i in range(int(n))]):
            bucket = get(end)
            if bucket is None:
                due[end] = [kp]
                heappush(heap, end)
            else:
                bucket.append(kp)
        self.stats.open_windows += n

    # -------------------------------------------------------------------------------------------- events
    def element(self, elem: Any, ts: Any, recs: Recs, stamps: Stamps) -> None:
        key = None if self._key is None else self._key(elem)
        off, p = self._offset, self._pane
        ps = (ts - off) // p * p + off
        kp = self._keys.get(key)
        if kp is not None:
            panes = kp.panes
            acc = panes.get(ps, _NONE)
            if acc is not _NONE:
                if ps >= self._unfired_from:  # every window of the pane is still unfired
                    panes[ps] = self._add(acc, elem)
                    return
                self._slow_element(kp, ps, True, elem, ts, recs, stamps)
                return
            starts = kp.starts
            if starts and ps >= self._unfired_from:   # every window of the pane is unfired
                step = self._step
                lastp = starts[-1]
                if ps > lastp:
                    # a new pane after the key's last one: the common way a pane begins, inline. The windows it
                    # opens are those starting after the last pane's last window (the others hold that pane); the
                    # FIFO and the running sum cover only fired windows (``kp.hi <= _unfired_from <= ps``): untouched
                    end = None   # the end of the one window the pane opens, when it opens one
                    if step:   # panes are the slide: the pane's windows start in (ps - size, ps], the last one at ps
                        if ps - lastp != step:            # across a gap: those after the last pane's last window
                            zero = self._zero
                            panes[ps] = self._add(self._create() if zero is _NONE else zero, elem)
                            starts.append(ps)
                            lo, first = lastp + step, ps - self._size + step
                            self._open_unfired(kp, first if lo < first else lo, ps)
                            return
                        end = ps + self._size
                    elif self._max_open is None:
                        slide = self._slide
                        last = (ps - off) // slide * slide + off          # the start of the pane's last window
                        if (lastp - off) // slide * slide + off + slide == last:   # the last pane's last window + 1
                            end = last + self._size
                    if end is not None:
                        zero = self._zero
                        panes[ps] = self._add(self._create() if zero is _NONE else zero, elem)
                        starts.append(ps)
                        bucket = self._due.get(end)
                        if bucket is None:
                            self._due[end] = [kp]
                            heappush(self._due_heap, end)
                        else:
                            bucket.append(kp)
                        self.stats.open_windows += 1
                        return
                elif step:
                    # a pane before the key's last one (disorder), the panes being the slide: when the windows it
                    # is in all hold a pane already (its neighbours'), it opens none and only takes its place, inline
                    i = bisect_left(starts, ps)
                    size = self._size
                    lo = ps - size + p                       # the pane's windows start in [lo, ps]
                    if i and starts[i - 1] + p > lo:
                        lo = starts[i - 1] + p
                    if starts[i] - size < lo:                # (ps is before the last pane: starts[i] exists)
                        zero = self._zero
                        panes[ps] = self._add(self._create() if zero is _NONE else zero, elem)
                        starts.insert(i, ps)
                        if ps < kp.hi:
                            kp.invalidate()
                        return
        else:
            kp = self._keys[key] = KeyPanes(key)
        self._new_pane(kp, ps, elem, ts, recs, stamps)

    def _new_pane(self, kp: KeyPanes, ps: Any, elem: Any, ts: Any, recs: Recs, stamps: Stamps) -> None:
        """An element into a pane with no elements yet."""
        if ps < self._unfired_from:                              # one of its windows fired, or expired
            self._slow_element(kp, ps, False, elem, ts, recs, stamps)
            return
        size, slide, off = self._size, self._slide, self._offset
        last = (ps - off) // slide * slide + off                 # the pane's windows: first .. last
        first = (ps - size - off) // slide * slide + off + slide
        # every window of the pane is unfired: open those holding no other pane, in ascending start order
        starts = kp.starts
        if not starts or ps > starts[-1]:              # in order: the common case
            lo = first if not starts or starts[-1] < first else (starts[-1] - off) // slide * slide + off + slide
            hi = last
            kp.panes[ps] = self._add(self._create(), elem)
            starts.append(ps)
            if ps < kp.hi:
                kp.invalidate()
        else:
            before, after = kp.neighbours(ps)
            hi = min(last, (after - size - off) // slide * slide + off)
            lo = first if before is None or before < first else (before - off) // slide * slide + off + slide
            kp.add_pane(ps, self._add(self._create(), elem))
        if lo == hi and self._max_open is None:      # one new window, unfired
            self._register(kp, lo + size)
            self.stats.open_windows += 1
        elif lo <= hi:
            self._open_unfired(kp, lo, hi)

    def _slow_element(self, kp: KeyPanes, ps: Any, exists: bool, elem: Any, ts: Any, recs: Recs,
                      stamps: Stamps) -> None:
        """An element into a pane (``exists``: with elements already) of which a window fired or expired."""
        size, slide, off, lateness, w = self._size, self._slide, self._offset, self._lateness, self.watermark
        key = kp.key
        last = (ps - off) // slide * slide + off
        starts = []   # the pane's windows that are not expired, descending
        start = last
        while start + size > ps:
            if start + size + lateness <= w:
                break
            starts.append(start)
            start -= slide
        if not starts:
            if not kp.panes:
                del self._keys[key]
            self._late(elem, ts, recs, stamps)
            return
        if start + size > ps:
            self.stats.partially_late += 1
        if not exists:
            for start in reversed(starts):           # ascending: creation order
                if not self._exists(kp, start):
                    self._opened(1, key, start, start + size)
                    self._register(kp, start + size)
            kp.add_pane(ps, self._add(self._create(), elem))
        else:
            if ps < kp.hi:
                kp.invalidate()
            kp.panes[ps] = self._add(kp.panes[ps], elem)
        for start in reversed(starts):
            if start + size <= w:
                if self._accumulate:
                    self._emit(key, start, start + size, kp.combine(start, start + size, self._create, self._merge),
                               "late", recs, stamps)
                else:
                    self._emit(key, start, start + size, self._add(self._create(), elem), "late", recs, stamps)

    def advance(self, w: Any, recs: Recs, stamps: Stamps) -> None:
        if not w > self.watermark:
            return
        self.watermark = self.stats.watermark = w
        self._unfired_from = self._fired_below(w)
        h = self._due_heap
        if h and h[0] <= w:
            due, create, merge, result, append = self._due, self._create, self._merge, self._result, recs.append
            exp, exp_heap, lateness, size, slide = self._exp, self._exp_heap, self._lateness, self._size, self._slide
            new, set_key, set_start, set_end, set_value, set_timing, set_superseded = _WINDOW_SETTERS
            pure, zero, keys, stats, inv = self._pure, self._zero, self._keys, self.stats, self._invertible
            while h and h[0] <= w:
                end = heappop(h)
                ts = end - 1 if type(end) is int else max_timestamp(end)
                start = end - size
                bound = start + slide   # panes below it have no window after this one
                bucket = due.pop(end)
                t = end + lateness      # the windows of one end expire together
                at_once = t <= w        # (at once without allowed lateness: each as it fires)
                todo = bucket
                if inv and at_once:
                    done = self._fire_sums(bucket, start, end, append)
                    if done < len(bucket):   # an accumulator that is not an int: the FIFO from now on
                        inv = self._invertible = False
                        for other in keys.values():
                            other.invalidate()
                        todo = bucket[done:]
                    else:
                        todo = ()
                for kp in todo:
                    if inv:
                        # subtract-on-evict (sum, count): the running sum of the previous window's overlap with
                        # this one gets the panes in [hi, end), is the value, then loses the panes before the next
                        # window's start; only ints, which add and subtract exactly
                        run = kp.running_sum(start, end)
                        if run is not None:
                            acc = run
                            nxt = start + slide
                            starts, panes = kp.starts, kp.panes
                            n = len(starts)
                            i = bisect_left(starts, start)
                            while i < n:
                                ps = starts[i]
                                if ps >= nxt:
                                    break
                                run -= panes[ps]
                                i += 1
                            kp.run = run
                            kp.run_lo = nxt
                            kp.hi = end
                        else:   # not an int: from now on the FIFO, which merges only (every key starts afresh)
                            inv = self._invertible = False
                            for other in keys.values():
                                other.invalidate()
                            acc = kp.window(start, end, create, merge, pure)
                    elif pure and kp.hi > start:
                        # KeyPanes.window inline for the helpers that never mutate (the per-window path): evict
                        # the panes before ``start`` from the FIFO's front, the panes in [hi, end) enter its back
                        fps = kp.front_ps
                        if fps and fps[-1] < start:
                            fagg = kp.front_agg
                            fps.pop()
                            fagg.pop()
                            while fps and fps[-1] < start:
                                fps.pop()
                                fagg.pop()
                        if not fps:
                            bps = kp.back_ps
                            if bps and bps[0] < start:
                                kp._flip(create, merge, True)
                                fagg = kp.front_agg
                                while fps and fps[-1] < start:
                                    fps.pop()
                                    fagg.pop()
                        starts = kp.starts
                        agg = kp.back_agg
                        hi = kp.hi
                        i = bisect_left(starts, hi)
                        n = len(starts)
                        if i < n and starts[i] < end:
                            panes, bps, bacc = kp.panes, kp.back_ps, kp.back_acc
                            if agg is None:
                                agg = zero
                            while i < n:
                                ps = starts[i]
                                if ps >= end:
                                    break
                                a = panes[ps]
                                bps.append(ps)
                                bacc.append(a)
                                agg = merge(agg, a)
                                i += 1
                            kp.back_agg = agg
                        kp.hi = end
                        if fps:
                            acc = merge(zero, kp.front_agg[-1]) if agg is None else merge(kp.front_agg[-1], agg)
                        else:
                            acc = create() if agg is None else merge(zero, agg)
                    else:
                        acc = kp.window(start, end, create, merge, pure)
                    rec = new(Window)   # make_window inline
                    set_key(rec, kp.key)
                    set_start(rec, start)
                    set_end(rec, end)
                    set_value(rec, acc if result is None else result(acc))
                    set_timing(rec, "on_time")
                    set_superseded(rec, ())
                    append(rec)
                    if at_once:   # _expire_bucket inline: the window expires with the panes it was the last of
                        starts = kp.starts
                        if starts and starts[0] < bound:
                            if len(starts) == 1 or starts[1] >= bound:   # one pane leaves: the common case
                                del kp.panes[starts[0]]
                                del starts[0]
                            else:
                                kp.remove_below(bound)
                            if not starts:
                                del keys[kp.key]
                stamps.extend([ts] * len(bucket))
                if at_once:
                    stats.open_windows -= len(bucket)
                    continue
                fired = exp.get(t)   # the bucket moves whole
                if fired is None:
                    exp[t] = bucket
                    heappush(exp_heap, t)
                else:
                    fired.extend(bucket)
        e = self._exp_heap
        if e and e[0] <= w:
            exp, lateness = self._exp, self._lateness
            while e and e[0] <= w:
                t = heappop(e)
                self._expire_bucket(t - lateness, exp.pop(t))

    def _fire_sums(self, bucket: List[KeyPanes], start: Any, end: Any, append: Any) -> int:
        """The on-time firings of the windows ``[start, end)`` of ``bucket``'s keys for the invertible helpers when
        they expire as they fire (no allowed lateness): each key's running sum gets the panes entering, is the
        value, and loses the panes leaving (below ``start + slide``), which are dropped in the same step.
        Returns how many keys it fired: fewer than ``len(bucket)`` when it meets an accumulator that is not an
        int (that key and the next ones are left as they were, for the FIFO).

        When the panes are the slide (``size % slide == 0``) and the key's previous window was the one just
        before, exactly one pane can enter, ``[end - slide, end)``, and one leave, ``[start, start + slide)``,
        the key's first pane: a dict read and a pop, no search."""
        slide, keys = self._slide, self._keys
        new, set_key, set_start, set_end, set_value, set_timing, set_superseded = _WINDOW_SETTERS
        result = self._result
        bound = start + slide
        entering = end - slide if self._pane == slide else None   # the one pane that can enter, if there is one
        for done, kp in enumerate(bucket):
            panes = kp.panes
            run = kp.run
            if run is not None and kp.run_lo == start and entering is not None:
                a = panes.get(entering, _NONE)      # (kp.hi is end - slide: the previous window's end)
                if a is not _NONE:
                    if type(a) is not int:
                        return done
                    run += a
            else:
                run = kp.running_sum(start, end)
                if run is None:
                    return done
            rec = new(Window)   # make_window inline
            set_key(rec, kp.key)
            set_start(rec, start)
            set_end(rec, end)
            set_value(rec, run if result is None else result(run))
            set_timing(rec, "on_time")
            set_superseded(rec, ())
            append(rec)
            # the panes below ``bound`` have no window after this one: out of the sum (those in the window) and gone
            # (a key with a window has a pane: ``starts`` is not empty)
            starts = kp.starts
            ps = starts[0]
            if ps < bound:
                if len(starts) == 1 or starts[1] >= bound:   # one pane leaves: the common case
                    if ps >= start:
                        run -= panes.pop(ps)
                    else:
                        del panes[ps]
                    del starts[0]
                else:
                    i = bisect_left(starts, bound)
                    for ps in starts[:i]:
                        if ps >= start:
                            run -= panes.pop(ps)
                        else:
                            del panes[ps]
                    del starts[:i]
                if not starts:
                    del keys[kp.key]
                    continue
            kp.run = run
            kp.run_lo = bound
            kp.hi = end
        return len(bucket)

    def _expire_bucket(self, end: Any, bucket: List[KeyPanes]) -> None:
        """The windows ending at ``end`` of these keys expire, with the panes whose last window they are."""
        bound = end - self._size + self._slide   # panes below it have no window ending after ``end``
        keys = self._keys
        for kp in bucket:
            starts = kp.starts
            if starts and starts[0] < bound:
                if len(starts) == 1 or starts[1] >= bound:   # one pane leaves: the common case
                    del kp.panes[starts[0]]
                    del starts[0]
                else:
                    kp.remove_below(bound)
                if not starts:
                    del keys[kp.key]
        self.stats.open_windows -= len(bucket)

    def early(self, recs: Recs, stamps: Stamps) -> None:
        raise TypeError(f"{self.name}: early firings need the engine built with early_count or early_every "
                        f"(this one merges panes and tracks no per-window deltas)")

    # -------------------------------------------------------------------------------------------- checkpoints
    def _state(self) -> Any:
        return {"panes": [((kp.key, ps), kp.panes[ps])
                          for kp in self._keys.values() for ps in kp.starts],
                "due": [(end, [kp.key for kp in self._due[end]]) for end in sorted(self._due)],
                "fired": [(t, [kp.key for kp in self._exp[t]]) for t in sorted(self._exp)]}

    def _load(self, state: Any) -> None:
        keys = self._keys
        for (key, ps), acc, *_ in state["panes"]:    # (an older layout adds the end of the pane's first window)
            kp = keys.get(key)
            if kp is None:
                kp = keys[key] = KeyPanes(key)
            kp.add_pane(ps, acc)
        if "windows" in state:   # a snapshot of the engine that kept one record per window
            # records: (None, n_new, fired, seq, key, start, end)
            for _, _, fired, _, key, _, end in sorted(state["windows"], key=lambda r: r[3]):
                if fired:
                    t = end + self._lateness
                    if t not in self._exp:
                        self._exp[t] = []
                    self._exp[t].append(keys[key])
                else:
                    self._due.setdefault(end, []).append(keys[key])
        else:
            for end, ks in state["due"]:
                self._due[end] = [keys[k] for k in ks]
            for t, ks in state["fired"]:
                self._exp[t] = [keys[k] for k in ks]
        self._unfired_from = self._fired_below(self.watermark)
        self._due_heap = sorted(self._due)
        self._exp_heap = sorted(self._exp)
        self.stats.open_windows = (sum(len(b) for b in self._due.values())
                                   + sum(len(b) for b in self._exp.values()))


class EarlyPaneSlidingEngine(PaneSlidingEngine):
    """Pane sliding with processing-time early firings (``early_every``, accumulating): every tick fires each
    unfired window that received an element since the previous tick, with everything it holds, in
    ``(end, start, creation)`` order - what the per-window engine does with its per-window counters. Here an element
    only marks its pane (``KeyPanes.dirty``); a tick walks the unfired windows by end and fires those holding a
    marked pane, reading each key's windows in increasing start order from a FIFO of its own (``KeyPanes.reader``):
    a merge per pane and window, amortized, whatever ``size / slide``. Count-based early firings (``early_count``)
    and discarding mode keep the per-window engine: both need what each window received since its last firing."""

    __slots__ = ()

    @staticmethod
    def applies(spec: Any, key: Any = None, aggregate: Any = None, **opts: Any) -> bool:
        """Panes (``merge``, integer bounds) with ``early_every``, accumulating, and no ``early_count``."""
        ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (spec.size, spec.slide, spec.offset))
        return (ints and aggregate is not None and getattr(aggregate, "merge", None) is not None
                and opts.get("early_count") is None and opts.get("early_every") is not None
                and opts.get("accumulate", True))

    def element(self, elem: Any, ts: Any, recs: Recs, stamps: Stamps) -> None:
        key = None if self._key is None else self._key(elem)
        off, p = self._offset, self._pane
        ps = (ts - off) // p * p + off
        kp = self._keys.get(key)
        if kp is not None:
            panes = kp.panes
            acc = panes.get(ps, _NONE)
            if acc is not _NONE:
                if ps >= self._unfired_from:  # every window of the pane is still unfired
                    panes[ps] = self._add(acc, elem)
                else:
                    self._slow_element(kp, ps, True, elem, ts, recs, stamps)
                self._mark(kp, ps)
                return
        else:
            kp = self._keys[key] = KeyPanes(key)
        self._new_pane(kp, ps, elem, ts, recs, stamps)
        if self._keys.get(key) is kp:   # (a late element may have left the key without panes: gone)
            self._mark(kp, ps)

    @staticmethod
    def _mark(kp: KeyPanes, ps: Any) -> None:
        d = kp.dirty
        if d is None:
            kp.dirty = {ps}
        else:
            d.add(ps)

    def early(self, recs: Recs, stamps: Stamps) -> None:
        marks = {}
        for kp in self._keys.values():
            if kp.dirty:
                marks[kp] = sorted(kp.dirty)
            kp.dirty = None
        if not marks:
            return
        size, create, merge, pure, due = self._size, self._create, self._merge, self._pure, self._due
        readers: Dict[KeyPanes, KeyPanes] = {}
        for end in sorted(due):
            start = end - size
            for kp in due[end]:
                dl = marks.get(kp)
                if dl is None:
                    continue
                i = bisect_left(dl, start)
                if i == len(dl) or dl[i] >= end:   # no pane of this window changed since the last tick
                    continue
                r = readers.get(kp)
                if r is None:
                    r = readers[kp] = kp.reader()
                self._emit(kp.key, start, end, r.window(start, end, create, merge, pure), "early", recs, stamps)

    # checkpoints: the marked panes too (what the next tick fires)
    def _state(self) -> Any:
        state = super()._state()
        state["dirty"] = [(kp.key, sorted(kp.dirty)) for kp in self._keys.values() if kp.dirty]
        return state

    def _load(self, state: Any) -> None:
        super()._load(state)
        for key, pss in state.get("dirty", ()):
            self._keys[key].dirty = set(pss)
