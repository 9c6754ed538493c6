"""End-to-end conformance of event time on ``Materializer.local()`` (spec: event-time.md section 1).

The window engine itself is unit-tested in tests/windowing; these cases test the runtime around it:
timestamps riding beside elements through operators and island boundaries, watermarks through
fan-out / fan-in, lateness handling as seen from a running stream, completion flushes, errors.
Expected outputs are written by hand or come from the brute-force model in ``helpers_event_time``.
"""
from __future__ import annotations

import queue
import random

import pytest

from atoll import (
    Aggregate,
    Attributes,
    Broadcast,
    ClosedShape,
    Flow,
    GraphDSL,
    Keep,
    KillSwitches,
    Late,
    Materializer,
    Merge,
    MissingTimestampError,
    OverflowStrategy,
    Partition,
    RunnableGraph,
    Sink,
    Source,
    Supervision,
    Window,
    WindowStats,
)
from atoll.errors import StreamError
from atoll.testkit import ManualClock, TestSink, TestSource, assert_all_stages_stopped

from helpers_event_time import counting, model_fixed

T = 10  # seconds to wait for a result


def run_windows(mat, src, window):
    """``src`` through ``window`` (a function Source -> Source) into ``Sink.seq``: (results, stats)."""
    stats, fut = window(src).to_mat(Sink.seq(), Keep.both).run(mat)
    return fut.result(T), stats


def queue_sink():
    """A sink that puts every element in a queue (read while the stream runs): (queue, Sink[Future])."""
    q = queue.Queue()
    return q, Sink.foreach(q.put)


def drain(clock, q, seconds=0.0):
    """Advance the manual clock (which returns once every host is quiescent), then take what arrived."""
    clock.advance(seconds)
    out = []
    while not q.empty():
        out.append(q.get_nowait())
    return out


def ts0(e):
    return e[0]


def key1(e):
    return e[1]


def disordered(n=300, seed=7, bound=15, keys="abc"):
    """``n`` events ``(ts, key, value)`` whose timestamps are at most ``bound`` behind the max seen."""
    rnd = random.Random(seed)
    out, hi = [], 0
    for i in range(n):
        hi += rnd.randint(0, 4)
        out.append((max(0, hi - rnd.randint(0, bound)), rnd.choice(keys), i))
    return out


# ============================================================================ 1. bounded disorder


@pytest.mark.parametrize("size", [10, 7])
def test_out_of_order_within_bound_counts_and_sums_per_key_match_the_model(mat, size):
    events = disordered()
    exp_counts, late, _ = counting(events=events, ts_fn=ts0, size=size, bound=15, key=key1)
    assert late == [] and len(exp_counts) > 20
    got, stats = run_windows(mat, Source.from_iterable(events), lambda s: s.with_timestamps(
        ts0, max_out_of_orderness=15).tumbling_window(size, key=key1, aggregate=Aggregate.count()))
    assert got == exp_counts
    assert stats.late_dropped == 0 and stats.late_diverted == 0 and stats.partially_late == 0
    exp_sums, _, _ = model_fixed(events=events, ts_fn=ts0, size=size, bound=15, key=key1, create=lambda: 0,
                                 add=lambda a, e: a + e[2])
    got, _ = run_windows(mat, Source.from_iterable(events), lambda s: s.with_timestamps(
        ts0, max_out_of_orderness=15).tumbling_window(size, key=key1, aggregate=Aggregate.sum(lambda e: e[2])))
    assert got == exp_sums
    # every element counted exactly once
    assert sum(w.value for w in exp_counts) == len(events)


def test_results_carry_the_window_max_timestamp_downstream(mat):
    """A second, coarser window downstream sees each result at ``end - 1`` (its own timestamp)."""
    events = [(t, "k") for t in [1, 4, 12, 11, 25, 31, 29, 45]]
    inner = Source.from_iterable(events).with_timestamps(ts0, max_out_of_orderness=5) \
        .tumbling_window(10, aggregate=Aggregate.count())
    stats, fut = inner.tumbling_window(20, aggregate=Aggregate.collect()).to_mat(Sink.seq(), Keep.both).run(mat)
    got = [(w.start, w.end, [(x.start, x.value) for x in w.value]) for w in fut.result(T)]
    assert got == [(0, 20, [(0, 2), (10, 2)]), (20, 40, [(20, 2), (30, 1)]), (40, 60, [(40, 1)])]


