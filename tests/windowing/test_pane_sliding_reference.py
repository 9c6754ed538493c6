"""The pane sliding engines (``PaneSlidingEngine``, ``EarlyPaneSlidingEngine``) against a naive model of the event-time
spec (section 1.5), on many random scripts: elements out of order, watermarks that stall or jump, keys that pause,
gaps longer than a window, late elements (dropped or diverted, into fired windows with allowed lateness, partially
late ones), accumulating and discarding firings, processing-time early firings, and a restore mid-stream.

The model keeps every window as the plain list of its elements (no panes, no FIFO, no buckets): an element goes to
each window ``[s, s + size)`` on the slide grid that contains it and is not expired (``end + lateness > W``); a
window that already fired (``end <= W``) fires again at once, ``late``; at a watermark the unfired windows with
``end <= W`` fire in ``(end, creation)`` order, then the expired ones are forgotten; a tick fires every unfired
window that received an element since its last firing, ``early``. Values are compared exactly for the helpers with
an order-free result (sum, count, min, max) and as multisets for ``collect`` (panes keep pane order)."""
from __future__ import annotations

import pickle
import random
from typing import Any, Dict, List, Tuple

import pytest

from atoll._impl.ops.window_engine import WindowEngine
from atoll.windowing import Aggregate, Late, Sliding

from .kit import EARLY, END, drive, el, wm

INF = float("inf")


class NaiveSliding:
    """Sliding windows by definition: each window holds the list of its elements; nothing is shared or merged."""

    def __init__(self, size, slide, offset, key, lateness, accumulate, divert, fold):
        self.size, self.slide, self.offset, self.key = size, slide, offset, key
        self.lateness, self.accumulate, self.divert, self.fold = lateness, accumulate, divert, fold
        self.w: Any = -INF
        self.wins: Dict[Tuple[Any, int], dict] = {}
        self.seq = 0
        self.late_dropped = self.late_diverted = self.partially_late = 0

    def _emit(self, out, win, elems, timing):
        out.append((("win", win["key"], win["start"], win["end"], self.fold(elems), timing), win["end"] - 1))

    def element(self, x, ts, out):
        key = self.key(x)
        starts = []  # the grid's starts s with ts - size < s <= ts, ascending (ints or floats alike)
        s = (ts - self.offset) // self.slide * self.slide + self.offset
        while s > ts - self.size:
            starts.insert(0, s)
            s -= self.slide
        alive = [s for s in starts if s + self.size + self.lateness > self.w]
        if not alive:
            if self.divert:
                self.late_diverted += 1
                out.append((("late", x, ts, self.w), ts))
            else:
                self.late_dropped += 1
            return
        if len(alive) < len(starts):
            self.partially_late += 1
        for s in alive:                                   # ascending start: creation and emission order
            win = self.wins.get((key, s))
            if win is None:
                win = self.wins[(key, s)] = {"key": key, "start": s, "end": s + self.size, "elems": [],
                                             "delta": [], "fired": s + self.size <= self.w, "seq": self.seq}
                self.seq += 1
            win["elems"].append(x)
            win["delta"].append(x)
            if win["end"] <= self.w:
                self._emit(out, win, win["elems"] if self.accumulate else [x], "late")
                win["delta"] = []

    def _fire(self, out, win, timing):
        self._emit(out, win, win["elems"] if self.accumulate else win["delta"], timing)
        win["delta"] = []

    def watermark(self, w, out):
        if not w > self.w:
            return
        self.w = w
        due = sorted((win for win in self.wins.values() if not win["fired"] and win["end"] <= w),
                     key=lambda win: (win["end"], win["seq"]))
        for win in due:
            win["fired"] = True
            self._fire(out, win, "on_time")
        for k in [k for k, win in self.wins.items() if win["end"] + self.lateness <= w]:
            del self.wins[k]

    def early(self, out):
        due = sorted((win for win in self.wins.values() if not win["fired"] and win["delta"]),
                     key=lambda win: (win["end"], win["seq"]))
        for win in due:
            self._fire(out, win, "early")

    def run(self, script):
        out: List = []
        for step in script:
            if step[0] == "e":
                self.element(step[1], step[2], out)
            elif step[0] == "w":
                self.watermark(step[1], out)
            elif step[0] == "early":
                self.early(out)
            else:
                self.watermark(INF, out)
        return out


