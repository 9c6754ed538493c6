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
    assert panes._keys == {} and panes._due == {} and panes._exp == {}
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


def gappy_script(seed, n=400, jump=40):
    """Like ``script`` with gaps longer than a window now and then, and keys that pause (elements of a key are
    dropped for a while), so keys have empty panes and windows with no elements between their bursts."""
    rnd = random.Random(seed)
    steps, high = [], 0
    for _ in range(n):
        if rnd.random() < 0.03:
            high += rnd.randint(jump // 2, jump)
        ts = high + rnd.randint(-12, 6)
        high = max(high, ts)
        if (ts // 25) % 3 != ts % 3:             # key ts % 3 pauses one 25-tick period in three
            steps.append(el(ts))
        if rnd.random() < 0.3:
            steps.append(wm(high - rnd.randint(0, 8)))
    return steps + [END]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("slide", [12, 6, 4, 3, 2, 1])
@pytest.mark.parametrize("lateness, accumulate", [(0, True), (7, True), (7, False), (30, True)])
def test_panes_agree_with_per_window_as_the_slide_shrinks_with_late_elements_and_gaps(seed, slide, lateness,
                                                                                       accumulate):
    """The FIFO aggregation of panes against one accumulator per window: late elements into fired windows and
    into panes already aggregated, partially late elements, keys with gaps, restore mid-stream."""
    steps = gappy_script(seed)
    fold = Aggregate.fold(0, lambda a, e: a + e)

    def make(agg):
        return WindowEngine("w", Sliding(12, slide), lambda x: x % 3, agg, allowed_lateness=lateness,
                            accumulate=accumulate)

    panes, per_window = make(Aggregate.sum()), make(fold)
    assert type(panes).__name__ == "PaneSlidingEngine" and type(per_window).__name__ == "FixedWindowEngine"
    out = drive(panes, steps)
    assert out == drive(per_window, steps)
    assert panes.stats.snapshot() == per_window.stats.snapshot()
    assert panes._keys == {} and panes._due == {} and panes._exp == {}
    if lateness:
        assert any(r.timing == "late" for r, _ in out)
    cut = len(steps) // 3
    first = make(Aggregate.sum())
    head = drive(first, steps[:cut])
    second = make(Aggregate.sum())
    second.restore_state(pickle.loads(pickle.dumps(first.snapshot_state())))
    assert head + drive(second, steps[cut:]) == out


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("slide", [10, 5, 2, 1])
def test_pane_collect_keeps_pane_order_and_owns_its_results(seed, slide):
    """collect() merges mutate their first argument: no emitted list, pane or held aggregate is shared; each
    window holds exactly its elements (sorted by pane, arrival order inside a pane)."""
    steps = gappy_script(seed, 250)
    e = WindowEngine("w", Sliding(10, slide), None, Aggregate.collect(), allowed_lateness=6)
    s = WindowEngine("w", Sliding(10, slide), None, Aggregate.sum(), allowed_lateness=6)
    out, sums = drive(e, steps), drive(s, steps)
    assert [(r.start, r.end, r.timing) for r, _ in out] == [(r.start, r.end, r.timing) for r, _ in sums]
    for (r, _), (t, _) in zip(out, sums):
        assert sum(r.value) == t.value and all(r.start <= v < r.end for v in r.value)
        assert [v // slide for v in r.value] == sorted(v // slide for v in r.value)
        r.value.append("mutated")                 # the results are the caller's
    assert all("mutated" not in r.value[:-1] for r, _ in out)


@pytest.mark.parametrize("seed", range(3))
def test_sparse_key_merges_over_a_gap_without_empty_panes(seed):
    """A key seen twice far apart (size 1000, slide 1): only its two panes exist; the windows holding one of
    them fire with the right sums and nothing is materialized for the empty panes between."""
    e = WindowEngine("w", Sliding(1000, 1), None, Aggregate.sum())
    rnd = random.Random(seed)
    a, b = rnd.randint(0, 100), rnd.randint(300, 900)
    out = drive(e, [el(a), el(b)])
    assert len(e._keys[None].panes) == 2 and e.open_windows() == 1000 + (b - a)
    out = drive(e, [END])
    assert len(out) == 1000 + (b - a)
    for r, _ in out:
        assert r.value == (a if r.start <= a < r.end else 0) + (b if r.start <= b < r.end else 0)


def test_only_the_non_mutating_helpers_are_pure():
    """The pane FIFO combines accumulators without fresh copies only for helpers whose add/merge never mutate."""
    assert all(a._pure for a in (Aggregate.sum(), Aggregate.sum(abs), Aggregate.count(), Aggregate.min(),
                                  Aggregate.max(abs)))
    assert not any(a._pure for a in (Aggregate.collect(), Aggregate.fold(0, lambda a, e: a + e, lambda a, b: a + b),
                                     Aggregate.reduce(min), Aggregate(int, lambda a, e: a + e, lambda a, b: a + b)))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("slide", [6, 3, 1])
@pytest.mark.parametrize("helper, pick", [(Aggregate.min, min), (Aggregate.max, max), (Aggregate.count, None)])
def test_pure_helpers_on_panes_agree_with_per_window_folds(seed, slide, helper, pick):
    """min/max/count over panes (pure: no fresh copies in the FIFO) against one fold per window, with late
    elements, gaps and a restore in the middle."""
    steps = gappy_script(seed)
    if pick is None:
        fold = Aggregate.fold(0, lambda a, e: a + 1)
    else:
        fold = Aggregate.fold(None, lambda a, e: e if a is None else pick(a, e))

    def make(agg):
        return WindowEngine("w", Sliding(12, slide), lambda x: x % 3, agg, allowed_lateness=7)

    panes, per_window = make(helper()), make(fold)
    assert type(panes).__name__ == "PaneSlidingEngine" and type(per_window).__name__ == "FixedWindowEngine"
    out = drive(panes, steps)
    assert out == drive(per_window, steps)
    cut = len(steps) // 2
    first = make(helper())
    head = drive(first, steps[:cut])
    second = make(helper())
    second.restore_state(pickle.loads(pickle.dumps(first.snapshot_state())))
    assert head + drive(second, steps[cut:]) == out


@pytest.mark.parametrize("seed", range(3))
def test_pane_engine_restores_a_snapshot_of_the_per_window_layout(seed):
    """Snapshots written before the pane engine dropped its per-window records (``windows``: one
    ``(None, n_new, fired, seq, key, start, end)`` per window, panes with the end of their first window) restore."""
    steps = gappy_script(seed)

    def make():
        return WindowEngine("w", Sliding(12, 4), lambda x: x % 3, Aggregate.sum(), allowed_lateness=7)

    cut = len(steps) // 2
    first = make()
    drive(first, steps[:cut])
    snap = first.snapshot_state()
    expected = drive(first, steps[cut:])
    state, seq, windows = snap["state"], 0, []
    for fired, buckets in ((False, state["due"]), (True, state["fired"])):
        for t, keys in buckets:
            end = t - 7 if fired else t
            for key in keys:
                windows.append((None, 0, fired, seq, key, end - 12, end))
                seq += 1
    old = dict(snap, state={"windows": windows, "panes": [(kp, acc, None) for kp, acc in state["panes"]]})
    second = make()
    second.restore_state(old)
    assert second.open_windows() == len(windows)
    assert drive(second, steps[cut:]) == expected