# ============================================================================ 2. drop / divert / fail

LATE_EVENTS = [(1, "a"), (12, "a"), (3, "a"), (13, "b"), (25, "a"), (14, "b")]
# W after 12 is 12: [0,10) fired & expired -> (3,a) late (W=12); after 25 W=25: [10,20) fired -> (14,b) late


def test_late_elements_dropped_and_counted(mat):
    got, stats = run_windows(mat, Source.from_iterable(LATE_EVENTS), lambda s: s.with_timestamps(ts0)
                             .tumbling_window(10, key=key1, aggregate=Aggregate.count()))
    assert got == [Window("a", 0, 10, 1), Window("a", 10, 20, 1), Window("b", 10, 20, 1), Window("a", 20, 30, 1)]
    assert (stats.late_dropped, stats.late_diverted, stats.open_windows) == (2, 0, 0)
    assert got == counting(events=LATE_EVENTS, ts_fn=ts0, size=10, key=key1)[0]


def test_late_elements_diverted_as_late_records(mat):
    def window(s):
        return s.with_timestamps(ts0).tumbling_window(10, key=key1, aggregate=Aggregate.count(),
                                                      late_to=Sink.seq(), combine=Keep.both)

    (stats, late_fut), fut = window(Source.from_iterable(LATE_EVENTS)).to_mat(Sink.seq(), Keep.both).run(mat)
    assert fut.result(T) == [Window("a", 0, 10, 1), Window("a", 10, 20, 1), Window("b", 10, 20, 1),
                             Window("a", 20, 30, 1)]
    assert late_fut.result(T) == [Late((3, "a"), 3, 12), Late((14, "b"), 14, 25)]
    assert isinstance(stats, WindowStats)
    assert (stats.late_dropped, stats.late_diverted) == (0, 2)


def test_late_to_default_combine_keeps_the_window_stats(mat):
    stats, fut = Source.from_iterable(LATE_EVENTS).with_timestamps(ts0).tumbling_window(
        10, key=key1, aggregate=Aggregate.count(), late_to=Sink.ignore()).to_mat(Sink.seq(), Keep.both).run(mat)
    assert len(fut.result(T)) == 4
    assert isinstance(stats, WindowStats) and stats.late_diverted == 2


def test_on_late_fail_fails_the_stream(mat):
    fut = Source.from_iterable(LATE_EVENTS).with_timestamps(ts0).tumbling_window(
        10, key=key1, aggregate=Aggregate.count(), on_late="fail").run_with(Sink.seq(), mat)
    with pytest.raises(StreamError) as ei:
        fut.result(T)
    assert "tumbling_window" in str(ei.value)


def test_on_late_fail_with_late_to_is_a_build_error():
    with pytest.raises(ValueError, match="tumbling_window"):
        Source.single(1).with_timestamps(lambda x: x).tumbling_window(10, late_to=Sink.seq(), on_late="fail")


# ============================================================================ 3. allowed lateness

LATENESS_EVENTS = [(1, "a"), (2, "a"), (12, "a"), (5, "a"), (14, "a"), (6, "a"), (16, "a"), (7, "a"), (31, "a")]
# B=0, L=5: [0,10) fires at W=12, late firings for 5 (W=12) and 6 (W=14); W=16 expires it -> 7 late.


@pytest.mark.parametrize("accumulate", [True, False])
def test_allowed_lateness_fires_late_panes(mat, accumulate):
    got, stats = run_windows(mat, Source.from_iterable(LATENESS_EVENTS), lambda s: s.with_timestamps(ts0)
                             .tumbling_window(10, aggregate=Aggregate.count(), allowed_lateness=5,
                                              accumulate=accumulate))
    if accumulate:
        first = [Window(None, 0, 10, 2), Window(None, 0, 10, 3, "late"), Window(None, 0, 10, 4, "late")]
    else:
        first = [Window(None, 0, 10, 2), Window(None, 0, 10, 1, "late"), Window(None, 0, 10, 1, "late")]
    assert got == first + [Window(None, 10, 20, 3), Window(None, 30, 40, 1)]
    assert stats.late_dropped == 1
    exp, late, _ = counting(events=LATENESS_EVENTS, ts_fn=ts0, size=10, allowed_lateness=5, accumulate=accumulate)
    assert got == exp and late == [Late((7, "a"), 7, 16)]


