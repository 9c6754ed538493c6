"""Window engines for aligned windows: tumbling, sliding with one accumulator per window, sliding with panes.

A window state is a list ``[acc, n_new, fired, seq, key, start, end]`` (lists: the cheapest mutable record).
Unfired windows sit in a bucket per ``end`` (creation order) under a heap of ends, fired ones in a bucket per
expiry time ``end + allowed_lateness``, so a watermark touches only the windows it fires or expires.
"""
from __future__ import annotations

import math
from heapq import heappop, heappush
from typing import Any, Dict, List

from ...windowing import Window
from .window_engine import Out, WindowEngine, max_timestamp
from .window_panes import KeyPanes

ACC, NEW, FIRED, SEQ, KEY, START, END = range(7)


class FixedWindowEngine(WindowEngine):
    """Sliding windows (any slide), one accumulator per window: an element costs ``size/slide`` aggregate calls."""

    def _init_state(self) -> None:
        spec = self.spec
        self._size = spec.size
        self._slide = getattr(spec, "slide", spec.size)
        self._offset = spec.offset
        self._wins: Dict[Any, list] = {}          # (key, start) -> state
        self._due: Dict[Any, List[list]] = {}     # end -> unfired states, creation order
        self._due_heap: List[Any] = []
        self._exp: Dict[Any, List[list]] = {}     # end + allowed_lateness -> fired states
        self._exp_heap: List[Any] = []

    # -------------------------------------------------------------------------------------------- window states
    def _open(self, key: Any, start: Any, end: Any) -> list:
        self._opened(1, key, start, end)
        s = [self._create(), 0, False, self._seq, key, start, end]
        self._seq += 1
        self._wins[(key, start)] = s
        if end <= self.watermark:
            s[FIRED] = True
            self._to_expire(s)
        else:
            self._to_due(s)
        return s

    def _to_due(self, s: list) -> None:
        end = s[END]
        bucket = self._due.get(end)
        if bucket is None:
            self._due[end] = [s]
            heappush(self._due_heap, end)
        else:
            bucket.append(s)

    def _to_expire(self, s: list) -> None:
        t = s[END] + self._lateness
        bucket = self._exp.get(t)
        if bucket is None:
            self._exp[t] = [s]
            heappush(self._exp_heap, t)
        else:
            bucket.append(s)

    def _fire(self, s: list, timing: str, out: Out) -> None:
        self._emit(s[KEY], s[START], s[END], s[ACC], timing, out)
        s[NEW] = 0
        if not self._accumulate:
            s[ACC] = self._create()

    # -------------------------------------------------------------------------------------------- events
    def on_element(self, elem: Any, ts: Any, out: Out) -> None:
        key = None if self._key is None else self._key(elem)
        size, slide, off, lateness, w = self._size, self._slide, self._offset, self._lateness, self.watermark
        last = (ts - off) // slide * slide + off
        if last + size + lateness <= w:
            self._late(elem, ts, out)
            return
        starts = [last]
        k = 1
        while True:
            start = last - k * slide
            if start + size <= ts:
                break
            if start + size + lateness <= w:
                self.stats.partially_late += 1
                break
            starts.append(start)
            k += 1
        wins, add, early = self._wins, self._add, self._early_count
        for start in reversed(starts):  # ascending ends: the emission order
            s = wins.get((key, start))
            if s is None:
                s = self._open(key, start, start + size)
            s[ACC] = add(s[ACC], elem)
            if s[FIRED]:
                self._fire(s, "late", out)
            else:
                s[NEW] += 1
                if s[NEW] == early:
                    self._fire(s, "early", out)

    def on_watermark(self, w: Any, out: Out) -> None:
        if not w > self.watermark:
            return
        self.watermark = self.stats.watermark = w
        h = self._due_heap
        if h and h[0] <= w:
            due, to_expire, fire = self._due, self._to_expire, self._fire
            while h and h[0] <= w:
                for s in due.pop(heappop(h)):
                    s[FIRED] = True
                    fire(s, "on_time", out)
                    to_expire(s)
        e = self._exp_heap
        if e and e[0] <= w:
            self._expire(w)

    def _expire(self, w: Any) -> None:
        e, exp, wins = self._exp_heap, self._exp, self._wins
        n = 0
        while e and e[0] <= w:
            for s in exp.pop(heappop(e)):
                del wins[(s[KEY], s[START])]
                n += 1
        self.stats.open_windows -= n

    def fire_early(self, out: Out) -> None:
        pending = [s for s in self._wins.values() if s[NEW] and not s[FIRED]]
        pending.sort(key=lambda s: (s[END], s[START], s[SEQ]))
        for s in pending:
            self._fire(s, "early", out)

    # -------------------------------------------------------------------------------------------- checkpoints
    def _state(self) -> Any:
        return {"windows": [tuple(s) for s in self._wins.values()]}

    def _load(self, state: Any) -> None:
        for t in sorted(state["windows"], key=lambda t: t[SEQ]):
            s = list(t)
            self._wins[(s[KEY], s[START])] = s
            (self._to_expire if s[FIRED] else self._to_due)(s)
        self.stats.open_windows = len(self._wins)


