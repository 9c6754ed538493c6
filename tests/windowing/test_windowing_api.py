"""The pure windowing API: window shapes, build-time option checks, Aggregate helpers, records, stats."""
from __future__ import annotations

import math
import pickle

import pytest

from atoll.errors import MissingTimestampError, StreamError, TooManyWindowsError
from atoll.windowing import (Aggregate, Late, Session, Sliding, Tumbling, Window, WindowStats,
                             validate_window_options)


def options(**kw):
    base = dict(spec=Tumbling(10), key=None, aggregate=Aggregate.count(), allowed_lateness=0, early_count=None,
                early_every=None, on_late="drop", max_open_windows=None)
    base.update(kw)
    return base


# ----------------------------------------------------------------------------------------------- shapes
@pytest.mark.parametrize("make, error, text", [
    (lambda: Tumbling(0), ValueError, "Tumbling: size must be > 0, got 0"),
    (lambda: Tumbling(-5), ValueError, "Tumbling: size must be > 0"),
    (lambda: Tumbling("10"), TypeError, "Tumbling: size must be an int or float, got str"),
    (lambda: Tumbling(True), TypeError, "Tumbling: size must be an int or float, got bool"),
    (lambda: Tumbling(math.inf), ValueError, "Tumbling: size must be finite"),
    (lambda: Tumbling(10, offset=None), TypeError, "Tumbling: offset must be an int or float"),
    (lambda: Sliding(10, 0), ValueError, "Sliding: slide must be > 0, got 0"),
    (lambda: Sliding(10, 11), ValueError, "Sliding: slide (11) must not exceed size (10)"),
    (lambda: Sliding(-1, 1), ValueError, "Sliding: size must be > 0"),
    (lambda: Session(0), ValueError, "Session: gap must be > 0, got 0"),
    (lambda: Session(float("nan")), ValueError, "Session: gap must be finite"),
    (lambda: Tumbling(0, where="tumbling_window"), ValueError, "tumbling_window: size must be > 0"),
    (lambda: Sliding(5, 6, where="sliding_window"), ValueError, "sliding_window: slide (6) must not exceed"),
])
def test_shapes_validate_at_construction(make, error, text):
    with pytest.raises(error) as info:
        make()
    assert str(info.value).startswith(text)


def test_shapes_are_frozen_values_and_where_does_not_count():
    assert Tumbling(10, 2) == Tumbling(10, 2, where="x")
    assert Sliding(10, 5) == Sliding(10, 5, 0)
    assert repr(Session(3)) == "Session(gap=3)"
    with pytest.raises(AttributeError):
        Tumbling(10).size = 3


# ----------------------------------------------------------------------------------------------- options
@pytest.mark.parametrize("kw, error, text", [
    (dict(key=5), TypeError, "sliding_window: key must be callable or None, got int"),
    (dict(aggregate=sum), TypeError, "sliding_window: aggregate must be an Aggregate"),
    (dict(allowed_lateness=-1), ValueError, "sliding_window: allowed_lateness must be >= 0, got -1"),
    (dict(allowed_lateness=float("nan")), ValueError, "sliding_window: allowed_lateness must be >= 0"),
    (dict(allowed_lateness="1"), TypeError, "sliding_window: allowed_lateness must be an int or float"),
    (dict(spec=Session(5), aggregate=Aggregate.fold(0, lambda a, e: a + e)), ValueError,
     "sliding_window: session windows merge accumulators: the aggregate needs merge (Aggregate.fold has none)"),
    (dict(on_late="divert"), ValueError, "sliding_window: on_late must be 'drop' or 'fail', got 'divert'"),
    (dict(early_count=0), ValueError, "sliding_window: early_count must be None or an int >= 1, got 0"),
    (dict(early_count=1.5), ValueError, "sliding_window: early_count must be None or an int >= 1"),
    (dict(max_open_windows=0), ValueError, "sliding_window: max_open_windows must be None or an int >= 1"),
    (dict(early_every=0), ValueError, "sliding_window: early_every must be None or a positive number"),
    (dict(spec=(10, 5)), TypeError, "sliding_window: the window must be Tumbling, Sliding or Session, got tuple"),
])
def test_build_time_errors_name_the_operator(kw, error, text):
    with pytest.raises(error) as info:
        validate_window_options("sliding_window", **options(**kw))
    assert str(info.value).startswith(text)


def test_good_options_pass():
    validate_window_options("w", **options(key=len, allowed_lateness=2.5, early_count=3, early_every=0.5,
                                           on_late="fail", max_open_windows=100))
    validate_window_options("w", **options(spec=Session(5), aggregate=Aggregate.collect()))
    # sliding without merge is fine: one accumulator per window instead of panes
    validate_window_options("w", **options(spec=Sliding(10, 2), aggregate=Aggregate.fold(0, lambda a, e: a + e)))


# ----------------------------------------------------------------------------------------------- Aggregate
def run(agg, elems):
    acc = agg.create()
    for e in elems:
        acc = agg.add(acc, e)
    return acc if agg.result is None else agg.result(acc)


