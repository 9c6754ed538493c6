"""Tumbling and sliding windows in the engine: exact outputs (record, timestamp) in emission order.

Flink ``WindowOperatorTest`` cases are translated to Atoll's watermark (``W_atoll = W_flink + 1``); Jet
``SlidingWindowPTest`` shapes are ported with their frame arithmetic.
"""
from __future__ import annotations

import pytest

from atoll._impl.ops.window_engine import WindowEngine
from atoll._impl.ops.window_engine_fixed import FixedWindowEngine, PaneSlidingEngine, TumblingEngine
from atoll._impl.ops.window_engine_panes import EarlyPaneSlidingEngine
from atoll.errors import StreamError, TooManyWindowsError
from atoll.windowing import Aggregate, Late, Sliding, Tumbling, WindowStats

from .kit import END, EARLY, drive, el, win, wm


def tumbling(size=10, **kw):
    kw.setdefault("aggregate", Aggregate.collect())
    agg = kw.pop("aggregate")
    return WindowEngine("tumbling_window", Tumbling(size, kw.pop("offset", 0)), kw.pop("key", None), agg, **kw)


def sliding(size, slide, **kw):
    agg = kw.pop("aggregate", Aggregate.collect())
    return WindowEngine("sliding_window", Sliding(size, slide, kw.pop("offset", 0)), kw.pop("key", None), agg, **kw)


def test_the_engine_class_follows_the_shape():
    assert type(tumbling()) is TumblingEngine
    assert type(sliding(10, 5, aggregate=Aggregate.sum())) is PaneSlidingEngine
    assert type(sliding(10, 5, aggregate=Aggregate.fold(0, lambda a, e: a + e))) is FixedWindowEngine
    assert type(sliding(10, 5, aggregate=Aggregate.sum(), early_count=2)) is FixedWindowEngine
    assert type(sliding(10, 5, aggregate=Aggregate.sum(), early_every=1.0)) is EarlyPaneSlidingEngine
    assert type(sliding(10, 5, aggregate=Aggregate.sum(), early_every=1.0, accumulate=False)) is FixedWindowEngine
    assert type(sliding(1.5, 0.5, aggregate=Aggregate.sum())) is FixedWindowEngine
    assert isinstance(tumbling(), WindowEngine)


def test_engine_validates_its_options():
    with pytest.raises(ValueError, match="^tumbling_window: allowed_lateness must be >= 0"):
        tumbling(allowed_lateness=-1)
    with pytest.raises(TypeError, match="^tumbling_window: key must be callable"):
        tumbling(key="k")


# ------------------------------------------------------------------------------------------------- tumbling
def test_out_of_order_input_fires_in_window_order_with_max_timestamp():
    e = tumbling(10)
    assert drive(e, [el(13), el(2), el(27), el(5), el(11), wm(10)]) == [win(0, 10, [2, 5])]
    assert e.watermark == 10 and e.stats.watermark == 10 and e.open_windows() == 2
    assert drive(e, [wm(30)]) == [win(10, 20, [13, 11]), win(20, 30, [27])]
    assert e.open_windows() == 0 and e._wins == {} and e._due == {} and e._exp == {}


def test_window_fires_at_the_first_watermark_reaching_its_end():
    e = tumbling(10)
    assert drive(e, [el(9), wm(9)]) == []
    assert drive(e, [wm(10)]) == [win(0, 10, [9])]


def test_an_element_at_the_watermark_is_not_late_one_below_is():
    e = tumbling(10)
    assert drive(e, [wm(20), el(20), el(19), wm(30)]) == [win(20, 30, [20])]
    assert e.stats.late_dropped == 1


def test_non_advancing_watermarks_are_ignored():
    e = tumbling(10)
    assert drive(e, [wm(15), wm(15), wm(3), el(16), wm(14), wm(20)]) == [win(10, 20, [16])]
    assert e.watermark == 20


def test_empty_windows_are_never_emitted_and_flush_at_end():
    e = tumbling(10)
    out = drive(e, [el(1), el(45), wm(40), el(46), END])
    assert out == [win(0, 10, [1]), win(40, 50, [45, 46])]
    assert e.watermark == float("inf") and e.open_windows() == 0
    assert drive(e, [END, el(99)]) == []          # nothing after the end: the element is late
    assert e.stats.late_dropped == 1