def test_allowed_lateness_late_firings_collect(mat):
    got, _ = run_windows(mat, Source.from_iterable(LATENESS_EVENTS), lambda s: s.with_timestamps(ts0)
                         .tumbling_window(10, aggregate=Aggregate.collect(), allowed_lateness=5))
    assert [w.value for w in got[:3]] == [[(1, "a"), (2, "a")], [(1, "a"), (2, "a"), (5, "a")],
                                          [(1, "a"), (2, "a"), (5, "a"), (6, "a")]]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_disorder_beyond_bound_with_lateness_matches_the_model(mat, seed):
    events = disordered(n=200, seed=seed, bound=25)
    for accumulate in (True, False):
        exp, late, _ = counting(events=events, ts_fn=ts0, size=10, bound=5, key=key1, allowed_lateness=7,
                                accumulate=accumulate)
        got, stats = run_windows(mat, Source.from_iterable(events), lambda s: s.with_timestamps(
            ts0, max_out_of_orderness=5).tumbling_window(10, key=key1, aggregate=Aggregate.count(),
                                                         allowed_lateness=7, accumulate=accumulate))
        assert got == exp
        assert stats.late_dropped == len(late)


# ============================================================================ 4. sliding, partially late


def test_partially_late_element_in_sliding_windows(mat):
    # size 10 slide 5; W=17 after 17: [5,15) fired+expired, [10,20) open; 12 goes to [10,20) only
    events = [(1, "a"), (17, "a"), (12, "a"), (3, "a")]
    got, stats = run_windows(mat, Source.from_iterable(events), lambda s: s.with_timestamps(ts0)
                             .sliding_window(10, 5, aggregate=Aggregate.count()))
    assert got == [Window(None, -5, 5, 1), Window(None, 0, 10, 1), Window(None, 10, 20, 2),
                   Window(None, 15, 25, 1)]
    assert (stats.partially_late, stats.late_dropped) == (1, 1)
    exp, late, partial = counting(events=events, ts_fn=ts0, size=10, slide=5)
    assert got == exp and partial == 1 and late == [Late((3, "a"), 3, 17)]


@pytest.mark.parametrize("slide", [5, 3, 10])
def test_sliding_random_disorder_matches_the_model(mat, slide):
    events = disordered(n=150, seed=slide, bound=20)
    exp, late, partial = model_fixed(events=events, ts_fn=ts0, size=10, slide=slide, bound=8, key=key1,
                                     create=lambda: 0, add=lambda a, e: a + e[2])
    got, stats = run_windows(mat, Source.from_iterable(events), lambda s: s.with_timestamps(
        ts0, max_out_of_orderness=8).sliding_window(10, slide, key=key1, aggregate=Aggregate.sum(lambda e: e[2])))
    assert got == exp
    assert (stats.late_dropped, stats.partially_late) == (len(late), partial)


# ============================================================================ 5. sessions


def test_late_element_bridging_two_sessions_merges_them_with_superseded(mat):
    # gap 5, B=0, L=30: sessions [1,6) and [8,13) both fire at W=30; 4 arrives late but within lateness,
    # its session [4,9) overlaps both -> one merged late window [1,13) superseding both
    events = [(1, "k"), (8, "k"), (30, "k"), (4, "k")]
    got, stats = run_windows(mat, Source.from_iterable(events), lambda s: s.with_timestamps(ts0)
                             .session_window(5, key=key1, aggregate=Aggregate.count(), allowed_lateness=30))
    assert got == [Window("k", 1, 6, 1), Window("k", 8, 13, 1),
                   Window("k", 1, 13, 3, "late", ((1, 6), (8, 13))), Window("k", 30, 35, 1)]
    assert stats.late_dropped == 0


def test_sessions_exactly_gap_apart_stay_apart(mat):
    events = [(0, "k"), (5, "k"), (10, "k"), (12, "k")]
    got, _ = run_windows(mat, Source.from_iterable(events), lambda s: s.with_timestamps(ts0)
                         .session_window(5, key=key1, aggregate=Aggregate.collect()))
    assert [(w.start, w.end, len(w.value)) for w in got] == [(0, 5, 1), (5, 10, 1), (10, 17, 2)]


# ============================================================================ 6. empty windows, flush


def test_empty_windows_are_never_emitted(mat):
    events = [(1, "a"), (95, "a"), (3, "b")]
    got, stats = run_windows(mat, Source.from_iterable(events), lambda s: s.with_timestamps(
        ts0, max_out_of_orderness=100).tumbling_window(10, key=key1, aggregate=Aggregate.count()))
    assert got == [Window("a", 0, 10, 1), Window("b", 0, 10, 1), Window("a", 90, 100, 1)]
    assert stats.watermark == float("inf")


