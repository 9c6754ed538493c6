"""Stages that combine several elements into one stamp the output with the **max** timestamp of what they
combine (spec 1.2: "Stages that combine several elements (grouped, sliding, fold, reduce, zip, batch/conflate)
stamp the combined output with the max of its inputs"), not with the one grabbed last. Each case sends
out-of-order timestamps through event-time probes and checks each output element and its timestamp.
``scan`` is a 1-in-1-out stage in the spec: its running value carries the timestamp of the element just
folded in. Concat-like junctions do not combine: each element keeps its own timestamp.

The last case runs a combining stage in an island of its own on ``Materializer.ray()`` (one Ray session
for the module, started only by that case)."""
from __future__ import annotations

import os
from concurrent.futures import Future

import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

from atoll import (  # noqa: E402
    Aggregate,
    Attributes,
    ClosedShape,
    Flow,
    GraphDSL,
    Keep,
    Materializer,
    MergeLatest,
    RunnableGraph,
    Sink,
    Source,
    Supervision,
    Window,
    ZipWith,
)
from atoll._impl.ops import collection, combined_timestamps, fan_in  # noqa: E402
from atoll.testkit import TestSink, TestSource, assert_all_stages_stopped  # noqa: E402

RESUME = Attributes.supervision_strategy(Supervision.resuming_decider)


@pytest.fixture
def mat():
    m = Materializer.local()
    yield m
    try:
        assert_all_stages_stopped(m, timeout=5.0)
    finally:
        m.shutdown()


def probes(m, flow):
    return (TestSource.probe(event_time=True).via(flow)
            .to_mat(TestSink.probe(event_time=True, signals=False), Keep.both).run(m))


def send(src, *pairs):
    for elem, ts in pairs:
        src.send_next(elem, ts=ts)


def settle(src, snk, held_at):
    """Wait until the stage took everything sent so far: a watermark sent behind the elements comes out held
    at the smallest timestamp the stage keeps (so no demand races the elements into a different batch)."""
    src.send_watermark(1000)
    snk.expect_watermark(held_at)


def expect(snk, *pairs):
    for elem, ts in pairs:
        assert snk.expect_next_with_timestamp() == (elem, ts)


# ============================================================================ one input


def test_grouped_stamps_each_group_with_its_max(mat):
    src, snk = probes(mat, Flow().grouped(2))
    snk.request(3)
    send(src, (1, 5), (2, 3))
    expect(snk, ([1, 2], 5))  # not 3, the last one
    send(src, (3, 1), (4, 2))
    expect(snk, ([3, 4], 2))  # the previous group's max does not carry over
    send(src, (5, 9))
    src.send_complete()
    expect(snk, ([5], 9))
    snk.expect_complete()


def test_grouped_weighted_stamps_each_group_with_its_max(mat):
    src, snk = probes(mat, Flow().grouped_weighted(3, lambda x: x))
    snk.request(2)
    send(src, (2, 7), (1, 4))
    expect(snk, ([2, 1], 7))
    send(src, (1, 2), (1, 6))
    src.send_complete()
    expect(snk, ([1, 1], 6))
    snk.expect_complete()


def test_sliding_stamps_each_window_with_the_max_of_its_own_elements(mat):
    src, snk = probes(mat, Flow().sliding(3, 1))
    snk.request(4)
    send(src, (1, 5), (2, 9), (3, 1))
    expect(snk, ([1, 2, 3], 9))
    send(src, (4, 2))
    expect(snk, ([2, 3, 4], 9))
    send(src, (5, 3))
    expect(snk, ([3, 4, 5], 3))  # 9 slid out
    src.send_complete()
    snk.expect_complete()


def test_sliding_with_a_step_beyond_its_size_ignores_the_skipped_elements(mat):
    src, snk = probes(mat, Flow().sliding(2, 3))
    snk.request(3)
    send(src, (1, 4), (2, 1))
    expect(snk, ([1, 2], 4))
    send(src, (3, 99), (4, 2), (5, 3))  # 3 is never in a window
    expect(snk, ([4, 5], 3))
    send(src, (6, 1), (7, 8))
    src.send_complete()
    expect(snk, ([7], 8))  # the last, incomplete window: 6 was skipped
    snk.expect_complete()