def test_keyed_windows_fire_in_creation_order_for_equal_bounds():
    e = tumbling(10, key=lambda x: x[0], aggregate=Aggregate.count())
    out = drive(e, [el(("b", 1), 1), el(("a", 2), 2), el(("b", 3), 3), el(("c", 12), 12), wm(20)])
    assert out == [win(0, 10, 2, key="b"), win(0, 10, 1, key="a"), win(10, 20, 1, key="c")]


def test_offset_shifts_the_windows():
    e = tumbling(10, offset=3)
    assert drive(e, [el(2), el(3), el(12), el(13), END]) == [win(-7, 3, [2]), win(3, 13, [3, 12]),
                                                              win(13, 23, [13])]


def test_float_timestamps_use_nextafter():
    e = WindowEngine("tumbling_window", Tumbling(0.5), None, Aggregate.count())
    out = drive(e, [el("a", 0.1), el("b", 0.6), END])
    assert [(r.start, r.end, r.value) for r, _ in out] == [(0.0, 0.5, 1), (0.5, 1.0, 1)]
    assert out[0][1] == out[0][0].max_timestamp and out[0][1] < 0.5


def test_flink_tumbling_event_time_windows_translated():
    """Flink testTumblingEventTimeWindows (size 3 s, sum of 1 per element), watermarks W_flink + 1."""
    e = tumbling(3000, key=lambda x: x, aggregate=Aggregate.count())
    script = [el("key2", 3999), el("key2", 3000), el("key1", 20), el("key1", 0), el("key1", 999),
              el("key2", 1998), el("key2", 1999), el("key2", 1000), wm(1000), wm(2000)]
    assert drive(e, script) == []
    assert drive(e, [wm(3000)]) == [win(0, 3000, 3, key="key1"), win(0, 3000, 3, key="key2")]
    assert drive(e, [wm(4000), wm(5000)]) == []
    assert drive(e, [wm(6000)]) == [win(3000, 6000, 2, key="key2")]
    assert drive(e, [wm(7000), wm(8000), END]) == []
    assert e.open_windows() == 0


# ------------------------------------------------------------------------------------------------- lateness
def test_late_drop_divert_and_fail():
    dropped = tumbling(10)
    assert drive(dropped, [el(5), wm(10), el(7)]) == [win(0, 10, [5])]
    assert dropped.stats.late_dropped == 1 and dropped.stats.late_diverted == 0

    diverted = tumbling(10, divert_late=True)
    assert drive(diverted, [el(5), wm(10), el(7), el("x", 2)]) == [
        win(0, 10, [5]), (Late(7, 7, 10), 7), (Late("x", 2, 10), 2)]
    assert diverted.stats.late_diverted == 2 and diverted.stats.late_dropped == 0

    failing = tumbling(10, on_late="fail", divert_late=True)
    drive(failing, [el(5), wm(10)])
    with pytest.raises(StreamError, match=r"^tumbling_window: late element with timestamp 7: all its windows "
                                          r"expired at watermark 10 \(allowed_lateness=0\)$"):
        drive(failing, [el(7)])


def test_allowed_lateness_refires_late_and_expires_later():
    """Flink testLateness-like: L=5; a late element refires the fired window (accumulating), expiry at end+L."""
    e = tumbling(10, allowed_lateness=5)
    out = drive(e, [el(1), el(3), wm(12), el(2), el(4)])
    assert out == [win(0, 10, [1, 3]), win(0, 10, [1, 3, 2], "late"), win(0, 10, [1, 3, 2, 4], "late")]
    assert e.open_windows() == 1
    assert drive(e, [wm(14), el(9)]) == [win(0, 10, [1, 3, 2, 4, 9], "late")]
    assert drive(e, [wm(15), el(8)]) == []
    assert e.stats.late_dropped == 1 and e.open_windows() == 0