def test_completion_flushes_every_open_window_in_end_start_order(mat):
    # nothing fires before completion (the bound holds the watermark back); then (end, start, creation)
    events = [(35, "x"), (2, "y"), (15, "z"), (7, "x"), (33, "y"), (3, "z")]
    got, stats = run_windows(mat, Source.from_iterable(events), lambda s: s.with_timestamps(
        ts0, max_out_of_orderness=1000).sliding_window(10, 5, key=key1, aggregate=Aggregate.count()))
    # creation order: x30 x35 y-5 y0 z10 z15 x0 x5 y25 y30 z-5 z0
    exp = [Window("y", -5, 5, 1), Window("z", -5, 5, 1), Window("y", 0, 10, 1), Window("x", 0, 10, 1),
           Window("z", 0, 10, 1), Window("x", 5, 15, 1), Window("z", 10, 20, 1), Window("z", 15, 25, 1),
           Window("y", 25, 35, 1), Window("x", 30, 40, 1), Window("y", 30, 40, 1), Window("x", 35, 45, 1)]
    assert got == exp
    assert got == counting(events=events, ts_fn=ts0, size=10, slide=5, bound=1000, key=key1)[0]
    assert stats.open_windows == 0


def test_empty_stream_emits_nothing_and_completes(mat):
    got, stats = run_windows(mat, Source.empty(), lambda s: s.with_timestamps(lambda x: x).tumbling_window(10))
    assert got == [] and stats.open_windows == 0


def test_results_wait_for_demand_and_carry_their_max_timestamp(mat):
    """Results are pushed only on demand, each stamped with its window's max timestamp; completion comes
    after the last flushed result. (Signals go to the probe's side queue: where a watermark shows among
    results depends on chunk cuts.)"""
    events = [(t, "k") for t in range(0, 50, 5)]  # windows of size 10, two elements each
    probe = Source.from_iterable(events).with_timestamps(ts0).tumbling_window(
        10, aggregate=Aggregate.count()).run_with(TestSink.probe(event_time=True, signals=False), mat)
    probe.request(1)
    assert probe.expect_next_with_timestamp() == (Window(None, 0, 10, 2), 9)
    probe.expect_no_message(0.2)  # [10,20) fired (at W=20) but nothing was requested
    probe.request(10)
    assert probe.expect_next_with_timestamp() == (Window(None, 10, 20, 2), 19)
    assert probe.expect_next_with_timestamp() == (Window(None, 20, 30, 2), 29)
    assert probe.expect_next_with_timestamp() == (Window(None, 30, 40, 2), 39)
    assert probe.expect_next_with_timestamp() == (Window(None, 40, 50, 2), 49)
    probe.expect_complete()


# ============================================================================ 7. timestamps through operators

EVENTS7 = disordered(n=120, seed=11, bound=12)
EXPECTED7 = counting(events=EVENTS7, ts_fn=ts0, size=10, bound=12, key=key1)[0]


def _count_windows(flow_between):
    """with_timestamps(bound 12) -> flow_between -> tumbling(10) count per key; elements must reach the window
    as (ts, key, ...) tuples."""
    def window(s):
        return s.with_timestamps(ts0, max_out_of_orderness=12).via(flow_between) \
            .tumbling_window(10, key=key1, aggregate=Aggregate.count())
    return window


def _unique(pairs):
    return pairs


CHAINS = {
    "identity": Flow(),
    "map filter map_concat buffer": Flow().map(lambda e: (e[0] + 0, e[1], e[2] * 2, "x")).filter(lambda e: True)
    .map_concat(lambda e: [e]).buffer(8, OverflowStrategy.backpressure),
    "map that changes the element but not the ts field": Flow().map(lambda e: (-1, e[1], e[2])),
    "islands": Flow().map(lambda e: e).island().filter(lambda e: True).island(),
    "map_concat duplicates": Flow().map_concat(lambda e: [e, e]).filter(lambda e: True),
    "zip_with_index": Flow().zip_with_index().map(lambda p: p[0]),
    "take all": Flow().take(10_000),
    "buffer in island": Flow().buffer(4, OverflowStrategy.backpressure).island(),
}