def test_take_last_stamps_its_list_with_the_max_of_the_kept_elements(mat):
    src, snk = probes(mat, Flow().take_last(2))
    snk.request(1)
    send(src, (1, 9), (2, 1), (3, 2))
    src.send_complete()
    expect(snk, ([2, 3], 2))  # 1 (ts 9) fell out
    snk.expect_complete()


def test_grouped_adjacent_by_stamps_a_group_without_the_element_that_closed_it(mat):
    src, snk = probes(mat, Flow().grouped_adjacent_by(lambda e: e[0]))
    snk.request(3)
    send(src, (("a", 1), 6), (("a", 2), 2), (("b", 3), 1))
    expect(snk, ([("a", 1), ("a", 2)], 6))
    send(src, (("b", 4), 4), (("c", 5), 0))
    expect(snk, ([("b", 3), ("b", 4)], 4))
    src.send_complete()
    expect(snk, ([("c", 5)], 0))
    snk.expect_complete()


def test_grouped_adjacent_by_stamps_a_pending_group_and_the_open_one_separately(mat):
    src, snk = probes(mat, Flow().grouped_adjacent_by(lambda e: e[0]))
    send(src, (("a", 1), 7), (("a", 2), 3), (("b", 3), 5))  # no demand: [a1, a2] waits as pending
    src.send_complete()
    snk.request(2)
    expect(snk, ([("a", 1), ("a", 2)], 7), ([("b", 3)], 5))
    snk.expect_complete()


def test_grouped_within_stamps_each_group_with_its_max(mat):
    src, snk = probes(mat, Flow().grouped_within(2, 60.0))
    snk.request(2)
    send(src, (1, 5), (2, 3))
    expect(snk, ([1, 2], 5))
    send(src, (3, 4))
    src.send_complete()
    expect(snk, ([3], 4))
    snk.expect_complete()


def test_grouped_weighted_within_stamps_the_pending_element_by_itself(mat):
    src, snk = probes(mat, Flow().grouped_weighted_within(3, 60.0, lambda x: x))
    send(src, (1, 8), (1, 2), (2, 4))  # 2 would make the group weigh 4: it waits as pending
    src.send_complete()
    snk.request(2)
    expect(snk, ([1, 1], 8), ([2], 4))
    snk.expect_complete()


def test_conflate_stamps_the_aggregate_with_its_max(mat):
    src, snk = probes(mat, Flow().conflate(lambda a, b: a + b))
    send(src, (1, 5), (2, 3))  # no demand: folded into one
    settle(src, snk, 3)
    snk.request(1)
    expect(snk, (3, 5))
    snk.expect_watermark(1000)
    src.send_complete()
    snk.expect_complete()


def test_conflate_with_seed_stamps_the_aggregate_with_its_max(mat):
    src, snk = probes(mat, Flow().conflate_with_seed(lambda x: [x], lambda acc, x: acc + [x]))
    send(src, ("a", 2), ("b", 8), ("c", 4))
    settle(src, snk, 2)
    snk.request(1)
    expect(snk, (["a", "b", "c"], 8))
    src.send_complete()
    snk.expect_complete()


def test_batch_stamps_the_batch_with_its_max_and_the_pending_element_with_its_own(mat):
    src, snk = probes(mat, Flow().batch(2, lambda x: [x], lambda acc, x: acc + [x]))
    send(src, ("a", 6), ("b", 4), ("c", 1))  # a, b in the batch; c pending
    settle(src, snk, 1)
    snk.request(1)
    expect(snk, (["a", "b"], 6))
    snk.request(1)
    expect(snk, (["c"], 1))
    src.send_complete()
    snk.expect_complete()


def test_batch_weighted_stamps_the_batch_with_its_max(mat):
    src, snk = probes(mat, Flow().batch_weighted(10, len, lambda x: x, lambda acc, x: acc + x))
    send(src, ("ab", 3), ("c", 7), ("d", 5))
    settle(src, snk, 3)
    src.send_complete()
    snk.request(1)
    expect(snk, ("abcd", 7))
    snk.expect_complete()


def test_fold_stamps_the_result_with_the_max(mat):
    src, snk = probes(mat, Flow().fold(0, lambda a, x: a + x))
    snk.request(1)
    send(src, (1, 5), (2, 9), (3, 2))
    src.send_complete()
    expect(snk, (6, 9))
    snk.expect_complete()


