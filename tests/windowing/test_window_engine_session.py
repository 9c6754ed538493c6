"""Session windows in the engine: exact outputs in emission order, merging, superseded bounds, key cleanup.

Jet ``SessionWindowPTest`` cases are ported (session timeout 10); lateness follows the per-window rule of the spec
(section 1.5): an element is late when its merged session has expired, ``end + allowed_lateness <= W``.
"""
from __future__ import annotations

import random

import pytest

from atoll._impl.ops.window_engine import WindowEngine
from atoll._impl.ops.window_engine_session import SessionEngine
from atoll.errors import StreamError, TooManyWindowsError
from atoll.windowing import Aggregate, Late, Session

from .kit import END, EARLY, drive, el, win, wm


def session(gap=10, **kw):
    agg = kw.pop("aggregate", Aggregate.collect())
    return WindowEngine("session_window", Session(gap), kw.pop("key", None), agg, **kw)


def keyed(key, ts):
    return el((key, ts), ts)


def test_session_engine_is_picked_and_needs_merge():
    assert type(session()) is SessionEngine
    with pytest.raises(ValueError, match="^session_window: session windows merge accumulators"):
        session(aggregate=Aggregate.fold(0, lambda a, e: a + 1))


def test_jet_ordered_events_one_key_flush_at_end():
    """Jet when_batchProcessing_then_flushEverything: the watermark fires the first session, the end the second."""
    e = session(10, aggregate=Aggregate.count())
    script = [el(1), el(6), el(12), el(30), el(35), el(40), wm(25)]
    assert drive(e, script) == [win(1, 22, 3)]
    assert drive(e, [END]) == [win(30, 50, 3)]
    assert e._sessions == {} and e.open_windows() == 0


@pytest.mark.parametrize("seed", range(10))
def test_jet_disordered_events_three_keys(seed):
    """Jet when_disorderedEventsWithThreeKeys: any arrival order gives the same sessions; among equal bounds the
    key whose session state was created first fires first."""
    events = [(k, ts) for k in "abc" for ts in (1, 6, 12, 30, 35, 40)]
    random.Random(seed).shuffle(events)
    e = session(10, key=lambda x: x[0], aggregate=Aggregate.count())
    out = drive(e, [keyed(k, ts) for k, ts in events] + [wm(100)])

    def creation_order(lo, hi):
        # a session's state is the oldest of the states merged into it: the first element of the session to arrive
        return sorted("abc", key=lambda k: events.index(next(x for x in events if x[0] == k and lo <= x[1] < hi)))

    expected = [win(1, 22, 3, key=k) for k in creation_order(0, 22)] + \
               [win(30, 50, 3, key=k) for k in creation_order(22, 50)]
    assert out == expected
    assert e._sessions == {} and e._due_heap == [] and e._exp_heap == []


def test_jet_sessions_that_touch_are_not_merged():
    e = session(10, aggregate=Aggregate.count())
    assert drive(e, [el(0), el(10), END]) == [win(0, 10, 1), win(10, 20, 1)]


def test_late_session_dropped_diverted_or_failing():
    """Jet when_lateEvent_then_dropped, per-window rule: after W=20, ts 10 opens [10, 20), already expired."""
    e = session(10)
    assert drive(e, [wm(20), el(10), el(9)]) == []
    assert e.stats.late_dropped == 2 and e._sessions == {}
    assert drive(e, [el(11), END]) == [win(11, 21, [11])]     # [11, 21) is still open at W=20

    e = session(10, divert_late=True)
    assert drive(e, [wm(20), el("x", 10)]) == [(Late("x", 10, 20), 10)]
    assert e.stats.late_diverted == 1

    e = session(10, on_late="fail")
    with pytest.raises(StreamError, match="^session_window: late element with timestamp 10"):
        drive(e, [wm(20), el(10)])


def test_an_old_element_overlapping_a_live_session_is_not_late():
    e = session(10, allowed_lateness=5)
    assert drive(e, [el(0), wm(12)]) == [win(0, 10, [0])]
    # [−3, 7) alone would be expired (7 + 5 <= 12) but it overlaps the live [0, 10): it joins it, a late firing
    assert drive(e, [el(-3)]) == [win(-3, 10, [0, -3], "late", superseded=[(0, 10)])]


def test_out_of_order_elements_merge_sessions():
    e = session(5)
    assert drive(e, [el(10), el(1), el(5), el(3), END]) == [win(1, 10, [1, 5, 3]), win(10, 15, [10])]