@pytest.mark.parametrize("name", list(CHAINS))
def test_timestamps_survive_intermediate_operators(mat, name):
    """The window keys off the timestamp beside the element (set by with_timestamps), not the element."""
    got, stats = run_windows(mat, Source.from_iterable(EVENTS7), _count_windows(CHAINS[name]))
    factor = 2 if name == "map_concat duplicates" else 1
    assert got == [Window(w.key, w.start, w.end, w.value * factor) for w in EXPECTED7]
    assert stats.late_dropped == 0


def test_grouped_stamps_with_the_max_timestamp_and_holds_the_watermark(mat):
    # in-order events, groups of 3: the group's ts is its max (last) element's
    events = [(t, "k") for t in [1, 2, 3, 8, 9, 10, 11, 12, 25, 26]]
    got, stats = run_windows(mat, Source.from_iterable(events), lambda s: s.with_timestamps(ts0).grouped(3)
                             .tumbling_window(10, aggregate=Aggregate.collect()))
    # groups: [1,2,3]@3, [8,9,10]@10, [11,12,25]@25, [26]@26
    assert [(w.start, [len(g) for g in w.value]) for w in got] == [(0, [3]), (10, [3]), (20, [3, 1])]
    assert stats.late_dropped == 0


def test_take_completion_flushes_windows(mat):
    events = [(t, "k") for t in range(100)]
    got, _ = run_windows(mat, Source.from_iterable(events), lambda s: s.with_timestamps(
        ts0, max_out_of_orderness=1000).take(25).tumbling_window(10, aggregate=Aggregate.count()))
    assert got == [Window(None, 0, 10, 10), Window(None, 10, 20, 10), Window(None, 20, 30, 5)]


def test_take_of_an_endless_source_flushes_windows(mat):
    got, _ = run_windows(mat, Source.repeat(1).zip_with_index(), lambda s: s.with_timestamps(
        lambda p: p[1]).take(12).tumbling_window(5, aggregate=Aggregate.count()))
    assert got == [Window(None, 0, 5, 5), Window(None, 5, 10, 5), Window(None, 10, 15, 2)]


def test_window_stage_in_its_own_island_locally(mat):
    got, stats = run_windows(mat, Source.from_iterable(EVENTS7), lambda s: s.with_timestamps(
        ts0, max_out_of_orderness=12).island().tumbling_window(10, key=key1, aggregate=Aggregate.count())
        .island())
    assert got == EXPECTED7
    assert stats.late_dropped == 0 and stats.watermark == float("inf")


def test_second_with_timestamps_replaces_timestamps(mat):
    events = [(1, 55), (2, 12), (3, 31)]
    got, _ = run_windows(mat, Source.from_iterable(events), lambda s: s.with_timestamps(ts0).with_timestamps(
        lambda e: e[1], max_out_of_orderness=100).tumbling_window(10, aggregate=Aggregate.count()))
    assert [(w.start, w.value) for w in got] == [(10, 1), (30, 1), (50, 1)]


# ============================================================================ 8. keyed scale-out


def _scale_out(n, events, islands=True):
    def build(b, sink):
        part = b.add(Partition(n, lambda e: hash(e[1]) % n))
        merge = b.add(Merge(n))
        b.add(Source.from_iterable(events).with_timestamps(ts0, max_out_of_orderness=12)) >> part.in_
        for i in range(n):
            w = Flow().tumbling_window(10, key=key1, aggregate=Aggregate.count())
            if islands:
                w = Flow().island().via(w).island()
            part.out(i) >> w >> merge.in_(i)
        merge.out >> sink.in_
        return ClosedShape

    return RunnableGraph.from_graph(GraphDSL.create(build, Sink.seq()))


@pytest.mark.parametrize("n", [2, 3])
def test_partition_to_windows_in_islands_then_merge_equals_one_window(mat, n):
    events = disordered(n=200, seed=5, bound=12, keys="abcdefg")
    expected = counting(events=events, ts_fn=ts0, size=10, bound=12, key=key1)[0]
    got = _scale_out(n, events).run(mat).result(T)
    assert sorted(got, key=repr) == sorted(expected, key=repr)


def test_partition_with_a_branch_that_gets_no_elements_still_completes_and_fires(mat):
    events = [(t, "a") for t in range(0, 40, 3)]
    got = _scale_out(4, events).run(mat).result(T)
    assert sorted(got, key=repr) == sorted(counting(events=events, ts_fn=ts0, size=10, bound=12, key=key1)[0],
                                           key=repr)