def test_fold_counts_no_element_that_resume_skipped(mat):
    def add(a, x):
        if x < 0:
            raise ValueError("negative")
        return a + x

    src, snk = probes(mat, Flow().fold(0, add).with_attributes(RESUME))
    snk.request(1)
    send(src, (1, 5), (-1, 50), (2, 3))
    src.send_complete()
    expect(snk, (3, 5))  # the skipped element (ts 50) is not part of the result
    snk.expect_complete()


def _done(value):
    fut = Future()
    fut.set_result(value)
    return fut


def _failed(exc):
    fut = Future()
    fut.set_exception(exc)
    return fut


async def _add_later(a, x):
    return a + x


def test_fold_async_stamps_the_result_with_the_max(mat):
    src, snk = probes(mat, Flow().fold_async(0, _add_later))
    snk.request(1)
    send(src, (1, 5), (2, 9), (3, 2))  # the last element has the smallest timestamp
    src.send_complete()
    expect(snk, (6, 9))
    snk.expect_complete()


def test_fold_async_counts_no_element_whose_call_failed_under_resume(mat):
    def add(a, x):
        if x < 0:
            return _failed(ValueError("negative"))   # the result fails: the element is skipped
        if x == 0:
            raise ValueError("zero")                  # fn itself raises: skipped too
        return _done(a + x)

    src, snk = probes(mat, Flow().fold_async(0, add).with_attributes(RESUME))
    snk.request(1)
    send(src, (1, 5), (-1, 50), (0, 40), (2, 3))
    src.send_complete()
    expect(snk, (3, 5))  # neither skipped element (ts 50, 40) is part of the result
    snk.expect_complete()


def test_fold_async_restart_forgets_the_timestamps_folded_before(mat):
    def add(a, x):
        return _failed(ValueError("restart")) if x < 0 else _done(a + x)

    restart = Attributes.supervision_strategy(Supervision.restarting_decider)
    src, snk = probes(mat, Flow().fold_async(0, add).with_attributes(restart))
    snk.request(1)
    send(src, (1, 50), (-1, 60), (4, 7), (2, 3))
    src.send_complete()
    expect(snk, (6, 7))  # back to zero at the failure: 50 went with the accumulator
    snk.expect_complete()


def test_reduce_stamps_the_result_with_the_max_including_the_first_element(mat):
    src, snk = probes(mat, Flow().reduce(lambda a, x: a + x))
    snk.request(1)
    send(src, (7, 9), (1, 3), (2, 4))
    src.send_complete()
    expect(snk, (10, 9))  # the first element seeds the accumulator, its timestamp counts
    snk.expect_complete()


def test_fold_while_stamps_the_early_result_with_the_max_of_what_it_folded(mat):
    src, snk = probes(mat, Flow().fold_while(0, lambda acc: acc < 5, lambda a, x: a + x))
    snk.request(1)
    send(src, (1, 4), (2, 8), (3, 1))  # 6: the predicate fails, the result goes out
    expect(snk, (6, 8))
    snk.expect_complete()


def test_scan_stamps_the_running_value_with_the_element_just_folded_in(mat):
    # spec 1.2 lists scan with the 1-in-1-out stages: one output per input, carrying that input's timestamp
    # (as Flink's rolling reduce); zero goes out before any element and has none
    src, snk = probes(mat, Flow().scan(0, lambda a, x: a + x))
    snk.request(3)
    expect(snk, (0, None))
    send(src, (1, 5), (2, 3))
    expect(snk, (1, 5), (3, 3))
    src.send_complete()
    snk.expect_complete()


# ============================================================================ fan-in


def test_zip_stamps_each_pair_with_the_max_of_its_two_elements(mat):
    (a, b), snk = (TestSource.probe(event_time=True)
                   .zip(TestSource.probe(event_time=True), Keep.both)
                   .to_mat(TestSink.probe(event_time=True, signals=False), Keep.both).run(mat))
    snk.request(2)
    send(a, (1, 5), (2, 1))
    send(b, ("x", 3), ("y", 4))
    expect(snk, ((1, "x"), 5), ((2, "y"), 4))
    a.send_complete()
    snk.expect_complete()