def plain(out, multiset=False):
    """Engine output as the model's tuples (``collect`` values sorted: panes keep pane order, not arrival order)."""
    rows = []
    for rec, ts in out:
        if type(rec) is Late:
            rows.append((("late", rec.value, rec.timestamp, rec.watermark), ts))
        else:
            value = sorted(rec.value) if multiset else rec.value
            rows.append((("win", rec.key, rec.start, rec.end, value, rec.timing), ts))
    return rows


def random_script(rnd: random.Random, n: int, early: bool) -> list:
    """Elements ``(key, value)`` with timestamps up to 15 behind the highest so far, now and then a jump past a
    window, keys that pause; watermarks that lag, stall or repeat; early ticks when asked."""
    steps, high, w = [], rnd.randint(-30, 30), -INF
    for _ in range(n):
        r = rnd.random()
        if r < 0.03:
            high += rnd.randint(15, 60)
        ts = high + rnd.randint(-15, 4)
        high = max(high, ts)
        key = rnd.randrange(3)
        if (ts // 20) % 3 != key:                      # key k pauses one 20-tick period in three
            steps.append(el((key, rnd.randint(-50, 50)), ts))
        if rnd.random() < 0.25:
            w = high - rnd.randint(0, 12) if rnd.random() < 0.9 else w   # (a non-advancing one now and then)
            steps.append(wm(w))
        if early and rnd.random() < 0.15:
            steps.append(EARLY)
    return steps + [END]


HELPERS = {
    "sum": (lambda: Aggregate.sum(lambda e: e[1]), lambda xs: sum(e[1] for e in xs), False),
    "count": (Aggregate.count, len, False),
    "min": (lambda: Aggregate.min(lambda e: e[1]), lambda xs: min((e[1] for e in xs), default=None), False),
    "collect": (Aggregate.collect, lambda xs: sorted(xs), True),
}


def key_of(e):
    return e[0]


def engine(size, slide, offset, helper, lateness, accumulate, early, divert):
    return WindowEngine("w", Sliding(size, slide, offset), key_of, HELPERS[helper][0](), allowed_lateness=lateness,
                        accumulate=accumulate, early_every=1.0 if early else None, divert_late=divert)


CASES = [  # size, slide, offset, lateness, accumulate, early, divert
    (12, 12, 0, 0, True, False, False),
    (12, 4, 0, 0, True, False, True),
    (12, 3, 5, 7, True, False, False),
    (12, 1, -3, 0, True, False, True),
    (10, 2, 1, 30, True, False, True),
    (12, 8, 0, 5, True, False, False),           # panes of gcd(12, 8) = 4: two panes per slide
    (9, 3, 2, 6, False, False, True),            # discarding
    (12, 4, 0, 0, False, False, False),
    (12, 4, 0, 0, True, True, False),            # early ticks
    (12, 2, 3, 9, True, True, True),
    (10, 5, -2, 20, True, True, False),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "size{}-slide{}-off{}-late{}-{}{}{}".format(
    c[0], c[1], c[2], c[3], "acc" if c[4] else "disc", "-early" if c[5] else "", "-divert" if c[6] else ""))
@pytest.mark.parametrize("helper", sorted(HELPERS))
@pytest.mark.parametrize("seed", range(5))
def test_pane_engines_equal_the_naive_model(case, helper, seed):
    size, slide, offset, lateness, accumulate, early, divert = case
    rnd = random.Random(f"{case}-{helper}-{seed}")
    script = random_script(rnd, 300, early)
    e = engine(size, slide, offset, helper, lateness, accumulate, early, divert)
    assert type(e).__name__ == ("EarlyPaneSlidingEngine" if early else "PaneSlidingEngine")
    fold, multiset = HELPERS[helper][1], HELPERS[helper][2]
    model = NaiveSliding(size, slide, offset, key_of, lateness, accumulate, divert, fold)
    want = model.run(script)
    got = plain(drive(e, script), multiset)
    assert got == want
    assert (e.stats.late_dropped, e.stats.late_diverted, e.stats.partially_late) == \
        (model.late_dropped, model.late_diverted, model.partially_late)
    assert e.open_windows() == 0 and e._keys == {} and e._due == {} and e._exp == {}
    assert any(r[0][0] == "win" for r in want)

    # cut anywhere, snapshot, restore into a fresh engine: the rest is the same
    cut = rnd.randrange(1, len(script))
    first = engine(size, slide, offset, helper, lateness, accumulate, early, divert)
    head = plain(drive(first, script[:cut]), multiset)
    second = engine(size, slide, offset, helper, lateness, accumulate, early, divert)
    second.restore_state(pickle.loads(pickle.dumps(first.snapshot_state())))
    assert head + plain(drive(second, script[cut:]), multiset) == want


def test_the_random_scripts_reach_every_path():
    """The scripts above are not all easy: late firings, dropped and partially late elements, early firings and
    windows of a key reopening after a pause all occur (the model's own counts, summed over some seeds)."""
    seen = {"late": 0, "early": 0, "dropped": 0, "partial": 0}
    for seed in range(5):
        for lateness in (0, 9):
            script = random_script(random.Random(seed), 300, True)
            model = NaiveSliding(12, 2, 3, key_of, lateness, True, False, len)
            out = model.run(script)
            seen["late"] += sum(1 for r, _ in out if r[-1] == "late")
            seen["early"] += sum(1 for r, _ in out if r[-1] == "early")
            seen["dropped"] += model.late_dropped
            seen["partial"] += model.partially_late
    assert all(seen.values()), seen


@pytest.mark.parametrize("seed", range(4))
def test_a_sum_subtracts_only_ints_and_turns_to_the_fifo_at_the_first_other_value(seed):
    """Sum and count keep a running sum per key (add the panes entering, subtract those leaving), which is exact
    on ints only: at the first pane holding anything else (here halves, whose sums are exact in any order, so the
    model can compare) the engine turns to the merging FIFO for good, with the same results."""
    rnd = random.Random(seed)
    script = random_script(rnd, 300, False)
    half = len(script) // 2
    script = script[:half] + [("e", (e[1][0], e[1][1] + 0.5), e[2]) if e[0] == "e" else e for e in script[half:]]
    e = engine(12, 3, 1, "sum", 5, True, False, True)
    assert e._invertible
    model = NaiveSliding(12, 3, 1, key_of, 5, True, True, HELPERS["sum"][1])
    got, want = plain(drive(e, script)), model.run(script)
    assert got == want
    assert [type(r[0][4]) for r in got if r[0][0] == "win"] == [type(r[0][4]) for r in want if r[0][0] == "win"]
    assert not e._invertible and any(type(r[0][4]) is float for r in got if r[0][0] == "win")
    assert not engine(12, 3, 1, "min", 5, True, False, True)._invertible
    assert engine(12, 3, 1, "count", 5, True, False, True)._invertible


@pytest.mark.parametrize("case", [c for c in CASES if not c[5]], ids=lambda c: "size{}-slide{}-off{}-late{}".format(
    c[0], c[1], c[2], c[3]))
@pytest.mark.parametrize("helper", ["sum", "collect"])
def test_float_timestamps_equal_the_naive_model(case, helper):
    """Float timestamps and watermarks (the scripts' plus 0.5) with int sizes and slides: the same firings as the
    model. Opening several windows of a pane at once went through ``range``, which refuses floats (``TypeError``
    at a key's first element)."""
    size, slide, offset, lateness, accumulate, early, divert = case
    rnd = random.Random(f"float-{case}-{helper}")
    script = [(s[0], s[1], s[2] + 0.5) if s[0] == "e" else ("w", s[1] + 0.5) if s[0] == "w" else s
              for s in random_script(rnd, 300, False)]
    e = engine(size, slide, offset, helper, lateness, accumulate, False, divert)
    assert type(e).__name__ == "PaneSlidingEngine"
    fold, multiset = HELPERS[helper][1], HELPERS[helper][2]
    model = NaiveSliding(size, slide, offset, key_of, lateness, accumulate, divert, fold)
    want = [row for row, _ts in model.run(script)]
    got = [row for row, _ts in plain(drive(e, script), multiset)]  # (a float window's own timestamp is below its end)
    assert got == want
    assert any(row[0] == "win" and type(row[2]) is float for row in got)