def test_a_window_first_seen_behind_the_watermark_fires_late_at_once():
    e = tumbling(10, allowed_lateness=20)
    assert drive(e, [wm(25), el(3), el(4)]) == [win(0, 10, [3], "late"), win(0, 10, [3, 4], "late")]
    assert drive(e, [END]) == []                   # no +inf firing for windows fired with no new data


def test_discarding_mode_emits_only_new_elements():
    e = tumbling(10, accumulate=False, allowed_lateness=10, aggregate=Aggregate.sum())
    out = drive(e, [el(1), el(2), wm(10), el(3), el(4), END])
    assert out == [win(0, 10, 3), win(0, 10, 3, "late"), win(0, 10, 4, "late")]


def test_accumulating_mode_emits_everything_so_far():
    e = tumbling(10, allowed_lateness=10, aggregate=Aggregate.sum())
    out = drive(e, [el(1), el(2), wm(10), el(3), el(4), END])
    assert out == [win(0, 10, 3), win(0, 10, 6, "late"), win(0, 10, 10, "late")]


# ------------------------------------------------------------------------------------------------- early
def test_early_count_fires_every_n_new_elements_and_on_time_always():
    e = tumbling(10, early_count=2, aggregate=Aggregate.sum())
    out = drive(e, [el(1), el(2), el(3), el(4), el(15), wm(10), END])
    assert out == [win(0, 10, 3, "early"), win(0, 10, 10, "early"), win(0, 10, 10), win(10, 20, 15)]


def test_early_count_discarding_on_time_firing_with_empty_delta():
    e = tumbling(10, early_count=2, accumulate=False, aggregate=Aggregate.sum())
    out = drive(e, [el(1), el(2), el(3), el(4), wm(10)])
    assert out == [win(0, 10, 3, "early"), win(0, 10, 7, "early"), win(0, 10, 0)]


def test_fire_early_fires_only_windows_with_new_data_in_window_order():
    e = tumbling(10, early_every=1.0, aggregate=Aggregate.collect(), key=lambda x: x % 2)
    out = drive(e, [el(13), el(4), EARLY, EARLY, el(14), EARLY])
    assert out == [win(0, 10, [4], "early", key=0), win(10, 20, [13], "early", key=1),
                   win(10, 20, [14], "early", key=0)]
    assert drive(e, [wm(10), wm(20)]) == [win(0, 10, [4], key=0), win(10, 20, [13], key=1),
                                          win(10, 20, [14], key=0)]


# ------------------------------------------------------------------------------------------------- limits, stats
def test_max_open_windows_fails_naming_the_operator():
    e = tumbling(10, key=lambda x: x, max_open_windows=2)
    drive(e, [el(1), el(2)])
    with pytest.raises(TooManyWindowsError, match=r"^tumbling_window: more than max_open_windows=2 open windows "
                                                  r"\(opening \[0, 10\) of key 3\)$"):
        drive(e, [el(3)])
    drive(e, [wm(10), el(13)])                    # the fired windows are gone: room again
    assert e.open_windows() == 1



@pytest.mark.parametrize("limit", [1, 3, 5, 7])
def test_max_open_windows_on_panes_fails_at_the_same_window_as_per_window(limit):
    """The pane engine opens a pane's windows as a range: it fails naming the same window as the per-window
    engine, with the same windows open."""
    def make(agg):
        return sliding(8, 2, key=lambda x: x % 2, aggregate=agg, max_open_windows=limit)

    panes, per_window = make(Aggregate.sum()), make(Aggregate.fold(0, lambda a, e: a + e))
    assert type(panes) is PaneSlidingEngine and type(per_window) is FixedWindowEngine
    messages = []
    for e in (panes, per_window):
        with pytest.raises(TooManyWindowsError) as info:
            drive(e, [el(1), el(2), el(9), el(20), el(31)])
        messages.append((str(info.value), e.open_windows()))
    assert messages[0] == messages[1]
    assert messages[0][0].startswith(f"sliding_window: more than max_open_windows={limit} open windows (opening [")


def test_stats_object_is_kept_current():
    stats = WindowStats()
    e = tumbling(10, stats=stats, allowed_lateness=5)
    drive(e, [el(1), el(12), wm(11)])
    assert stats.snapshot() == {"late_dropped": 0, "late_diverted": 0, "partially_late": 0, "open_windows": 2,
                                "watermark": 11}
    drive(e, [wm(15), el(0)])
    assert (stats.open_windows, stats.late_dropped) == (1, 1)