def test_zip_with_of_three_inputs_stamps_the_max_of_the_three(mat):
    def build(bb, pa, pb, pc, out):
        z = bb.add(ZipWith(lambda x, y, z: x + y + z, 3))
        pa.out >> z.in_(0)
        pb.out >> z.in_(1)
        pc.out >> z.in_(2)
        z.out >> out.in_
        return ClosedShape

    pa, pb, pc, snk = RunnableGraph.from_graph(GraphDSL.create(
        build, TestSource.probe(event_time=True), TestSource.probe(event_time=True),
        TestSource.probe(event_time=True), TestSink.probe(event_time=True, signals=False))).run(mat)
    snk.request(2)
    send(pa, ("a", 1), ("d", 8))
    send(pb, ("b", 7), ("e", 2))
    send(pc, ("c", 2), ("f", 3))
    expect(snk, ("abc", 7), ("def", 8))
    pa.send_complete()
    snk.expect_complete()


def test_zip_latest_stamps_the_max_of_the_latest_element_of_each_input(mat):
    (a, b), snk = (TestSource.probe(event_time=True)
                   .zip_latest(TestSource.probe(event_time=True), Keep.both)
                   .to_mat(TestSink.probe(event_time=True, signals=False), Keep.both).run(mat))
    snk.request(1)
    a.send_next(1, ts=5)
    b.send_next("x", ts=3)
    expect(snk, ((1, "x"), 5))
    snk.request(1)
    b.send_next("y", ts=4)
    expect(snk, ((1, "y"), 5))  # 1 (ts 5) is still the latest of a
    snk.request(1)
    a.send_next(2, ts=1)
    expect(snk, ((2, "y"), 4))  # 5 was replaced
    a.send_complete()
    snk.expect_complete()


def test_merge_latest_stamps_the_max_of_the_latest_elements(mat):
    def build(bb, pa, pb, out):
        m = bb.add(MergeLatest(2))
        pa.out >> m.in_(0)
        pb.out >> m.in_(1)
        m.out >> out.in_
        return ClosedShape

    pa, pb, snk = RunnableGraph.from_graph(GraphDSL.create(
        build, TestSource.probe(event_time=True), TestSource.probe(event_time=True),
        TestSink.probe(event_time=True, signals=False))).run(mat)
    snk.request(2)
    pa.send_next(1, ts=6)
    pb.send_next(2, ts=2)
    expect(snk, ([1, 2], 6))
    pa.send_next(3, ts=1)
    expect(snk, ([3, 2], 2))
    pa.send_complete()
    pb.send_complete()
    snk.expect_complete()


def test_concat_does_not_combine_each_element_keeps_its_timestamp(mat):
    (a, b), snk = (TestSource.probe(event_time=True)
                   .concat(TestSource.probe(event_time=True), Keep.both)
                   .to_mat(TestSink.probe(event_time=True, signals=False), Keep.both).run(mat))
    snk.request(3)
    send(a, (1, 5), (2, 1))
    a.send_complete()
    send(b, (3, 2))
    expect(snk, (1, 5), (2, 1), (3, 2))
    b.send_complete()
    snk.expect_complete()


# ============================================================================ no event time: no cost


