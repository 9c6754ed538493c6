"""Event time on ``Materializer.ray()``: the window stage in an island (a Ray actor) of its own, so
timestamps and watermarks cross actor boundaries in frames. One Ray session for the module; the cases
are few (each Ray graph takes most of a second to start) and mirror cases of test_event_time_local.py.
"""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

from atoll import (  # noqa: E402
    Aggregate,
    ClosedShape,
    Flow,
    GraphDSL,
    Keep,
    Late,
    Materializer,
    Merge,
    OverflowStrategy,
    Partition,
    RunnableGraph,
    Sink,
    Source,
    Window,
)
from atoll.testkit import assert_all_stages_stopped  # noqa: E402

from helpers_event_time import counting, model_fixed  # noqa: E402
from ray_start import shared_local_ray  # noqa: E402

T = 60


@pytest.fixture(scope="module")
def ray_mat():
    shared_local_ray()
    m = Materializer.ray(start_timeout=30)
    yield m
    m.shutdown()


@pytest.fixture
def rmat(ray_mat):
    yield ray_mat
    assert_all_stages_stopped(ray_mat, timeout=15.0)


def ts0(e):
    return e[0]


def key1(e):
    return e[1]


def events(n=150, seed=3, bound=15, keys="abcd"):
    import random

    rnd = random.Random(seed)
    out, hi = [], 0
    for i in range(n):
        hi += rnd.randint(0, 4)
        out.append((max(0, hi - rnd.randint(0, bound)), rnd.choice(keys), i))
    return out


def islanded(window_flow):
    """The window flow in an island of its own (an island boundary before and after it)."""
    return Flow().island().via_mat(window_flow, Keep.right).island()


def test_tumbling_in_its_own_actor_matches_the_model(rmat):
    evs = events(bound=25)
    exp, late, _ = counting(events=evs, ts_fn=ts0, size=10, bound=8, key=key1, allowed_lateness=5)
    assert late  # some elements are late: the lateness decision sees the watermarks that crossed the actors
    stats, fut = (Source.from_iterable(evs).with_timestamps(ts0, max_out_of_orderness=8)
                  .via_mat(islanded(Flow().tumbling_window(10, key=key1, aggregate=Aggregate.count(),
                                                           allowed_lateness=5)), Keep.right)
                  .to_mat(Sink.seq(), Keep.both).run(rmat))
    assert fut.result(T) == exp
    # the counters are readable from the driver as plain attributes (each read asks the island's actor)
    assert stats.late_dropped == len(late)
    assert stats.snapshot()["late_dropped"] == len(late)
    assert stats.open_windows == 0


def test_late_records_diverted_across_actors(rmat):
    evs = [(1, "a"), (12, "a"), (3, "a"), (13, "b"), (25, "a"), (14, "b")]
    late_sink = Flow().island().to_mat(Sink.seq(), Keep.right)
    (stats, late), fut = (Source.from_iterable(evs).with_timestamps(ts0).island()
                          .tumbling_window(10, key=key1, aggregate=Aggregate.count(), late_to=late_sink,
                                           combine=Keep.both)
                          .island().to_mat(Sink.seq(), Keep.both).run(rmat))
    assert fut.result(T) == [Window("a", 0, 10, 1), Window("a", 10, 20, 1), Window("b", 10, 20, 1),
                             Window("a", 20, 30, 1)]
    assert late.result(T) == [Late((3, "a"), 3, 12), Late((14, "b"), 14, 25)]


def test_timestamps_survive_operators_and_actor_boundaries(rmat):
    evs = events()
    exp = model_fixed(events=evs, ts_fn=ts0, size=10, slide=5, bound=15, key=key1, create=lambda: 0,
                      add=lambda a, e: a + e[2])[0]
    chain = (Flow().map(lambda e: (e[0], e[1], e[2] + 1000)).island().filter(lambda e: True)
             .map_concat(lambda e: [(e[0], e[1], e[2] - 1000)]).buffer(8, OverflowStrategy.backpressure).island())
    fut = (Source.from_iterable(evs).with_timestamps(ts0, max_out_of_orderness=15).via(chain)
           .via(islanded(Flow().sliding_window(10, 5, key=key1, aggregate=Aggregate.sum(lambda e: e[2]))))
           .run_with(Sink.seq(), rmat))
    assert fut.result(T) == exp