def test_merge_forwards_min_watermark_to_a_window_before_completion():
    """Windows of a merged stream fire on time (before completion) once both inputs passed their end."""
    clock = ManualClock()
    m = Materializer.local(clock=clock)
    try:
        a, b = TestSource.probe(), TestSource.probe()
        q, sink = queue_sink()

        def build(bb, pa, pb, done):
            mg = bb.add(Merge(2))
            pa.out >> Flow().with_timestamps(ts0) >> mg.in_(0)
            pb.out >> Flow().with_timestamps(ts0) >> mg.in_(1)
            mg.out >> Flow().tumbling_window(10, aggregate=Aggregate.count()) >> done.in_
            return ClosedShape

        pa, pb, done = RunnableGraph.from_graph(GraphDSL.create(build, a, b, sink)).run(m)
        pa.send_next((1, "a"))
        pa.send_next((25, "a"))
        assert drain(clock, q) == []  # a at 25, b at -inf
        pb.send_next((3, "b"))
        assert drain(clock, q) == []  # b at 3
        pb.send_next((12, "b"))  # min(25, 12) = 12 >= 10
        assert drain(clock, q) == [Window(None, 0, 10, 2)]
        pb.send_complete()  # a done input is excluded: a alone at 25 -> [10,20) fires
        assert drain(clock, q) == [Window(None, 10, 20, 1)]
        pa.send_complete()
        done.result(T)
        assert drain(clock, q) == [Window(None, 20, 30, 1)]
        assert_all_stages_stopped(m, timeout=5.0)
    finally:
        m.shutdown()


# ============================================================================ 9. idle input under ManualClock


def test_idle_input_of_a_merge_stops_holding_the_window_back():
    clock = ManualClock()
    m = Materializer.local(clock=clock)
    try:
        a, b = TestSource.probe(), TestSource.probe()
        q, sink = queue_sink()

        def build(bb, pa, pb, done):
            mg = bb.add(Merge(2))
            pa.out >> Flow().with_timestamps(ts0, idle_timeout=5.0) >> mg.in_(0)
            pb.out >> Flow().with_timestamps(ts0, idle_timeout=5.0) >> mg.in_(1)
            mg.out >> Flow().tumbling_window(10, aggregate=Aggregate.count()) >> done.in_
            return ClosedShape

        pa, pb, done = RunnableGraph.from_graph(GraphDSL.create(build, a, b, sink)).run(m)
        pb.send_next((2, "b"))  # b at 2, then goes quiet without completing
        pa.send_next((1, "a"))
        pa.send_next((15, "a"))
        assert drain(clock, q, 4.0) == []  # 4 s after b's last element: not idle yet, watermark min(15, 2)
        pa.send_next((16, "a"))  # a stays active (its own idle timer is rearmed)
        assert drain(clock, q, 0.9) == []  # 4.9 s
        assert drain(clock, q, 0.2) == [Window(None, 0, 10, 2)]  # 5.1 s: b idle -> output follows a (16)
        # b becomes active again: a late-ish element does not hold the output back (unaligned)
        pa.send_next((27, "a"))
        pb.send_next((26, "b"))
        assert drain(clock, q) == [Window(None, 10, 20, 2)]
        pa.send_complete()
        pb.send_complete()
        done.result(T)
        assert drain(clock, q) == [Window(None, 20, 30, 2)]
        assert_all_stages_stopped(m, timeout=5.0)
    finally:
        m.shutdown()


# ============================================================================ 10. broadcast


