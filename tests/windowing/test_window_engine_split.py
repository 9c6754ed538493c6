"""The window engine's split output (records and timestamps in two parallel lists, as the window stage takes
them) against its paired form (``(record, timestamp)`` pairs, as ``kit.drive`` reads it), and the stage's
batches of results: pushed whole, cut by demand, across several batches, and as checkpoint data."""
from __future__ import annotations

import random
from collections import deque

import pytest

from atoll import Aggregate, Flow, Keep, Late, Materializer, Window
from atoll._impl.ops.window import _batches, _pairs, _WindowLogic
from atoll._impl.ops.window_engine import WindowEngine
from atoll.stage.signals import Watermark
from atoll.testkit import TestSink, TestSource, assert_all_stages_stopped
from atoll.windowing import Session, Sliding, Tumbling

from .kit import EARLY, END, drive, el, wm


def engines():
    return {
        "tumbling": lambda: WindowEngine("w", Tumbling(10), lambda x: x % 3, Aggregate.collect(), allowed_lateness=5,
                                         divert_late=True),
        "panes": lambda: WindowEngine("w", Sliding(10, 4), lambda x: x % 3, Aggregate.sum(), allowed_lateness=5,
                                      divert_late=True),
        "per-window": lambda: WindowEngine("w", Sliding(10, 4), lambda x: x % 3, Aggregate.collect(),
                                           allowed_lateness=5, early_count=3, divert_late=True),
        "session": lambda: WindowEngine("w", Session(4), lambda x: x % 3, Aggregate.collect(), allowed_lateness=5,
                                        divert_late=True),
    }


def script(seed, n=300, early=False):
    rnd = random.Random(seed)
    steps, high = [], 0
    for _ in range(n):
        ts = high + rnd.randint(-20, 6)
        high = max(high, ts)
        steps.append(el(ts))
        if rnd.random() < 0.3:
            steps.append(wm(high - rnd.randint(0, 8)))
        if early and rnd.random() < 0.05:
            steps.append(EARLY)
    return steps + [END]


def drive_split(engine, steps):
    recs, stamps = [], []
    for step in steps:
        if step[0] == "e":
            engine.element(step[1], step[2], recs, stamps)
        elif step[0] == "w":
            engine.advance(step[1], recs, stamps)
        elif step[0] == "early":
            engine.early(recs, stamps)
        else:
            engine.end(recs, stamps)
        assert len(recs) == len(stamps)
    return recs, stamps


@pytest.mark.parametrize("kind", list(engines()))
@pytest.mark.parametrize("seed", range(4))
def test_split_output_equals_the_paired_form(kind, seed):
    steps = script(seed, early=kind == "per-window")
    pairs = drive(engines()[kind](), steps)
    recs, stamps = drive_split(engines()[kind](), steps)
    assert list(zip(recs, stamps)) == pairs
    assert any(type(r) is Late for r in recs) and any(type(r) is Window for r in recs)


def test_split_stamps_are_the_window_max_timestamp_and_the_late_element_s_own():
    e = engines()["tumbling"]()
    recs, stamps = drive_split(e, [el(3), el(14), wm(30), el(2), END])
    assert [(type(r).__name__, t) for r, t in zip(recs, stamps)] == [("Window", 9), ("Window", 19), ("Late", 2)]


# ------------------------------------------------------------------------------------------------- the stage's batches
def test_pairs_and_batches_round_trip_keeps_order_signals_and_the_consumed_part():
    w = Watermark(5)
    q = deque([[["a", "b", "c"], [1, 2, 3], 1], [["d"], [4], 0], w, [["e"], [5], 0]])
    items = _pairs(q)
    assert items == [("b", 2), ("c", 3), ("d", 4), w, ("e", 5)]
    back = _batches(items)
    assert list(back) == [[["b", "c", "d"], [2, 3, 4], 0], w, [["e"], [5], 0]]
    assert _pairs(back) == items


class _Conn:
    def __init__(self, demand):
        self.demand = demand