def test_partition_to_window_actors_then_merge(rmat):
    n = 2
    evs = events(n=200, seed=9, bound=12, keys="abcdefg")
    expected = counting(events=evs, ts_fn=ts0, size=10, bound=12, key=key1)[0]

    def build(b, sink):
        part = b.add(Partition(n, lambda e: hash(e[1]) % n))
        merge = b.add(Merge(n))
        b.add(Source.from_iterable(evs).with_timestamps(ts0, max_out_of_orderness=12)) >> part.in_
        for i in range(n):
            part.out(i) >> islanded(Flow().tumbling_window(10, key=key1, aggregate=Aggregate.count())) \
                >> merge.in_(i)
        merge.out >> sink.in_
        return ClosedShape

    got = RunnableGraph.from_graph(GraphDSL.create(build, Sink.seq())).run(rmat).result(T)
    assert sorted(got, key=repr) == sorted(expected, key=repr)


def test_session_merge_with_superseded_across_actors(rmat):
    evs = [(1, "k"), (8, "k"), (30, "k"), (4, "k"), (2, "j")]
    fut = (Source.from_iterable(evs).with_timestamps(ts0)
           .via(islanded(Flow().session_window(5, key=key1, aggregate=Aggregate.count(), allowed_lateness=30)))
           .run_with(Sink.seq(), rmat))
    assert fut.result(T) == [Window("k", 1, 6, 1), Window("k", 8, 13, 1),
                             Window("k", 1, 13, 3, "late", ((1, 6), (8, 13))), Window("j", 2, 7, 1, "late"),
                             Window("k", 30, 35, 1)]


def test_a_cycle_across_actors_lets_time_through_its_merge(rmat):
    """The loop body in an actor of its own: the merge's feedback input (found across the channels) is left
    out of its watermark, so watermarks reach the sink while the loop runs."""
    from test_event_time_cycles import _loop

    src, snk = _loop(step_island=True).run(rmat)
    snk.request(10)
    src.send_watermark(6)
    snk.expect_watermark(6)
    src.send_next(8, ts=7)
    snk.expect_next_with_timestamp(1, 7)
    src.send_watermark(9)
    snk.expect_watermark(9)
    snk.cancel()


def test_recursively_in_its_own_actor_holds_the_watermark_behind_the_loop(rmat):
    from atoll.testkit import TestSink, TestSource

    src, snk = (TestSource.probe(event_time=True).island()
                .recursively(lambda s: s.filter(lambda x: x > 1).map(lambda x: x // 2)).island()
                .to_mat(TestSink.probe(event_time=True), Keep.both).run(rmat))
    src.send_next(8, ts=5).send_watermark(6)
    snk.request(10)
    assert [snk.expect_next_with_timestamp(x, 5)[0] for x in (8, 4, 2, 1)] == [8, 4, 2, 1]
    snk.expect_watermark(6)
    src.send_complete()
    snk.expect_complete()


def test_window_counters_are_live_from_the_driver_while_the_graph_runs(rmat):
    from atoll.testkit import TestSink, TestSource

    (src, stats), snk = (TestSource.probe(event_time=True)
                         .via_mat(islanded(Flow().tumbling_window(10, aggregate=Aggregate.count())), Keep.both)
                         .to_mat(TestSink.probe(event_time=True), Keep.both).run(rmat))
    snk.request(10)
    src.send_next("a", ts=3).send_next("b", ts=14).send_watermark(12)
    snk.expect_next(Window(None, 0, 10, 1))
    snk.expect_watermark(12)
    assert (stats.open_windows, stats.watermark, stats.late_dropped) == (1, 12, 0)
    src.send_next("late", ts=5)
    src.send_watermark(13)
    snk.expect_watermark(13)
    assert stats.late_dropped == 1  # read while the graph still runs
    src.send_complete()
    snk.expect_next(Window(None, 10, 20, 1))
    snk.expect_complete()