def test_a_bridging_element_merges_two_unfired_sessions_without_superseded():
    e = session(5)
    assert drive(e, [el(1), el(8), el(5), END]) == [win(1, 13, [1, 8, 5])]
    assert e.open_windows() == 0


def test_late_element_bridging_two_fired_sessions_lists_both_as_superseded():
    e = session(5, allowed_lateness=20)
    assert drive(e, [el(1), el(8), wm(16)]) == [win(1, 6, [1]), win(8, 13, [8])]
    assert e.open_windows() == 2
    assert drive(e, [el(5)]) == [win(1, 13, [1, 8, 5], "late", superseded=[(1, 6), (8, 13)])]
    assert e.open_windows() == 1
    # a further late element inside it: same bounds, nothing superseded any more
    assert drive(e, [el(2)]) == [win(1, 13, [1, 8, 5, 2], "late")]
    assert drive(e, [wm(32)]) == []
    assert drive(e, [wm(33)]) == [] and e._sessions == {} and e.open_windows() == 0


def test_a_fired_session_stretched_past_the_watermark_fires_on_time_again():
    e = session(5, allowed_lateness=20)
    assert drive(e, [el(1), wm(7)]) == [win(1, 6, [1])]
    assert drive(e, [el(4)]) == []                          # [1, 9): its end is ahead of W=7 again
    assert drive(e, [wm(9)]) == [win(1, 9, [1, 4], superseded=[(1, 6)])]
    assert drive(e, [END]) == []


def test_a_fired_session_absorbing_an_unfired_one_fires_on_time():
    e = session(5, allowed_lateness=20)
    assert drive(e, [el(1), wm(7), el(9)]) == [win(1, 6, [1])]
    # 5 bridges the fired [1, 6) and the unfired [9, 14)
    assert drive(e, [el(5), wm(13)]) == []
    assert drive(e, [wm(14)]) == [win(1, 14, [1, 9, 5], superseded=[(1, 6)])]


def test_discarding_sessions():
    e = session(5, allowed_lateness=20, accumulate=False, aggregate=Aggregate.sum())
    out = drive(e, [el(1), el(8), wm(16), el(5), el(2), END])
    assert out == [win(1, 6, 1), win(8, 13, 8), win(1, 13, 5, "late", superseded=[(1, 6), (8, 13)]),
                   win(1, 13, 2, "late")]


def test_early_count_on_sessions_counts_merged_elements():
    e = session(5, early_count=3, aggregate=Aggregate.count())
    assert drive(e, [el(1), el(8)]) == []
    assert drive(e, [el(5)]) == [win(1, 13, 3, "early")]
    assert drive(e, [el(6), END]) == [win(1, 13, 4)]


def test_fire_early_on_sessions():
    e = session(5, key=lambda x: x[0], aggregate=Aggregate.count(), early_every=1.0)
    out = drive(e, [keyed("b", 3), keyed("a", 1), EARLY, EARLY, keyed("a", 2), EARLY, END])
    assert out == [win(1, 6, 1, "early", key="a"), win(3, 8, 1, "early", key="b"),
                   win(1, 7, 2, "early", key="a", superseded=[(1, 6)]),
                   win(1, 7, 2, key="a"), win(3, 8, 1, key="b")]


def test_key_entry_is_deleted_when_its_last_session_expires():
    e = session(5, key=lambda x: x[0], allowed_lateness=3)
    drive(e, [keyed("a", 1), keyed("b", 2), keyed("a", 20)])
    assert set(e._sessions) == {"a", "b"} and e.open_windows() == 3
    drive(e, [wm(9)])
    assert set(e._sessions) == {"a", "b"} and e.open_windows() == 2     # a's [1, 6) expired at 6 + 3
    drive(e, [wm(10)])
    assert set(e._sessions) == {"a"} and e.open_windows() == 1          # b's [2, 7) at 7 + 3
    drive(e, [wm(28)])
    assert e._sessions == {} and e.open_windows() == 0 and e.stats.open_windows == 0
    assert e._due_heap == [] and e._exp_heap == []


def test_max_open_windows_counts_sessions():
    e = session(5, max_open_windows=2)
    drive(e, [el(1), el(8)])
    with pytest.raises(TooManyWindowsError, match=r"^session_window: more than max_open_windows=2"):
        drive(e, [el(20)])
    drive(e, [el(5)])                  # merging [1, 6) and [8, 13) frees one
    assert e.open_windows() == 1
    drive(e, [el(30)])
    assert e.open_windows() == 2