def test_broadcast_sends_watermarks_to_every_output():
    """Both branch windows fire on time, even the branch whose filter drops most elements."""
    clock = ManualClock()
    m = Materializer.local(clock=clock)
    try:
        q1, s1 = queue_sink()
        q2, s2 = queue_sink()

        def build(bb, src, o1, o2):
            bc = bb.add(Broadcast(2))
            src.out >> Flow().with_timestamps(ts0) >> bc.in_
            bc.out(0) >> Flow().tumbling_window(10, aggregate=Aggregate.count()) >> o1.in_
            bc.out(1) >> Flow().filter(lambda e: e[1] == "x").tumbling_window(10, aggregate=Aggregate.count()) \
                >> o2.in_
            return ClosedShape

        src, d1, d2 = RunnableGraph.from_graph(GraphDSL.create(build, TestSource.probe(), s1, s2)).run(m)
        src.send_next((1, "x"))
        src.send_next((3, "y"))
        assert (drain(clock, q1), drain(clock, q2)) == ([], [])
        src.send_next((12, "y"))
        assert drain(clock, q1) == [Window(None, 0, 10, 2)]
        assert drain(clock, q2) == [Window(None, 0, 10, 1)]
        src.send_next((25, "y"))
        assert drain(clock, q1) == [Window(None, 10, 20, 1)]
        assert drain(clock, q2) == []  # [10,20) got no element on the filtered branch: never emitted
        src.send_next((26, "x"))
        src.send_next((31, "y"))
        assert drain(clock, q1) == [Window(None, 20, 30, 2)]
        assert drain(clock, q2) == [Window(None, 20, 30, 1)]  # fired by a watermark from a dropped element
        src.send_complete()
        d1.result(T)
        d2.result(T)
        assert drain(clock, q1) == [Window(None, 30, 40, 1)]
        assert drain(clock, q2) == []
        assert_all_stages_stopped(m, timeout=5.0)
    finally:
        m.shutdown()


# ============================================================================ 11. kill switch


def _killable(mat):
    q, sink = queue_sink()
    ((src, ks), stats), done = (TestSource.probe().via_mat(Flow().with_timestamps(ts0), Keep.left)
                                .via_mat(KillSwitches.single(), Keep.both)
                                .via_mat(Flow().tumbling_window(10, aggregate=Aggregate.count()), Keep.both)
                                .to_mat(sink, Keep.both).run(mat))
    for t in (1, 2, 13):
        src.send_next((t, "k"))
    # every element reached the window once [0,10) fired (13 raised the watermark past 10)
    assert q.get(timeout=T) == Window(None, 0, 10, 2)
    return src, ks, stats, q, done


def test_kill_switch_shutdown_flushes_windows(mat):
    src, ks, stats, q, done = _killable(mat)
    ks.shutdown()
    done.result(T)
    assert q.get_nowait() == Window(None, 10, 20, 1)
    assert q.empty()
    src.expect_cancellation()
    assert stats.open_windows == 0 and stats.watermark == float("inf")


def test_kill_switch_abort_fails_without_flushing(mat):
    src, ks, stats, q, done = _killable(mat)
    ks.abort(RuntimeError("boom"))
    with pytest.raises(RuntimeError, match="boom"):
        done.result(T)
    assert q.empty()  # [10,20) never fired
    src.expect_cancellation()
    assert stats.watermark == 13


# ============================================================================ 12. missing timestamps

RESUME = Attributes.supervision_strategy(Supervision.resuming_decider)


def _bad_ts(e):
    if e == "raise":
        raise KeyError("no ts")
    if e == "none":
        return None
    if e == "str":
        return "12"
    return e


@pytest.mark.parametrize("bad,index", [("raise", 2), ("none", 1), ("str", 3)])
def test_missing_timestamp_fails_naming_the_element_index(mat, bad, index):
    elems = [1, 2, 3, 4][:index] + [bad, 5]
    fut = Source.from_iterable(elems).with_timestamps(_bad_ts).tumbling_window(10).run_with(Sink.seq(), mat)
    with pytest.raises(MissingTimestampError) as ei:
        fut.result(T)
    assert f"#{index}" in str(ei.value)
    assert "with_timestamps" in str(ei.value)


def test_missing_timestamp_is_a_stream_error_exported_at_top_level():
    import atoll
    from atoll import errors
    assert atoll.MissingTimestampError is errors.MissingTimestampError
    assert issubclass(MissingTimestampError, StreamError)


def test_missing_timestamp_under_resume_drops_the_element(mat):
    elems = [1, "raise", 2, "none", 11, "str", 12, True and 3]
    flow = Flow().with_timestamps(_bad_ts).with_attributes(RESUME)
    got, stats = run_windows(mat, Source.from_iterable(elems), lambda s: s.via(flow).tumbling_window(
        10, aggregate=Aggregate.collect()))
    # 3 arrives after W=12: late, dropped
    assert got == [Window(None, 0, 10, [1, 2]), Window(None, 10, 20, [11, 12])]
    assert stats.late_dropped == 1


def test_window_without_timestamps_upstream_fails(mat):
    fut = Source.from_iterable([1, 2, 3]).map(lambda x: x).tumbling_window(10).run_with(Sink.seq(), mat)
    with pytest.raises(MissingTimestampError, match="tumbling_window"):
        fut.result(T)


