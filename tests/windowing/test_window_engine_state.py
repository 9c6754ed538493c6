"""Checkpoints of the window engine (snapshot, restore, reset) and cross-checks between its specialised paths."""
from __future__ import annotations

import pickle
import random

import pytest

from atoll._impl.ops.window_engine import WindowEngine
from atoll.errors import StreamError
from atoll.windowing import Aggregate, Session, Sliding, Tumbling

from .kit import END, drive, el, wm


def engines():
    return {
        "tumbling": lambda: WindowEngine("w", Tumbling(10), lambda x: x % 3, Aggregate.collect(), allowed_lateness=5),
        "panes": lambda: WindowEngine("w", Sliding(10, 4), lambda x: x % 3, Aggregate.collect(), allowed_lateness=5),
        "per-window": lambda: WindowEngine("w", Sliding(10, 4), lambda x: x % 3, Aggregate.collect(),
                                           allowed_lateness=5, early_count=3),
        "session": lambda: WindowEngine("w", Session(4), lambda x: x % 3, Aggregate.collect(), allowed_lateness=5),
    }


def script(seed, n=300):
    rnd = random.Random(seed)
    steps, high = [], 0
    for _ in range(n):
        ts = high + rnd.randint(-12, 6)
        high = max(high, ts)
        steps.append(el(ts))
        if rnd.random() < 0.3:
            steps.append(wm(high - rnd.randint(0, 8)))
    return steps + [END]


@pytest.mark.parametrize("kind", list(engines()))
@pytest.mark.parametrize("seed", range(3))
def test_restore_round_trip_continues_identically(kind, seed):
    make = engines()[kind]
    steps = script(seed)
    cut = len(steps) // 2
    first = make()
    drive(first, steps[:cut])
    snap = pickle.loads(pickle.dumps(first.snapshot_state()))
    expected = drive(first, steps[cut:])
    assert expected and first.open_windows() == 0

    second = make()
    drive(second, [el(1000), wm(500)])            # whatever it held is replaced
    second.restore_state(snap)
    assert drive(second, steps[cut:]) == expected
    third = make()
    third.restore_state(snap)                     # a snapshot can be restored twice
    assert drive(third, steps[cut:]) == expected


@pytest.mark.parametrize("kind", list(engines()))
def test_snapshot_is_independent_of_later_mutation(kind):
    e = engines()[kind]()
    drive(e, [el(1), el(2)])
    snap = e.snapshot_state()
    drive(e, [el(3), el(4), el(5)])
    fresh = engines()[kind]()
    fresh.restore_state(snap)
    assert {v for r, _ in drive(fresh, [END]) for v in r.value} == {1, 2}


@pytest.mark.parametrize("kind", list(engines()))
def test_reset_forgets_windows_but_keeps_the_watermark(kind):
    e = engines()[kind]()
    drive(e, [el(11), el(12), wm(5)])
    assert e.open_windows() > 0
    e.reset_state()
    assert e.open_windows() == 0 and e.watermark == 5
    assert drive(e, [el(3), el(20), END]) != []
    assert drive(e, [el(7)]) == [] and e.stats.late_dropped == 1


def test_restore_rejects_a_snapshot_of_another_engine_kind():
    snap = engines()["tumbling"]().snapshot_state()
    with pytest.raises(StreamError, match="^w: cannot restore a TumblingEngine snapshot into a SessionEngine"):
        engines()["session"]().restore_state(snap)


def test_restored_watermark_and_stats():
    e = engines()["tumbling"]()
    drive(e, [el(1), el(12), wm(11)])
    snap = e.snapshot_state()
    f = engines()["tumbling"]()
    f.restore_state(snap)
    assert f.watermark == 11 and f.stats.watermark == 11 and f.stats.open_windows == 2


# ------------------------------------------------------------------------------------------------- cross-checks
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("size, slide, lateness, accumulate",
                         [(10, 4, 0, True), (10, 4, 6, True), (9, 3, 5, False), (6, 6, 3, True), (12, 8, 0, False)])
def test_pane_and_per_window_sliding_agree(seed, size, slide, lateness, accumulate):
    steps = script(seed, 400)
    fold = Aggregate.fold(0, lambda a, e: a + e)
    panes = WindowEngine("w", Sliding(size, slide), lambda x: x % 2, Aggregate.sum(), allowed_lateness=lateness,
                         accumulate=accumulate)
    per_window = WindowEngine("w", Sliding(size, slide), lambda x: x % 2, fold, allowed_lateness=lateness,
                              accumulate=accumulate)
    assert type(panes).__name__ == "PaneSlidingEngine" and type(per_window).__name__ == "FixedWindowEngine"
    out = drive(panes, steps)
    assert out == drive(per_window, steps)
    assert panes.stats.snapshot() == per_window.stats.snapshot()
    assert panes._panes == {} and panes._wins == {}
    if slide == size:
        tumbling = WindowEngine("w", Tumbling(size), lambda x: x % 2, Aggregate.sum(), allowed_lateness=lateness,
                                accumulate=accumulate)
        assert drive(tumbling, steps) == out


@pytest.mark.parametrize("seed", range(6))
def test_in_order_sliding_matches_a_brute_force_model(seed):
    rnd = random.Random(seed)
    ts_list = sorted(rnd.randint(0, 200) for _ in range(150))
    size, slide, offset = 15, 5, 2
    e = WindowEngine("w", Sliding(size, slide, offset), None, Aggregate.sum())
    out = drive(e, [el(t) for t in ts_list] + [END])
    model = {}
    for t in ts_list:
        for start in range(offset - 30, 230, slide):
            if start <= t < start + size:
                model[start] = model.get(start, 0) + t
    assert [(r.start, r.end, r.value, r.timing, ts) for r, ts in out] == \
        [(s, s + size, v, "on_time", s + size - 1) for s, v in sorted(model.items())]


@pytest.mark.parametrize("seed", range(6))
def test_sessions_match_a_brute_force_model(seed):
    rnd = random.Random(seed)
    ts_list = [rnd.randint(0, 300) for _ in range(80)]
    gap = 7
    e = WindowEngine("w", Session(gap), None, Aggregate.collect())
    out = drive(e, [el(t) for t in ts_list] + [END])
    sessions, cur = [], None
    for t in sorted(ts_list):
        if cur and t < cur[1]:
            cur[1] = t + gap
            cur[2].append(t)
        else:
            cur = [t, t + gap, [t]]
            sessions.append(cur)
    assert [(r.start, r.end, sorted(r.value)) for r, _ in out] == [(s, en, v) for s, en, v in sessions]