class _Pushes:
    """Stands in for the window logic: records what ``_push_results`` / ``_push_one`` push."""

    def __init__(self):
        self.pushed = []

    def push(self, out, elem, ts):
        self.pushed.append((elem, ts))


def _queue():
    return deque([[["a", "b", "c"], [1, 2, 3], 0], [["d", "e"], [4, 5], 0], Watermark(9), [["f"], [6], 0]])


@pytest.mark.parametrize("demand, first", [
    (10, (["a", "b", "c", "d", "e"], [1, 2, 3, 4, 5])),   # both batches up to the signal, in one chunk
    (3, (["a", "b", "c"], [1, 2, 3])),                    # the first batch whole: its lists as they are
    (2, (["a", "b"], [1, 2])),                            # cut by demand
    (4, (["a", "b", "c", "d"], [1, 2, 3, 4])),            # across batches, cut in the second
])
def test_push_results_takes_what_demand_allows_up_to_the_next_signal(demand, first):
    logic, q = _Pushes(), _queue()
    head = q[0]
    _WindowLogic._push_results(logic, q, None, _Conn(demand))
    assert logic.pushed == [first]
    if demand == 3:
        assert logic.pushed[0][0] is head[0]   # not copied
    rest = _pairs(q)
    assert [p[0] for p in rest if type(p) is tuple][:6 - len(first[0])] == ["a", "b", "c", "d", "e", "f"][len(first[0]):]
    assert Watermark(9) in rest


def test_push_one_walks_a_batch_then_drops_it():
    logic, q = _Pushes(), _queue()
    for _ in range(5):
        _WindowLogic._push_one(logic, q, None)
    assert logic.pushed == [("a", 1), ("b", 2), ("c", 3), ("d", 4), ("e", 5)]
    assert q[0] == Watermark(9)


@pytest.fixture
def mat():
    m = Materializer.local()
    yield m
    try:
        assert_all_stages_stopped(m, timeout=5.0)
    finally:
        m.shutdown()


def test_windows_fired_by_one_watermark_go_out_one_per_pull_with_their_timestamps(mat):
    src, snk = (TestSource.probe(event_time=True)
                .via(Flow().tumbling_window(10, key=lambda e: e[0], aggregate=Aggregate.count()))
                .to_mat(TestSink.probe(event_time=True, signals=False), Keep.both).run(mat))
    for k in "abc":
        src.send_next((k, 1), ts=1)
    src.send_next(("a", 12), ts=12)
    src.send_watermark(20)  # fires [0, 10) of a, b, c and [10, 20) of a: one batch of four
    snk.request(1)
    assert snk.expect_next_with_timestamp() == (Window("a", 0, 10, 1), 9)
    snk.request(2)
    assert snk.expect_next_with_timestamp() == (Window("b", 0, 10, 1), 9)
    assert snk.expect_next_with_timestamp() == (Window("c", 0, 10, 1), 9)
    snk.request(1)
    assert snk.expect_next_with_timestamp() == (Window("a", 10, 20, 1), 19)
    snk.expect_watermark(20)
    src.send_complete()
    snk.expect_complete()


@pytest.mark.parametrize("chunk_size", [1, 3, 1024])
def test_chunked_results_across_batches_and_signals_equal_the_element_form(chunk_size):
    events = [(t, "k%d" % (t % 4)) for t in range(0, 400, 3)]

    def run(m):
        from atoll import Sink, Source
        return (Source.from_iterable(events).with_timestamps(lambda e: e[0], max_out_of_orderness=7)
                .sliding_window(20, 5, key=lambda e: e[1], aggregate=Aggregate.count())
                .run_with(Sink.seq(), m).result(10))

    chunked = Materializer.local(chunk_size=chunk_size)
    plain = Materializer.local(fusion=False)
    try:
        got, want = run(chunked), run(plain)
    finally:
        chunked.shutdown()
        plain.shutdown()
    assert got == want and len(got) > 100
