"""Session windows: per key a start-sorted list of disjoint sessions, merged as elements bridge them.

A session is a list ``[acc, n_new, fired, seq, key, start, end, emitted, due_tok, exp_tok]``; ``emitted`` holds the
bounds under which it (or sessions merged into it) was emitted and not yet superseded. Sessions grow and merge, so
the firing and expiry heaps hold ``(time, token, session)`` entries checked lazily: an entry counts only while its
token is the session's current one, and a session that grew past the popped time is pushed again.
"""
from __future__ import annotations

from heapq import heappop, heappush
from itertools import count
from typing import Any, Dict, List

from .window_engine import Recs, Stamps, WindowEngine

ACC, NEW, FIRED, SEQ, KEY, START, END, EMITTED, DUE, EXP = range(10)


def _order(s: list) -> tuple:
    return s[END], s[START], s[SEQ]


class SessionEngine(WindowEngine):
    """Session windows (gap-separated activity per key); a key's entry is deleted with its last session."""

    __slots__ = ("_gap", "_sessions", "_due_heap", "_exp_heap", "_tokens")

    def _init_state(self) -> None:
        self._gap = self.spec.gap
        self._sessions: Dict[Any, List[list]] = {}
        self._due_heap: List[tuple] = []
        self._exp_heap: List[tuple] = []
        self._tokens = count()

    # -------------------------------------------------------------------------------------------- scheduling
    def _schedule_fire(self, s: list) -> None:
        tok = s[DUE] = next(self._tokens)
        heappush(self._due_heap, (s[END], tok, s))

    def _schedule_expiry(self, s: list) -> None:
        tok = s[EXP] = next(self._tokens)
        heappush(self._exp_heap, (s[END] + self._lateness, tok, s))

    def _fire(self, s: list, timing: str, recs: Recs, stamps: Stamps) -> None:
        bounds = (s[START], s[END])
        superseded = tuple(sorted({b for b in s[EMITTED] if b != bounds}))
        s[EMITTED] = [bounds]
        self._emit(s[KEY], s[START], s[END], s[ACC], timing, recs, stamps, superseded)
        s[NEW] = 0
        if not self._accumulate:
            s[ACC] = self._create()

    # -------------------------------------------------------------------------------------------- events
    def element(self, elem: Any, ts: Any, recs: Recs, stamps: Stamps) -> None:
        key = None if self._key is None else self._key(elem)
        end = ts + self._gap
        w = self.watermark
        sessions = self._sessions.get(key)
        s = None
        if sessions is not None:
            last = sessions[-1]
            if last[START] <= ts < last[END]:    # the common case: inside the newest session
                s = last
                if end > s[END]:
                    s[END] = end
            else:
                s = self._merge_overlapping(sessions, ts, end)
        if s is None:                            # no live session overlaps [ts, ts + gap)
            if end + self._lateness <= w:
                self._late(elem, ts, recs, stamps)
                return
            s = self._new_session(key, ts, end, sessions)
        s[ACC] = self._add(s[ACC], elem)
        s[NEW] += 1
        if s[END] <= w:                          # behind the watermark: fires again now
            self._fire(s, "late", recs, stamps)
            return
        if s[FIRED]:                             # grew past the watermark: on time again
            s[FIRED] = False
            s[EXP] = None
            self._schedule_fire(s)
        early = self._early_count
        if early is not None and s[NEW] >= early:
            self._fire(s, "early", recs, stamps)

    def _new_session(self, key: Any, ts: Any, end: Any, sessions: Any) -> list:
        self._opened(1, key, ts, end)
        s = [self._create(), 0, False, self._seq, key, ts, end, [], None, None]
        self._seq += 1
        if sessions is None:
            self._sessions[key] = [s]
        else:
            i = len(sessions)
            while i and sessions[i - 1][START] > ts:
                i -= 1
            sessions.insert(i, s)
        if end <= self.watermark:
            s[FIRED] = True
            self._schedule_expiry(s)
        else:
            self._schedule_fire(s)
        return s

    def _merge_overlapping(self, sessions: List[list], ts: Any, end: Any) -> Any:
        """Merge every session overlapping ``[ts, end)`` into the first of them, stretched to cover ``[ts, end)``;
        None when there is none."""
        first = None
        n = 0
        for i, s in enumerate(sessions):
            if s[START] >= end:
                break
            if ts < s[END]:
                if first is None:
                    first = i
                n += 1
        if first is None:
            return None
        s = sessions[first]
        if n > 1:
            merge = self._merge
            for o in sessions[first + 1:first + n]:
                s[ACC] = merge(s[ACC], o[ACC])
                s[NEW] += o[NEW]
                s[EMITTED].extend(o[EMITTED])
                s[SEQ] = min(s[SEQ], o[SEQ])
                s[FIRED] = s[FIRED] and o[FIRED]
                if o[END] > s[END]:
                    s[END] = o[END]
                o[DUE] = o[EXP] = None
            del sessions[first + 1:first + n]
            self.stats.open_windows -= n - 1
            if not s[FIRED] and s[DUE] is None:   # a fired session absorbed an unfired one
                s[EXP] = None
                self._schedule_fire(s)
        if ts < s[START]:
            s[START] = ts
        if end > s[END]:
            s[END] = end
        return s

    def advance(self, w: Any, recs: Recs, stamps: Stamps) -> None:
        if not w > self.watermark:
            return
        self.watermark = self.stats.watermark = w
        h = self._due_heap
        if h and h[0][0] <= w:
            due = []
            while h and h[0][0] <= w:
                _, tok, s = heappop(h)
                if tok != s[DUE]:
                    continue
                if s[END] > w:
                    self._schedule_fire(s)
                else:
                    due.append(s)
            due.sort(key=_order)
            for s in due:
                s[FIRED] = True
                s[DUE] = None
                self._fire(s, "on_time", recs, stamps)
                self._schedule_expiry(s)
        e = self._exp_heap
        if e and e[0][0] <= w:
            lateness = self._lateness
            while e and e[0][0] <= w:
                _, tok, s = heappop(e)
                if tok != s[EXP]:
                    continue
                if s[END] + lateness > w:
                    self._schedule_expiry(s)
                    continue
                self._drop(s)

    def _drop(self, s: list) -> None:
        s[DUE] = s[EXP] = None
        key = s[KEY]
        sessions = self._sessions[key]
        for i, o in enumerate(sessions):
            if o is s:
                del sessions[i]
                break
        if not sessions:
            del self._sessions[key]
        self.stats.open_windows -= 1

    def early(self, recs: Recs, stamps: Stamps) -> None:
        pending = [s for sessions in self._sessions.values() for s in sessions if s[NEW] and not s[FIRED]]
        pending.sort(key=_order)
        for s in pending:
            self._fire(s, "early", recs, stamps)

    # -------------------------------------------------------------------------------------------- checkpoints
    def _state(self) -> Any:
        return {"sessions": [tuple(s[:EMITTED]) + (list(s[EMITTED]),)
                             for sessions in self._sessions.values() for s in sessions]}

    def _load(self, state: Any) -> None:
        for t in sorted(state["sessions"], key=lambda t: t[SEQ]):
            s = list(t) + [None, None]
            self._sessions.setdefault(s[KEY], []).append(s)
            if s[FIRED]:
                self._schedule_expiry(s)
            else:
                self._schedule_fire(s)
        for sessions in self._sessions.values():
            sessions.sort(key=lambda s: s[START])
        self.stats.open_windows = sum(len(v) for v in self._sessions.values())