def test_graphs_without_event_time_never_compute_combined_timestamps(mat, monkeypatch):
    """The hooks are installed only in event-time graphs: without one, no max is ever computed."""
    def boom(*_a):
        raise AssertionError("a combined timestamp was computed in a graph without event time")

    monkeypatch.setattr(combined_timestamps, "latest", boom)
    monkeypatch.setattr(combined_timestamps, "later", boom)
    monkeypatch.setattr(collection, "later", boom)
    monkeypatch.setattr(fan_in, "latest", boom)
    src = Source.range(0, 10)
    flows = [Flow().grouped(3), Flow().sliding(3, 2), Flow().take_last(2), Flow().grouped_weighted(4, lambda x: 1),
             Flow().grouped_adjacent_by(lambda x: x // 4), Flow().fold(0, lambda a, x: a + x),
             Flow().reduce(lambda a, x: a + x), Flow().fold_while(0, lambda a: a < 10, lambda a, x: a + x)]
    for f in flows:
        assert src.via(f).run_with(Sink.seq(), mat).result(5)
    assert src.zip(src).run_with(Sink.seq(), mat).result(5)[0] == (0, 0)
    assert src.zip_latest(Source.single(1)).run_with(Sink.seq(), mat).result(5)

    def merge_latest(bb, out):
        m = bb.add(MergeLatest(2))
        bb.add(Source.range(0, 5)).out >> m.in_(0)
        bb.add(Source.range(0, 5)).out >> m.in_(1)
        m.out >> out.in_
        return ClosedShape

    assert RunnableGraph.from_graph(GraphDSL.create(merge_latest, Sink.seq())).run(mat).result(5)


# ============================================================================ Ray: a combining stage in its own island


@pytest.fixture(scope="module")
def ray_mat():
    from ray_start import shared_local_ray

    shared_local_ray()
    m = Materializer.ray(start_timeout=30)
    yield m
    m.shutdown()


def _grouped_then_windowed():
    # 12 then 9 make one group: stamped 12 (the max) it lands in [10, 20); stamped 9 (the last) in [0, 10)
    events = [12, 9, 1, 2, 25, 23]
    return (Source.from_iterable(events).with_timestamps(lambda t: t, max_out_of_orderness=5)
            .island().grouped(2).island()
            .tumbling_window(10, aggregate=Aggregate.collect()))


def test_combined_timestamp_local_reference(mat):
    got = _grouped_then_windowed().run_with(Sink.seq(), mat).result(10)
    assert got == [Window(None, 0, 10, [[1, 2]]), Window(None, 10, 20, [[12, 9]]), Window(None, 20, 30, [[25, 23]])]


def test_combined_timestamp_crosses_ray_islands(ray_mat):
    got = _grouped_then_windowed().run_with(Sink.seq(), ray_mat).result(60)
    assert got == [Window(None, 0, 10, [[1, 2]]), Window(None, 10, 20, [[12, 9]]), Window(None, 20, 30, [[25, 23]])]
    assert_all_stages_stopped(ray_mat, timeout=15.0)


# ============================================================================ checkpoints keep the combined timestamps


def _combined_then_windowed(flow_of):
    from atoll.testkit.round_trip import checkpoint_round_trip  # noqa: F401 - imported by the test below

    def make():
        # in every four elements the first has the largest timestamp (39 after the group's base, the others
        # 1-3): a combined element lands in the window of its max timestamp, which a restored stage knows only
        # if its checkpoint kept the timestamps of the elements it held
        src = Source.range(0, 160).map(lambda i: (i // 4 * 40 + (39 if i % 4 == 0 else i % 4), i)).with_timestamps(
            lambda e: e[0], max_out_of_orderness=40)
        return flow_of(src).tumbling_window(10, aggregate=Aggregate.collect())
    return make


COMBINERS = {
    "grouped": lambda s: s.grouped(4),
    "sliding": lambda s: s.sliding(4, 3),
    "fold": lambda s: s.fold(0, lambda a, e: a + e[1]),
    "fold_async": lambda s: s.fold_async(0, lambda a, e: _done(a + e[1])),
    "reduce": lambda s: s.map(lambda e: e[1]).reduce(lambda a, b: a + b),
}


@pytest.mark.parametrize("name,at", [(name, at) for name in sorted(COMBINERS)
                                     for at in ((0, 1, 5, 17) if name in ("grouped", "sliding") else (0,))])
def test_checkpoint_round_trip_keeps_combined_timestamps(name, at, tmp_path):
    from atoll.testkit.round_trip import checkpoint_round_trip

    expected, got = checkpoint_round_trip(_combined_then_windowed(COMBINERS[name]), at=at, storage=str(tmp_path))
    assert got == expected and expected


def test_merge_latest_keeps_the_timestamp_a_waiting_list_had_when_it_was_made(mat):
    def build(bb, pa, pb, out):
        m = bb.add(MergeLatest(2))
        pa.out >> m.in_(0)
        pb.out >> m.in_(1)
        m.out >> out.in_
        return ClosedShape

    pa, pb, snk = RunnableGraph.from_graph(GraphDSL.create(
        build, TestSource.probe(event_time=True), TestSource.probe(event_time=True),
        TestSink.probe(event_time=True, signals=False))).run(mat)
    pa.send_next(1, ts=6)
    pb.send_next(2, ts=2)   # [1, 2] waits for demand, made at max(6, 2)
    pa.send_next(3, ts=1)   # [3, 2] waits too, made at max(1, 2)
    snk.request(2)
    expect(snk, ([1, 2], 6), ([3, 2], 2))
    pa.send_complete()
    pb.send_complete()
    snk.expect_complete()
