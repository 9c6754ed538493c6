"""Window engines for aligned windows: tumbling and sliding with one accumulator per window.

Pane-based sliding is in ``window_engine_panes`` (re-exported here).

A window state is a list ``[acc, n_new, fired, seq, key, start, end]`` (lists: the cheapest mutable record).
Unfired windows sit in a bucket per ``end`` (creation order) under a heap of ends, fired ones in a bucket per
expiry time ``end + allowed_lateness``, so a watermark touches only the windows it fires or expires.
"""
from __future__ import annotations

from heapq import heappop, heappush
from typing import Any, Dict, List

from .window_engine import Recs, Stamps, WindowEngine

ACC, NEW, FIRED, SEQ, KEY, START, END = range(7)


class FixedWindowEngine(WindowEngine):
    """Sliding windows (any slide), one accumulator per window: an element costs ``size/slide`` aggregate calls."""

    __slots__ = ("_size", "_slide", "_offset", "_wins", "_due", "_due_heap", "_exp", "_exp_heap")

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

    def _fire(self, s: list, timing: str, recs: Recs, stamps: Stamps) -> None:
        self._emit(s[KEY], s[START], s[END], s[ACC], timing, recs, stamps)
        s[NEW] = 0
        if not self._accumulate:
            s[ACC] = self._create()

    # -------------------------------------------------------------------------------------------- events
    def element(self, elem: Any, ts: Any, recs: Recs, stamps: Stamps) -> None:
        key = None if self._key is None else self._key(elem)
        size, slide, off, lateness, w = self._size, self._slide, self._offset, self._lateness, self.watermark
        last = (ts - off) // slide * slide + off
        if last + size + lateness <= w:
            self._late(elem, ts, recs, stamps)
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
                self._fire(s, "late", recs, stamps)
            else:
                s[NEW] += 1
                if s[NEW] == early:
                    self._fire(s, "early", recs, stamps)

    def advance(self, w: Any, recs: Recs, stamps: Stamps) -> None:
        if not w > self.watermark:
            return
        self.watermark = self.stats.watermark = w
        h = self._due_heap
        if h and h[0] <= w:
            due, to_expire, fire = self._due, self._to_expire, self._fire
            while h and h[0] <= w:
                for s in due.pop(heappop(h)):
                    s[FIRED] = True
                    fire(s, "on_time", recs, stamps)
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

    def early(self, recs: Recs, stamps: Stamps) -> None:
        pending = [s for s in self._wins.values() if s[NEW] and not s[FIRED]]
        pending.sort(key=lambda s: (s[END], s[START], s[SEQ]))
        for s in pending:
            self._fire(s, "early", recs, stamps)

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

    __slots__ = ()

    def element(self, elem: Any, ts: Any, recs: Recs, stamps: Stamps) -> None:
        key = None if self._key is None else self._key(elem)
        off = self._offset
        start = (ts - off) // self._size * self._size + off
        s = self._wins.get((key, start))
        if s is None:
            end = start + self._size
            if end + self._lateness <= self.watermark:
                self._late(elem, ts, recs, stamps)
                return
            s = self._open(key, start, end)
        s[0] = self._add(s[0], elem)
        if s[2]:
            self._fire(s, "late", recs, stamps)
        else:
            n = s[1] = s[1] + 1
            if n == self._early_count:
                self._fire(s, "early", recs, stamps)


from .window_engine_panes import PaneSlidingEngine  # noqa: E402,F401 - re-exported beside the others
