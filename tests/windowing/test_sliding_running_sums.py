"""The pane sliding engine's fast paths for sums and counts without allowed lateness (``_fire_sums``: the running
sum takes the pane entering and drops the pane leaving in one step) and for a pane arriving before the key's last
one (disorder, inline when it opens no window), against the naive model of ``test_pane_sliding_reference``: exact
values, order, timestamps, counters and the engine left empty, on random scripts and on small hand-made ones."""
from __future__ import annotations

import pickle
import random

import pytest

from atoll._impl.ops.window_engine import WindowEngine
from atoll.windowing import Aggregate, Sliding

from .kit import END, drive, el, wm
from .test_pane_sliding_reference import HELPERS, NaiveSliding, key_of, plain, random_script

CASES = [  # size, slide, offset, max_open_windows
    (12, 4, 0, None),          # panes are the slide: one pane enters, one leaves
    (12, 4, 0, 10_000),        # (with a window cap: the generic opening paths)
    (12, 8, 0, None),          # panes of 4, two per slide: the searching path
    (12, 1, -3, None),
    (12, 3, 5, None),
    (10, 10, 0, None),         # one pane per window
    (30, 5, 2, None),          # six panes per window
]


def engine(size, slide, offset, helper, max_open, divert=True):
    return WindowEngine("w", Sliding(size, slide, offset), key_of, HELPERS[helper][0](), allowed_lateness=0,
                        divert_late=divert, max_open_windows=max_open)


@pytest.mark.parametrize("case", CASES, ids=lambda c: "size{}-slide{}-off{}{}".format(
    c[0], c[1], c[2], "-cap" if c[3] else ""))
@pytest.mark.parametrize("helper", ["sum", "count"])
@pytest.mark.parametrize("seed", range(6))
def test_running_sums_without_lateness_equal_the_naive_model(case, helper, seed):
    size, slide, offset, max_open = case
    rnd = random.Random(f"running-{case}-{helper}-{seed}")
    script = random_script(rnd, 400, False)
    e = engine(size, slide, offset, helper, max_open)
    assert type(e).__name__ == "PaneSlidingEngine" and e._invertible
    model = NaiveSliding(size, slide, offset, key_of, 0, True, True, HELPERS[helper][1])
    want = model.run(script)
    got = plain(drive(e, script))
    assert got == want
    assert [type(r[0][4]) for r in got if r[0][0] == "win"] == [int] * sum(1 for r in want if r[0][0] == "win")
    assert (e.stats.late_dropped, e.stats.late_diverted, e.stats.partially_late) == \
        (model.late_dropped, model.late_diverted, model.partially_late)
    assert e.open_windows() == 0 and e._keys == {} and e._due == {} and e._exp == {}
    assert e._invertible

    cut = rnd.randrange(1, len(script))    # snapshot anywhere, restore into a fresh engine: the rest is the same
    first = engine(size, slide, offset, helper, max_open)
    head = plain(drive(first, script[:cut]))
    second = engine(size, slide, offset, helper, max_open)
    second.restore_state(pickle.loads(pickle.dumps(first.snapshot_state())))
    assert head + plain(drive(second, script[cut:])) == want


@pytest.mark.parametrize("slide", [4, 8])
@pytest.mark.parametrize("seed", range(4))
def test_a_sum_without_lateness_turns_to_the_fifo_at_the_first_other_value(slide, seed):
    """Halves from the middle of the script on: the running sums stop at the first pane holding one, possibly
    in the middle of the keys firing at one end, and the FIFO gives the same values from there."""
    rnd = random.Random(f"switch-{slide}-{seed}")
    script = random_script(rnd, 400, False)
    half = len(script) // 2
    script = script[:half] + [("e", (s[1][0], s[1][1] + 0.5), s[2]) if s[0] == "e" else s for s in script[half:]]
    e = engine(12, slide, 0, "sum", None)
    model = NaiveSliding(12, slide, 0, key_of, 0, True, True, HELPERS["sum"][1])
    got, want = plain(drive(e, script)), model.run(script)
    assert got == want
    assert [type(r[0][4]) for r in got if r[0][0] == "win"] == [type(r[0][4]) for r in want if r[0][0] == "win"]
    assert not e._invertible and e.open_windows() == 0 and e._keys == {}


def test_the_switch_in_the_middle_of_one_end_keeps_the_order():
    """Keys a, b, c all have windows ending at 8 (size 8, slide 4); b's pane holds a float: a fires from its
    running sum, b and c from the FIFO, in creation order, and every later window too."""
    e = engine(8, 4, 0, "sum", None, divert=False)
    script = [el(("a", 1), 1), el(("b", 0.5), 2), el(("c", 2), 3), el(("a", 10), 5), el(("c", 20), 6), wm(8),
              el(("a", 100), 9), wm(12), END]
    model = NaiveSliding(8, 4, 0, key_of, 0, True, False, HELPERS["sum"][1])
    got = plain(drive(e, script))
    assert got == model.run(script)
    assert [r[0][1:5] for r in got] == [
        ("a", -4, 4, 1), ("b", -4, 4, 0.5), ("c", -4, 4, 2),          # at W = 8: ends 4, then 8
        ("a", 0, 8, 11), ("b", 0, 8, 0.5), ("c", 0, 8, 22),
        ("a", 4, 12, 110), ("c", 4, 12, 20),                         # at W = 12
        ("a", 8, 16, 100)]                                           # at the end
    assert not e._invertible


def test_a_pane_before_the_last_one_opens_only_the_windows_no_neighbour_holds():
    """Size 12, slide 4 (panes of 4). Panes 0 and 24 first; then pane 4 (its window [4, 16) holds no other pane:
    opened), pane 12 ([8, 20) and [12, 24) opened) and pane 8, all of whose windows hold pane 4 or 12: it only
    takes its place (the inline path). Every window fires once, in end order, with its panes' sum."""
    e = engine(12, 4, 0, "sum", None, divert=False)
    script = [el(("k", 1), 0), el(("k", 100), 24), el(("k", 10), 5), el(("k", 1000), 13), el(("k", 10000), 9),
              END]
    model = NaiveSliding(12, 4, 0, key_of, 0, True, False, HELPERS["sum"][1])
    got = plain(drive(e, script))
    assert got == model.run(script)
    assert [r[0][2:5] for r in got] == [
        (-8, 4, 1), (-4, 8, 11), (0, 12, 10011), (4, 16, 11010), (8, 20, 11000), (12, 24, 1000),
        (16, 28, 100), (20, 32, 100), (24, 36, 100)]
    assert e.open_windows() == 0 and e._keys == {}


def test_a_float_entering_a_running_sum_turns_the_engine_to_the_fifo():
    """Key a's windows fire one after the other from its running sum; the pane entering [0, 8) holds a float: the
    engine leaves the running sums there (a float sum would not subtract exactly), before firing it."""
    e = engine(8, 4, 0, "sum", None, divert=False)
    first = plain(drive(e, [el(("a", 1), 1), wm(4)]))
    assert [r[0][2:5] for r in first] == [(-4, 4, 1)] and e._invertible and e._keys["a"].run == 1
    second = plain(drive(e, [el(("a", 0.5), 5), wm(8)]))
    assert [r[0][2:5] for r in second] == [(0, 8, 1.5)]
    assert not e._invertible and e._keys["a"].run is None
    rest = plain(drive(e, [END]))
    assert [r[0][2:5] for r in rest] == [(4, 12, 0.5)] and e._keys == {}