def test_window_after_a_merge_with_one_unstamped_input_fails(mat):
    def build(b, sink):
        m = b.add(Merge(2))
        b.add(Source.from_iterable([(1, "a")]).with_timestamps(ts0)) >> m.in_(0)
        b.add(Source.from_iterable([(2, "b")])) >> m.in_(1)
        m.out >> Flow().session_window(5) >> sink.in_
        return ClosedShape

    fut = RunnableGraph.from_graph(GraphDSL.create(build, Sink.seq())).run(mat)
    with pytest.raises(MissingTimestampError, match="session_window"):
        fut.result(T)


# ============================================================================ 13. build-time validation


def _bad_builds():
    s = Source.single(1).with_timestamps(lambda x: x)
    no_merge = Aggregate(create=list, add=lambda a, e: a + [e])
    return {
        "slide > size": (lambda: s.sliding_window(10, 20), ValueError, "sliding_window"),
        "slide 0": (lambda: s.sliding_window(10, 0), ValueError, "sliding_window"),
        "size 0": (lambda: s.tumbling_window(0), ValueError, "tumbling_window"),
        "size negative": (lambda: s.tumbling_window(-5), ValueError, "tumbling_window"),
        "size str": (lambda: s.tumbling_window("10"), TypeError, "tumbling_window"),
        "gap 0": (lambda: s.session_window(0), ValueError, "session_window"),
        "session without merge": (lambda: s.session_window(5, aggregate=no_merge), ValueError, "session_window"),
        "negative lateness": (lambda: s.tumbling_window(10, allowed_lateness=-1), ValueError, "tumbling_window"),
        "key not callable": (lambda: s.tumbling_window(10, key="k"), TypeError, "tumbling_window"),
        "aggregate not Aggregate": (lambda: s.sliding_window(10, 5, aggregate=len), TypeError, "sliding_window"),
        "bad on_late": (lambda: s.session_window(5, on_late="ignore"), ValueError, "session_window"),
        "early_count 0": (lambda: s.tumbling_window(10, early_count=0), ValueError, "tumbling_window"),
        "max_open_windows 0": (lambda: s.tumbling_window(10, max_open_windows=0), ValueError, "tumbling_window"),
        "ts_fn not callable": (lambda: Source.single(1).with_timestamps(5), TypeError, "with_timestamps"),
        "negative bound": (lambda: Source.single(1).with_timestamps(lambda x: x, max_out_of_orderness=-1),
                           ValueError, "with_timestamps"),
        "idle 0": (lambda: Source.single(1).with_timestamps(lambda x: x, idle_timeout=0), ValueError,
                   "with_timestamps"),
    }


@pytest.mark.parametrize("case", list(_bad_builds()))
def test_bad_window_arguments_fail_at_build_time_naming_the_operator(case):
    build, exc, name = _bad_builds()[case]
    with pytest.raises(exc, match=name):
        build()


# ============================================================================ 14. graphs without event time


def test_plain_graphs_carry_no_timestamps_across_islands(mat, monkeypatch):
    from atoll._impl.islands import boundaries

    seen = []
    orig = boundaries.FrameTimestamps.__init__

    def spy(self, *a, **kw):
        seen.append(a)
        orig(self, *a, **kw)

    monkeypatch.setattr(boundaries.FrameTimestamps, "__init__", spy)
    got = Source.range(0, 500).map(lambda x: x + 1).island().grouped(7).island().map(sum) \
        .run_with(Sink.seq(), mat).result(T)
    assert got == [sum(range(i + 1, min(i + 8, 501))) for i in range(0, 500, 7)]
    assert seen == []
    # the spy itself works: an event-time graph across an island does build frame timestamps
    Source.range(0, 50).with_timestamps(lambda x: x).island().tumbling_window(10).run_with(Sink.seq(), mat) \
        .result(T)
    assert seen != []


def test_timestamps_assigned_after_an_island_boundary():
    # the chunk that crosses the boundary has no timestamps yet: the channel must carry None for each element
    # (the demo's shape: Source.from_spark(...).island().with_timestamps(...); it failed the island before)
    from atoll import Materializer, Sink, Source

    m = Materializer.local()
    try:
        out = Source.range(0, 3).island().with_timestamps(lambda e: e).run_with(Sink.seq(), m).result(5)
    finally:
        m.shutdown()
    assert out == [0, 1, 2]