# ------------------------------------------------------------------------------------------------- sliding
@pytest.mark.parametrize("agg, order", [(Aggregate.collect(), [1, 7]),
                                        (Aggregate.fold([], lambda a, e: a + [e]), [7, 1])],
                         ids=["panes", "per-window"])
def test_sliding_assigns_each_element_to_every_window_containing_it(agg, order):
    """Panes are combined in time order, so collect() sees pane order across panes (arrival order inside one)."""
    e = sliding(10, 5, aggregate=agg)
    out = drive(e, [el(7), el(1), el(12), wm(10)])
    assert out == [win(-5, 5, [1]), win(0, 10, order)]
    assert drive(e, [END]) == [win(5, 15, [7, 12]), win(10, 20, [12])]
    assert e.open_windows() == 0


@pytest.mark.parametrize("agg", [Aggregate.sum(), Aggregate.fold(0, lambda a, e: a + e)], ids=["panes", "per-window"])
def test_partially_late_sliding_elements(agg):
    """Window [0, 10) has expired at W=10, [5, 15) has not: ts 7 goes only to the latter."""
    e = sliding(10, 5, aggregate=agg)
    out = drive(e, [el(1), el(8), wm(10), el(7), END])
    assert out == [win(-5, 5, 1), win(0, 10, 9), win(5, 15, 15)]
    assert e.stats.partially_late == 1 and e.stats.late_dropped == 0
    e = sliding(10, 5, aggregate=agg, divert_late=True)
    assert drive(e, [wm(15), el(4), el(12)]) == [(Late(4, 4, 15), 4)]
    assert (e.stats.partially_late, e.stats.late_diverted) == (1, 1)
    assert drive(e, [END]) == [win(10, 20, 12)]


@pytest.mark.parametrize("agg", [Aggregate.sum(), Aggregate.fold(0, lambda a, e: a + e)], ids=["panes", "per-window"])
@pytest.mark.parametrize("accumulate", [True, False])
def test_sliding_late_firings_with_allowed_lateness(agg, accumulate):
    e = sliding(4, 2, aggregate=agg, allowed_lateness=3, accumulate=accumulate)
    out = drive(e, [el(1), el(3), wm(4), el(2), END])
    # [2, 6) is unfired when 2 arrives; [0, 4) fired at W=4 and takes 2 as a late firing first (smaller end)
    late_value = 6 if accumulate else 2
    assert out == [win(-2, 2, 1), win(0, 4, 4), win(0, 4, late_value, "late"), win(2, 6, 5)]


def test_jet_sliding_window_frames():
    """Jet SlidingWindowPTest shape: size 4, slide 1 (frames of 1), counting; windows come out in end order."""
    e = sliding(4, 1, aggregate=Aggregate.count())
    out = drive(e, [el(0), el(1), el(2), el(3), el(4), wm(3)])
    assert out == [win(-3, 1, 1), win(-2, 2, 2), win(-1, 3, 3)]
    assert drive(e, [wm(5)]) == [win(0, 4, 4), win(1, 5, 4)]
    assert drive(e, [END]) == [win(2, 6, 3), win(3, 7, 2), win(4, 8, 1)]
    assert e._keys == {} and e._due == {} and e._exp == {} and e.open_windows() == 0


def test_pane_engine_does_not_serve_processing_time_early_firings():
    with pytest.raises(TypeError, match="^sliding_window: early firings need"):
        drive(sliding(10, 5, aggregate=Aggregate.sum()), [el(1), EARLY])


def test_sliding_early_count_uses_per_window_accumulators():
    e = sliding(4, 2, aggregate=Aggregate.sum(), early_count=2)
    out = drive(e, [el(1), el(2), el(3), wm(4)])
    # 2 is the second element of [0, 4) (early) and the first of [2, 6); 3 is the second of [2, 6) (early)
    assert out == [win(0, 4, 3, "early"), win(2, 6, 5, "early"), win(-2, 2, 1), win(0, 4, 6)]
