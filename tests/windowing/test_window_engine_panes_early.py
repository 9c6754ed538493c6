"""Processing-time early firings on the pane path (``EarlyPaneSlidingEngine``): the same records, in the same order,
as the per-window engine, which keeps a counter per window; checkpoints keep the panes marked since the last tick."""
from __future__ import annotations

import pickle
import random

import pytest

from atoll._impl.ops.window_engine import WindowEngine
from atoll._impl.ops.window_engine_panes import EarlyPaneSlidingEngine, PaneSlidingEngine
from atoll.windowing import Aggregate, Sliding

from .kit import EARLY, END, drive, el, win, wm


def script(seed, n=400):
    rnd = random.Random(seed)
    steps, high = [], 0
    for _ in range(n):
        ts = high + rnd.randint(-14, 6)
        high = max(high, ts)
        steps.append(el(ts))
        r = rnd.random()
        if r < 0.25:
            steps.append(wm(high - rnd.randint(0, 8)))
        elif r < 0.35:
            steps.append(EARLY)
    return steps + [EARLY, END]


def engines(size, slide, lateness, offset=0):
    spec = Sliding(size, slide, offset)
    panes = EarlyPaneSlidingEngine("w", spec, lambda x: x % 3, Aggregate.sum(), allowed_lateness=lateness,
                                   early_every=1.0, divert_late=True)
    per_window = WindowEngine("w", spec, lambda x: x % 3, Aggregate.fold(0, lambda a, e: a + e),
                              allowed_lateness=lateness, early_every=1.0, divert_late=True)
    assert type(per_window).__name__ == "FixedWindowEngine"
    return panes, per_window


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("size, slide, lateness, offset", [(10, 4, 0, 0), (10, 4, 6, 0), (9, 3, 5, 1), (6, 6, 3, 0),
                                                           (12, 8, 0, 2), (20, 2, 4, 0)])
def test_early_firings_on_panes_equal_the_per_window_engine(seed, size, slide, lateness, offset):
    steps = script(seed)
    panes, per_window = engines(size, slide, lateness, offset)
    out = drive(panes, steps)
    assert out == drive(per_window, steps)
    assert any(getattr(r, "timing", None) == "early" for r, _ in out)
    assert panes.stats.snapshot() == per_window.stats.snapshot()
    assert panes.open_windows() == 0 and panes._keys == {}


def test_a_tick_fires_each_unfired_window_holding_an_element_since_the_last_tick():
    panes, _ = engines(10, 5, 0)
    key = 1   # elements 1, 4, 16 all have key x % 3 == 1
    assert drive(panes, [el(1), el(4), EARLY]) == [win(-5, 5, 5, "early", key), win(0, 10, 5, "early", key)]
    assert drive(panes, [EARLY]) == []   # nothing new since
    # 16 only touches [10, 20) and [15, 25): [5, 15) and [0, 10) have nothing new
    assert drive(panes, [el(16), wm(5), EARLY]) == [win(-5, 5, 5, "on_time", key), win(10, 20, 16, "early", key),
                                                    win(15, 25, 16, "early", key)]
    assert drive(panes, [END]) == [win(0, 10, 5, "on_time", key), win(10, 20, 16, "on_time", key),
                                   win(15, 25, 16, "on_time", key)]


def test_fired_windows_do_not_fire_early_but_their_unfired_neighbours_do():
    panes, per_window = engines(10, 5, 20)
    steps = [el(1), el(7), wm(12), EARLY, el(8), EARLY, END]
    out = drive(panes, steps)
    assert out == drive(per_window, steps)
    assert out == [
        win(-5, 5, 1, "on_time", 1), win(0, 10, 8, "on_time", 1),
        win(5, 15, 7, "early", 1),    # the first tick: [5, 15) of key 1 is unfired, [0, 10) fired already
        win(0, 10, 8, "late", 2),     # 8 (key 2) after [0, 10) fired: a late firing at once...
        win(5, 15, 8, "early", 2),    # ...and at the next tick an early one for its unfired window only
        win(5, 15, 7, "on_time", 1), win(5, 15, 8, "on_time", 2),
    ]


def test_snapshot_keeps_the_marks_of_the_next_tick():
    panes, _ = engines(10, 4, 5)
    steps = script(11)
    cut = len(steps) // 2
    while steps[cut - 1] == EARLY:   # cut right after elements, with marks pending
        cut += 1
    drive(panes, steps[:cut])
    snap = pickle.loads(pickle.dumps(panes.snapshot_state()))
    assert snap["state"]["dirty"]
    expected = drive(panes, steps[cut:])
    fresh, _ = engines(10, 4, 5)
    fresh.restore_state(snap)
    assert drive(fresh, steps[cut:]) == expected


def test_the_pane_engine_without_early_every_still_refuses_ticks():
    e = PaneSlidingEngine("sliding_window", Sliding(10, 5), None, Aggregate.sum())
    with pytest.raises(TypeError, match="^sliding_window: early firings need"):
        drive(e, [el(1), EARLY])


@pytest.mark.parametrize("opts, applies", [
    (dict(early_every=1.0), True),
    (dict(early_every=1.0, accumulate=False), False),   # discarding: what each window got since its last firing
    (dict(early_every=1.0, early_count=3), False),      # counts per window
    (dict(), False),
])
def test_which_options_the_early_pane_engine_serves(opts, applies):
    assert EarlyPaneSlidingEngine.applies(Sliding(10, 5), None, Aggregate.sum(), **opts) is applies
    assert EarlyPaneSlidingEngine.applies(Sliding(10, 5), None, Aggregate.fold(0, max), **opts) is False