class TumblingEngine(FixedWindowEngine):
    """Tumbling windows: an element costs one dict lookup and one ``add``."""

    def on_element(self, elem: Any, ts: Any, out: Out) -> None:
        key = None if self._key is None else self._key(elem)
        off = self._offset
        start = (ts - off) // self._size * self._size + off
        s = self._wins.get((key, start))
        if s is None:
            end = start + self._size
            if end + self._lateness <= self.watermark:
                self._late(elem, ts, out)
                return
            s = self._open(key, start, end)
        s[0] = self._add(s[0], elem)
        if s[2]:
            self._fire(s, "late", out)
        else:
            n = s[1] = s[1] + 1
            if n == self._early_count:
                self._fire(s, "early", out)


class PaneSlidingEngine(FixedWindowEngine):
    """Sliding windows over panes of ``gcd(size, slide)`` (Jet frames): one ``add`` per element into its pane; a
    window fires from its key's FIFO aggregation of panes (``window_panes.KeyPanes``, Two-Stacks), so a firing
    merges a constant number of accumulators amortized, whatever ``size / slide``; no inverse is needed. Late
    firings merge the window's non-empty panes. Window states keep only firing bookkeeping; their ``acc`` slot holds
    the key's ``KeyPanes``. A window exists while it is not expired and one of its panes has elements."""

    @staticmethod
    def applies(spec: Any, key: Any = None, aggregate: Any = None, **opts: Any) -> bool:
        """Panes need ``merge`` and integer bounds, and serve no early firings (per-window deltas)."""
        ints = all(isinstance(v, int) and not isinstance(v, bool) for v in (spec.size, spec.slide, spec.offset))
        return (ints and aggregate is not None and getattr(aggregate, "merge", None) is not None
                and opts.get("early_count") is None and opts.get("early_every") is None)

    def _init_state(self) -> None:
        super()._init_state()
        self._pane = math.gcd(self.spec.size, self.spec.slide)
        self._keys: Dict[Any, KeyPanes] = {}         # key -> its panes
        self._pane_exp: Dict[Any, List[Any]] = {}    # expiry time -> [(KeyPanes, pane start)]
        self._pane_exp_heap: List[Any] = []

    def _open(self, key: Any, start: Any, end: Any) -> list:
        s = super()._open(key, start, end)
        s[ACC] = self._keys[key]
        return s

    def _fire(self, s: list, timing: str, out: Out) -> None:
        """A late firing (accumulating): the window's panes merged."""
        self._emit(s[KEY], s[START], s[END], s[ACC].combine(s[START], s[END], self._create, self._merge), timing,
                   out)

    def on_element(self, elem: Any, ts: Any, out: Out) -> None:
        key = None if self._key is None else self._key(elem)
        off, p = self._offset, self._pane
        ps = (ts - off) // p * p + off
        kp = self._keys.get(key)
        if kp is not None:
            pane = kp.panes.get(ps)
            if pane is not None:
                if pane[1] > self.watermark:  # every window of the pane is still unfired
                    pane[0] = self._add(pane[0], elem)
                    return
                self._slow_element(kp, ps, pane, elem, ts, out)
                return
        else:
            kp = self._keys[key] = KeyPanes(key)
        self._new_pane(kp, ps, elem, ts, out)

    def _new_pane(self, kp: KeyPanes, ps: Any, elem: Any, ts: Any, out: Out) -> None:
        """An element into a pane with no elements yet."""
        size, slide, off = self._size, self._slide, self._offset
        last = (ps - off) // slide * slide + off                 # the pane's windows: first .. last
        first = (ps - size - off) // slide * slide + off + slide
        if first + size <= self.watermark:                       # one of its windows fired, or expired
            self._slow_element(kp, ps, None, elem, ts, out)
            return
        # every window of the pane is unfired: open those holding no other pane, in ascending start order
        starts = kp.starts
        if not starts or ps > starts[-1]:              # in order: the common case
            lo = first if not starts or starts[-1] < first else (starts[-1] - off) // slide * slide + off + slide
            hi = last
        else:
            before, after = kp.neighbours(ps)
            hi = min(last, (after - size - off) // slide * slide + off)
            lo = first if before is None or before < first else (before - off) // slide * slide + off + slide
        kp.add_pane(ps, [self._add(self._create(), elem), first + size])
        self._pane_expires(kp, ps, last + size + self._lateness)
        if lo <= hi:
            self._open_unfired(kp, lo, hi)

    def _open_unfired(self, kp: KeyPanes, lo: Any, hi: Any) -> None:
        """Open the windows of ``kp`` starting in ``[lo, hi]`` (ascending), all ending after the watermark."""
        key, size, slide = kp.key, self._size, self._slide
        if self._max_open is not None:
            start = lo
            while start <= hi:
                self._open(key, start, start + size)
                start += slide
            return
        wins, due, heap, seq = self._wins, self._due, self._due_heap, self._seq
        start = lo
        while start <= hi:
            end = start + size
            s = [kp, 0, False, seq, key, start, end]
            seq += 1
            wins[(key, start)] = s
            bucket = due.get(end)
            if bucket is None:
                due[end] = [s]
                heappush(heap, end)
            else:
                bucket.append(s)
            start += slide
        self.stats.open_windows += seq - self._seq
        self._seq = seq

    def _slow_element(self, kp: KeyPanes, ps: Any, pane: Any, elem: Any, ts: Any, out: Out) -> None:
        """An element into a pane of which a window fired or expired."""
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
            self._late(elem, ts, out)
            return
        if start + size > ps:
            self.stats.partially_late += 1
        wins = self._wins
        if pane is None:
            first = last
            while first - slide + size > ps:
                first -= slide
            pane = [self._create(), first + size]
            kp.add_pane(ps, pane)
            self._pane_expires(kp, ps, last + size + lateness)
            for start in reversed(starts):
                if (key, start) not in wins:
                    self._open(key, start, start + size)
        elif ps < kp.hi:
            kp.invalidate()
        pane[0] = self._add(pane[0], elem)
        for start in reversed(starts):
            if start + size <= w:
                if self._accumulate:
                    self._fire(wins[(key, start)], "late", out)
                else:
                    self._emit(key, start, start + size, self._add(self._create(), elem), "late", out)

    def on_watermark(self, w: Any, out: Out) -> None:
        if not w > self.watermark:
            return
        self.watermark = self.stats.watermark = w
        h = self._due_heap
        if h and h[0] <= w:
            due, create, merge, result, append = self._due, self._create, self._merge, self._result, out.append
            exp, exp_heap, lateness = self._exp, self._exp_heap, self._lateness
            while h and h[0] <= w:
                end = heappop(h)
                ts = max_timestamp(end)
                bucket = due.pop(end)
                for s in bucket:
                    s[FIRED] = True
                    start = s[START]
                    acc = s[ACC].window(start, end, create, merge)
                    append((Window(s[KEY], start, end, acc if result is None else result(acc), "on_time"), ts))
                t = end + lateness   # the windows of one end expire together: the bucket moves whole
                fired = exp.get(t)
                if fired is None:
                    exp[t] = bucket
                    heappush(exp_heap, t)
                else:
                    fired.extend(bucket)
        e = self._exp_heap
        if e and e[0] <= w:
            self._expire(w)

    def _expire(self, w: Any) -> None:
        super()._expire(w)
        # a pane expires with its last window, so an expiry of panes always comes with one of windows
        h, pane_exp, keys = self._pane_exp_heap, self._pane_exp, self._keys
        while h and h[0] <= w:
            for kp, ps in pane_exp.pop(heappop(h)):
                kp.remove_pane(ps)
                if not kp.panes:
                    del keys[kp.key]

    def _pane_expires(self, kp: KeyPanes, ps: Any, t: Any) -> None:
        bucket = self._pane_exp.get(t)
        if bucket is None:
            self._pane_exp[t] = [(kp, ps)]
            heappush(self._pane_exp_heap, t)
        else:
            bucket.append((kp, ps))

    def fire_early(self, out: Out) -> None:
        raise TypeError(f"{self.name}: early firings need the engine built with early_count or early_every "
                        f"(this one merges panes and tracks no per-window deltas)")

    def _state(self) -> Any:
        return {"windows": [(None,) + tuple(s[1:]) for s in self._wins.values()],
                "panes": [((kp.key, ps), kp.panes[ps][0], kp.panes[ps][1])
                          for kp in self._keys.values() for ps in kp.starts]}

    def _load(self, state: Any) -> None:
        size, slide, off, lateness = self._size, self._slide, self._offset, self._lateness
        for (key, ps), acc, first_end in state["panes"]:
            kp = self._keys.get(key)
            if kp is None:
                kp = self._keys[key] = KeyPanes(key)
            kp.add_pane(ps, [acc, first_end])
            self._pane_expires(kp, ps, (ps - off) // slide * slide + off + size + lateness)
        super()._load(state)
        for s in self._wins.values():
            s[ACC] = self._keys[s[KEY]]