def merged(agg, left, right):
    a, b = agg.create(), agg.create()
    for e in left:
        a = agg.add(a, e)
    for e in right:
        b = agg.add(b, e)
    acc = agg.merge(a, b)
    return acc if agg.result is None else agg.result(acc)


@pytest.mark.parametrize("agg, elems, expected", [
    (Aggregate.count(), [5, 6, 7], 3),
    (Aggregate.sum(), [1, 2, 3.5], 6.5),
    (Aggregate.sum(len), ["ab", "c"], 3),
    (Aggregate.min(), [3, 1, 2], 1),
    (Aggregate.min(lambda e: -e), [3, 1, 2], -3),
    (Aggregate.max(), [3, 1, 2], 3),
    (Aggregate.max(abs), [-7, 3], 7),
    (Aggregate.collect(), [3, 1, 2], [3, 1, 2]),
    (Aggregate.reduce(lambda a, b: a * b), [2, 3, 4], 24),
])
def test_helpers_add_and_merge_agree(agg, elems, expected):
    assert run(agg, elems) == expected
    assert merged(agg, elems[:1], elems[1:]) == expected
    assert merged(agg, [], elems) == expected
    assert merged(agg, elems, []) == expected


def test_empty_results():
    assert run(Aggregate.count(), []) == 0
    assert run(Aggregate.sum(), []) == 0
    assert run(Aggregate.min(), []) is None
    assert run(Aggregate.max(), []) is None
    assert run(Aggregate.reduce(max), []) is None
    assert run(Aggregate.collect(), []) == []


def test_min_of_fn_is_the_value_and_reduce_accepts_none_as_an_element():
    assert run(Aggregate.min(lambda e: e[0]), [(2, "a"), (1, "b")]) == 1
    assert run(Aggregate.reduce(lambda a, b: a), [None, 1]) is None


def test_collect_results_are_copies_and_fold_copies_its_zero():
    agg = Aggregate.collect()
    acc = agg.add(agg.create(), 1)
    first = agg.result(acc)
    agg.add(acc, 2)
    assert first == [1] and agg.result(acc) == [1, 2]
    fold = Aggregate.fold([], lambda a, e: a + [e])
    a = fold.create()
    a.append("x")
    assert fold.create() == []
    assert fold.merge is None
    assert Aggregate.fold(0, max, merge=max).merge is max


def test_helpers_pickle():
    for agg in (Aggregate.count(), Aggregate.sum(), Aggregate.min(), Aggregate.max(), Aggregate.collect(),
                Aggregate.sum(abs), Aggregate.reduce(max)):
        back = pickle.loads(pickle.dumps(agg))
        assert run(back, [3, -4]) == run(agg, [3, -4])


@pytest.mark.parametrize("make, text", [
    (lambda: Aggregate(1, lambda a, e: a), "Aggregate: create must be callable, got int"),
    (lambda: Aggregate(list, None), "Aggregate: add must be callable, got NoneType"),
    (lambda: Aggregate(list, list.append, merge=3), "Aggregate: merge must be callable"),
    (lambda: Aggregate(list, list.append, result="x"), "Aggregate: result must be callable"),
    (lambda: Aggregate.sum(3), "Aggregate.sum: fn must be callable, got int"),
    (lambda: Aggregate.min("k"), "Aggregate.min: fn must be callable"),
    (lambda: Aggregate.max(1), "Aggregate.max: fn must be callable"),
    (lambda: Aggregate.fold(0, None), "Aggregate.fold: fn must be callable"),
    (lambda: Aggregate.fold(0, max, merge=1), "Aggregate.fold: merge must be callable"),
    (lambda: Aggregate.reduce(None), "Aggregate.reduce: fn must be callable"),
])
def test_aggregate_validates_callables(make, text):
    with pytest.raises(TypeError) as info:
        make()
    assert str(info.value).startswith(text)


# ----------------------------------------------------------------------------------------------- records, stats
def test_max_timestamp_is_one_tick_before_end():
    assert Window("k", 0, 10, 1).max_timestamp == 9
    w = Window("k", 0.0, 0.5, 1)
    assert w.max_timestamp < 0.5 and math.nextafter(w.max_timestamp, math.inf) == 0.5
    assert Window(None, 0, 10, [1]).timing == "on_time" and Window(None, 0, 10, [1]).superseded == ()


def test_records_are_frozen_and_pickle():
    late = Late("x", 3, 10)
    assert pickle.loads(pickle.dumps(late)) == late
    w = Window("k", 0, 10, 5, "late", ((0, 5),))
    assert pickle.loads(pickle.dumps(w)) == w
    with pytest.raises(AttributeError):
        w.value = 3


def test_stats_snapshot_and_repr():
    s = WindowStats()
    assert s.snapshot() == {"late_dropped": 0, "late_diverted": 0, "partially_late": 0, "open_windows": 0,
                            "watermark": -math.inf}
    s.late_dropped += 2
    assert repr(s) == ("WindowStats(late_dropped=2, late_diverted=0, partially_late=0, open_windows=0, "
                       "watermark=-inf)")
    with pytest.raises(AttributeError):
        s.other = 1


def test_new_errors_are_stream_errors():
    assert issubclass(TooManyWindowsError, StreamError) and issubclass(MissingTimestampError, StreamError)
