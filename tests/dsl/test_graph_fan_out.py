"""Fan-out junctions built with GraphDSL and run on both materializers: Broadcast (Pekko's
GraphBroadcastSpec), Balance (GraphBalanceSpec), Partition and ``divert_to`` (GraphPartitionSpec).

Tests taking ``mat`` run on ``Materializer.local()`` and ``Materializer.ray()``; those taking
``local_mat`` only in-process. Result-only cases put junction outputs in islands of their own, so on
Ray the junction's outlets cross actor boundaries (including wires to shapes added later, which the
traversal meets forward).
"""
from __future__ import annotations

import re

import pytest

from atoll import (
    Attributes,
    Balance,
    Broadcast,
    ClosedShape,
    Flow,
    GraphDSL,
    Keep,
    Materializer,
    Merge,
    OverflowStrategy,
    Partition,
    Sink,
    SinkShape,
    Source,
    SourceShape,
    Supervision,
)
from atoll.errors import PartitionOutOfBoundsError
from atoll.testkit import TestSink, TestSource, assert_all_stages_stopped

from dsl_helpers import QUIET, TE, closed


def buffered():
    return Flow().buffer(16, OverflowStrategy.backpressure)


# ============================================================================================== Broadcast


def test_broadcast_to_other_subscriber(mat):
    def build(b, c1, c2):
        bc = b.add(Broadcast(2))
        Source.from_iterable([1, 2, 3]) >> bc.in_
        bc.out(0) >> buffered() >> c1.in_
        bc.out(1) >> buffered() >> c2.in_
        return ClosedShape

    c1, c2 = closed(build, TestSink.probe(), TestSink.probe()).run(mat)
    c1.request(1)
    c2.request(2)
    c1.expect_next(1)
    c1.expect_no_message(QUIET)
    c2.expect_next(1, 2)
    c2.expect_no_message(QUIET)
    c1.request(3)
    c1.expect_next(2, 3)
    c1.expect_complete()
    c2.request(3)
    c2.expect_next(3)
    c2.expect_complete()


def test_broadcast_one_way(local_mat):
    def build(b):
        bc = b.add(Broadcast(1))
        src = b.add(Source.range(1, 4))
        src >> bc.in_
        return SourceShape(bc.out(0))

    assert Source.from_graph(GraphDSL.create(build)).run_fold([], lambda acc, x: acc + [x], local_mat).result(5) == [1, 2, 3]


def test_broadcast_n_way_with_a_branch_per_island(local_mat):
    """Five outlets, each through its own island. The sinks are imported first, then the broadcast,
    then the branches: the broadcast's outlets are wired forward into the branch islands, the
    branches' outlets back to the sinks."""
    heads = [Sink.head()] * 5

    def build(b, *sinks):
        bc = b.add(Broadcast(5))
        Source.from_iterable([1, 2, 3]) >> bc.in_
        for i, s in enumerate(sinks):
            branch = b.add(Flow().grouped(5).island())
            bc.out(i) >> branch.in_
            branch.out >> s.in_
        return ClosedShape

    futures = closed(build, *heads, combine=lambda *fs: list(fs)).run(local_mat)
    assert [f.result(10) for f in futures] == [[1, 2, 3]] * 5


def test_broadcast_22_way(local_mat):
    def build(b, *sinks):
        bc = b.add(Broadcast(22))
        Source.from_iterable([1, 2, 3]) >> bc.in_
        for i, s in enumerate(sinks):
            bc.out(i) >> Flow().grouped(5) >> s.in_
        return ClosedShape

    futures = closed(build, *[Sink.head()] * 22, combine=lambda *fs: fs).run(local_mat)
    assert [f.result(5) for f in futures] == [[1, 2, 3]] * 22


def test_broadcast_produces_to_other_even_though_downstream_cancels(local_mat):
    def build(b, c1, c2):
        bc = b.add(Broadcast(2))
        Source.from_iterable([1, 2, 3]) >> bc.in_
        bc.out(0) >> Flow() >> c1.in_
        bc.out(1) >> Flow() >> c2.in_
        return ClosedShape

    c1, c2 = closed(build, TestSink.probe(), TestSink.probe()).run(local_mat)
    c1.cancel()
    c2.request(3)
    c2.expect_next(1, 2, 3)
    c2.expect_complete()


def test_broadcast_produces_to_downstream_even_though_other_cancels(local_mat):
    def build(b, c1, c2):
        bc = b.add(Broadcast(2))
        Source.from_iterable([1, 2, 3]) >> bc.in_
        bc.out(0) >> Flow().named("identity-a") >> c1.in_
        bc.out(1) >> Flow().named("identity-b") >> c2.in_
        return ClosedShape

    c1, c2 = closed(build, TestSink.probe(), TestSink.probe()).run(local_mat)
    c2.cancel()
    c1.request(3)
    c1.expect_next(1, 2, 3)
    c1.expect_complete()


def test_broadcast_cancels_upstream_when_downstreams_cancel(mat):
    def build(b, p, c1, c2):
        bc = b.add(Broadcast(2))
        p.out >> bc.in_
        bc.out(0) >> Flow() >> c1.in_
        bc.out(1) >> Flow() >> c2.in_
        return ClosedShape

    p, c1, c2 = closed(build, TestSource.probe(), TestSink.probe(), TestSink.probe()).run(mat)
    c1.request(3)
    c2.request(3)
    p.send_next(1)
    c1.expect_next(1)
    c2.expect_next(1)
    p.send_next(2)
    c1.expect_next(2)
    c2.expect_next(2)
    c1.cancel()
    c2.cancel()
    p.expect_cancellation()


def test_broadcast_passes_along_early_cancellation(local_mat):
    def build(b, c1, c2):
        bc = b.add(Broadcast(2))
        bc.out(0) >> c1.in_
        bc.out(1) >> c2.in_
        return SinkShape(bc.in_)

    sink = Sink.from_graph(GraphDSL.create(build, TestSink.probe(), TestSink.probe()))
    up, (c1, c2) = TestSource.probe().to_mat(sink, Keep.both).run(local_mat)
    c1.cancel()
    c2.cancel()
    up.expect_cancellation()


def test_also_to_broadcasts(local_mat):
    ps1, ps2 = Source.range(1, 7).also_to(TestSink.probe(), Keep.right).to_mat(TestSink.probe(), Keep.both).run(local_mat)
    ps1.request(6)
    ps2.request(6)
    ps1.expect_next(1, 2, 3, 4, 5, 6)
    ps2.expect_next(1, 2, 3, 4, 5, 6)
    ps1.expect_complete()
    ps2.expect_complete()


def test_also_to_cancels_if_side_branch_cancels(local_mat):
    p_in, p_side = TestSource.probe().also_to(TestSink.probe(), Keep.both).to_mat(Sink.ignore(), Keep.left).run(local_mat)
    p_side.cancel()
    p_in.expect_cancellation()


def test_also_to_cancels_if_main_branch_cancels(local_mat):
    p_in, p_main = TestSource.probe().also_to(Sink.ignore(), Keep.left).to_mat(TestSink.probe(), Keep.both).run(local_mat)
    p_main.cancel()
    p_in.expect_cancellation()


def test_broadcast_continues_to_remaining_outputs_when_a_non_eager_output_cancels(local_mat):
    def build(b, p, main, side):
        bc = b.add(Broadcast(2, eager_cancel=True, non_eager_cancel_outputs={1}))
        p.out >> bc.in_
        bc.out(0) >> main.in_
        bc.out(1) >> side.in_
        return ClosedShape

    p, main, side = closed(build, TestSource.probe(), TestSink.probe(), TestSink.probe()).run(local_mat)
    main.request(3)
    side.request(2)
    p.send_next(1)
    main.expect_next(1)
    side.expect_next(1)
    p.send_next(2)
    main.expect_next(2)
    side.expect_next(2)
    side.cancel()
    p.send_next(3)
    main.expect_next(3)
    p.send_complete()
    main.expect_complete()


def test_broadcast_rejects_non_eager_outputs_without_eager_cancel():
    with pytest.raises(ValueError, match="requires eager_cancel=True"):
        Broadcast(2, eager_cancel=False, non_eager_cancel_outputs={1})


# ============================================================================================== Balance


def test_balance_between_subscribers_which_signal_demand(mat):
    def build(b, c1, c2):
        bal = b.add(Balance(2))
        Source.from_iterable([1, 2, 3]) >> bal.in_
        bal.out(0) >> c1.in_
        bal.out(1) >> c2.in_
        return ClosedShape

    c1, c2 = closed(build, TestSink.probe(), TestSink.probe()).run(mat)
    c1.request(1)
    c1.expect_next(1)
    c1.expect_no_message(QUIET)
    c2.request(2)
    c2.expect_next(2, 3)
    c1.expect_complete()
    c2.expect_complete()


def test_balance_waits_for_demand_from_all_downstreams(local_mat):
    def build(b, s1, s2):
        bal = b.add(Balance(2, wait_for_all_downstreams=True))
        Source.from_iterable([1, 2, 3]) >> bal.in_
        bal.out(0) >> s1.in_
        bal.out(1) >> s2.in_
        return ClosedShape

    s1, s2 = closed(build, TestSink.probe(), TestSink.probe()).run(local_mat)
    s1.request(1)
    s1.expect_no_message(QUIET)  # s2 has not asked yet
    s2.request(2)
    s1.expect_next(1)
    s2.expect_next(2, 3)
    s1.expect_complete()
    s2.expect_complete()


def test_balance_waits_for_demand_from_all_non_cancelled_downstreams(local_mat):
    def build(b, s1, s2, s3):
        bal = b.add(Balance(3, wait_for_all_downstreams=True))
        Source.from_iterable([1, 2, 3]) >> bal.in_
        bal.out(0) >> s1.in_
        bal.out(1) >> s2.in_
        bal.out(2) >> s3.in_
        return ClosedShape

    s1, s2, s3 = closed(build, TestSink.probe(), TestSink.probe(), TestSink.probe()).run(local_mat)
    s1.request(1)
    s2.request(2)
    s1.expect_no_message(QUIET)
    s3.cancel()
    s1.expect_next(1)
    s2.expect_next(2, 3)
    s1.expect_complete()
    s2.expect_complete()


def test_balance_one_way(local_mat):
    def build(b):
        bal = b.add(Balance(1))
        src = b.add(Source.range(1, 4))
        src >> bal.in_
        return SourceShape(bal.out(0))

    assert Source.from_graph(GraphDSL.create(build)).run_fold([], lambda acc, x: acc + [x], local_mat).result(5) == [1, 2, 3]


def test_balance_5_way(local_mat):
    def build(b, *sinks):
        bal = b.add(Balance(5, wait_for_all_downstreams=True))
        Source.range(0, 15) >> bal.in_
        for i, s in enumerate(sinks):
            bal.out(i) >> s.in_
        return ClosedShape

    futures = closed(build, *[Sink.seq()] * 5, combine=lambda *fs: fs).run(local_mat)
    parts = [f.result(5) for f in futures]
    assert all(parts), parts  # every outlet pulled before the first element went out
    assert sorted(x for p in parts for x in p) == list(range(15))


def test_balance_between_all_three_outputs_each_in_its_own_island(mat):
    """Each output's fold runs in its own island (on Ray: its own actor); the sink added first is fed
    by the last outlet."""
    n = 1000

    def build(b, o1, o2, o3):
        bal = b.add(Balance(3, wait_for_all_downstreams=True))
        Source.repeat(1).take(n * 3) >> bal.in_
        for out, sink in zip(bal.outs, (o3, o2, o1)):
            out >> Flow().map(lambda x: x).island() >> sink.in_
        return ClosedShape

    fold = Sink.fold(0, lambda a, b: a + b)
    futures = closed(build, fold, fold, fold, combine=lambda *fs: fs).run(mat)
    sums = [f.result(20) for f in futures]
    assert 0 not in sums
    assert sum(sums) == n * 3


def test_balance_fairly_between_three_outputs(local_mat):
    def build(b, o1, o2, o3):
        bal = b.add(Balance(3))
        Source.range(1, 8) >> bal.in_
        bal.out(0) >> o1.in_
        bal.out(1) >> o2.in_
        bal.out(2) >> o3.in_
        return ClosedShape

    p1, p2, p3 = closed(build, TestSink.probe(), TestSink.probe(), TestSink.probe()).run(local_mat)
    p1.request_next(1)
    p2.request_next(2)
    p3.request_next(3)
    p2.request_next(4)
    p1.request_next(5)
    p3.request_next(6)
    p1.request_next(7)
    p1.expect_complete()
    p2.expect_complete()
    p3.expect_complete()


@pytest.mark.parametrize("cancelled", [0, 1], ids=["first cancels", "second cancels"])
def test_balance_produces_to_the_other_when_one_cancels(local_mat, cancelled):
    def build(b, c1, c2):
        bal = b.add(Balance(2))
        Source.from_iterable([1, 2, 3]) >> bal.in_
        bal.out(0) >> c1.in_
        bal.out(1) >> c2.in_
        return ClosedShape

    probes = closed(build, TestSink.probe(), TestSink.probe()).run(local_mat)
    probes[cancelled].cancel()
    other = probes[1 - cancelled]
    other.request(3)
    other.expect_next(1, 2, 3)
    other.expect_complete()


def _balance_with_publisher(mat, **kw):
    def build(b, p, c1, c2):
        bal = b.add(Balance(2, **kw))
        p.out >> bal.in_
        bal.out(0) >> c1.in_
        bal.out(1) >> c2.in_
        return ClosedShape

    return closed(build, TestSource.probe(), TestSink.probe(), TestSink.probe()).run(mat)


def test_balance_cancels_upstream_when_all_downstreams_cancel(local_mat):
    p, c1, c2 = _balance_with_publisher(local_mat)
    c1.request(1)
    p.expect_request()
    p.send_next(1)
    c1.expect_next(1)
    c2.request(1)
    p.send_next(2)
    c2.expect_next(2)
    c1.cancel()
    c2.cancel()
    p.expect_cancellation()


def test_balance_cancels_upstream_when_any_downstream_cancels_if_eager(local_mat):
    p, c1, c2 = _balance_with_publisher(local_mat, eager_cancel=True)
    c1.request(1)
    p.expect_request()
    p.send_next(1)
    c1.expect_next(1)
    c2.request(1)
    p.send_next(2)
    c2.expect_next(2)
    c1.cancel()
    p.expect_cancellation()


def test_balance_does_not_push_an_output_twice(local_mat):
    p, c1, c2 = _balance_with_publisher(local_mat)
    c1.request(1)
    p.expect_request()
    p.send_next(1)
    c1.expect_next(1)
    c2.request(1)
    c2.cancel()
    p.send_next(2)
    c1.cancel()
    p.expect_cancellation()


def test_balance_does_not_dequeue_from_an_empty_outlet_queue(local_mat):
    def build(b, p, c1, c2, c3):
        bal = b.add(Balance(3))
        p.out >> bal.in_
        bal.out(0) >> c1.in_
        bal.out(1) >> c2.in_
        bal.out(2) >> c3.in_
        return ClosedShape

    p, c1, c2, c3 = closed(build, TestSource.probe(), TestSink.probe(), TestSink.probe(), TestSink.probe()).run(local_mat)
    c1.request(1)
    c1.cancel()
    c2.request(1)
    c2.cancel()
    p.expect_request()
    p.send_next(1)
    c3.request(1)
    c3.expect_next(1)
    c3.cancel()
    p.expect_cancellation()


# ============================================================================================== Partition


def _by_size(x):
    return 0 if x > 3 else 1 if x < 3 else 2


def partition_through_islands():
    """The partition is added after its sinks; two of its outlets feed islands added after it."""

    def build(b, s1, s2, s3):
        part = b.add(Partition(3, _by_size))
        Source.from_iterable([1, 2, 3, 4, 5]) >> part.in_
        part.out(0) >> Flow().island() >> s1.in_
        part.out(1) >> Flow().map(lambda x: x).island() >> s2.in_
        part.out(2) >> s3.in_
        return ClosedShape

    return closed(build, Sink.seq(), Sink.seq(), Sink.seq(), combine=lambda *fs: fs)


def test_partition_to_three_subscribers_through_islands(mat):
    s1, s2, s3 = partition_through_islands().run(mat)
    assert set(s1.result(10)) == {4, 5}
    assert set(s2.result(10)) == {1, 2}
    assert set(s3.result(10)) == {3}


def test_island_graphs_wire_junction_outlets_forward_and_back_across_islands(capsys):
    """What the Ray runs above exercise: the materializer meets a junction's outlet before the
    island it feeds (a forward wire, resolved later) and an island's outlet after the shape it feeds."""
    m = Materializer.local(debug=True)
    try:
        capsys.readouterr()
        s1, s2, s3 = partition_through_islands().run(m)
        assert set(s1.result(5)) == {4, 5}
        log = capsys.readouterr().err
        assert_all_stages_stopped(m, timeout=5.0)
    finally:
        m.shutdown()
    assert "resolved forward cross-island wire Outlet(Partition.out1)" in log
    assert re.search(r"wire Outlet\(map\.out\) -> global \d+: cross-island to", log)


def _two_way(pred_first):
    return lambda x: 0 if pred_first(x) else 1


def _partition_to_probes(mat, elems, fn):
    def build(b, c1, c2):
        part = b.add(Partition(2, fn))
        Source.from_iterable(elems) >> part.in_
        part.out(0) >> c1.in_
        part.out(1) >> c2.in_
        return ClosedShape

    return closed(build, TestSink.probe(), TestSink.probe()).run(mat)


def test_partition_completes_after_upstream_completes(local_mat):
    c1, c2 = _partition_to_probes(local_mat, ["this", "is", "just", "another", "test"], _two_way(lambda s: len(s) > 4))
    c1.request(1)
    c2.request(4)
    c1.expect_next("another")
    c2.expect_next("this", "is", "just", "test")
    c1.expect_complete()
    c2.expect_complete()


def test_partition_remembers_first_pull_though_first_element_targeted_another_out(mat):
    c1, c2 = _partition_to_probes(mat, [6, 3], _two_way(lambda x: x < 6))
    c1.request(1)
    c1.expect_no_message(QUIET)
    c2.request(1)
    c2.expect_next(6)
    c1.expect_next(3)
    c1.expect_complete()
    c2.expect_complete()


def _partition_with_publisher(mat, eager_cancel):
    def build(b, p, c1, c2):
        part = b.add(Partition(2, _two_way(lambda x: x < 6), eager_cancel=eager_cancel))
        p.out >> part.in_
        part.out(0) >> buffered() >> c1.in_
        part.out(1) >> buffered() >> c2.in_
        return ClosedShape

    return closed(build, TestSource.probe(), TestSink.probe(), TestSink.probe()).run(mat)


def test_partition_cancels_upstream_when_all_downstreams_cancel_if_not_eager(local_mat):
    p, c1, c2 = _partition_with_publisher(local_mat, eager_cancel=False)
    c1.request(3)
    c2.request(3)
    p.send_next(1)
    p.send_next(8)
    c1.expect_next(1)
    c2.expect_next(8)
    p.send_next(2)
    c1.expect_next(2)
    c1.cancel()
    p.send_next(9)
    c2.expect_next(9)
    c2.cancel()
    p.expect_cancellation()


def test_partition_cancels_upstream_when_any_downstream_cancels_if_eager(local_mat):
    p, c1, c2 = _partition_with_publisher(local_mat, eager_cancel=True)
    c1.request(3)
    c2.request(3)
    p.send_next(1)
    p.send_next(8)
    c1.expect_next(1)
    c2.expect_next(8)
    c1.cancel()
    p.expect_cancellation()


def test_partition_handles_upstream_completion_and_downstream_cancel(local_mat):
    c1, c2 = _partition_to_probes(local_mat, ["a", "b", "c", "d"], _two_way(lambda s: s in ("a", "b")))
    c1.request(10)
    c2.request(1)
    c1.expect_next("a", "b")
    c2.expect_next("c")
    c2.cancel()
    c1.expect_complete()


def test_partition_handles_upstream_completion_and_downstream_pulls(local_mat):
    c1, c2 = _partition_to_probes(local_mat, ["a", "b", "c"], _two_way(lambda s: s in ("a", "b")))
    c1.request(10)
    c1.expect_next("a", "b")
    c2.request(1)
    c2.expect_next("c")
    c1.expect_complete()
    c2.expect_complete()


def test_partition_works_with_merge(local_mat):
    elems = [5, 2, 9, 1, 1, 1, 10]

    def build(b, sink):
        part = b.add(Partition(2, _two_way(lambda x: x < 4)))
        merge = b.add(Merge(2))
        Source.from_iterable(elems) >> part.in_
        part.out(0) >> merge.in_(0)
        part.out(1) >> merge.in_(1)
        merge.out >> sink.in_
        return ClosedShape

    assert sorted(closed(build, Sink.seq()).run(local_mat).result(5)) == sorted(elems)


def test_partition_completion_waits_for_pending_output(local_mat):
    c1, c2 = _partition_to_probes(local_mat, [6], _two_way(lambda x: x < 6))
    c1.request(1)
    c1.expect_no_message(QUIET)
    c2.request(1)
    c2.expect_next(6)
    c1.expect_complete()
    c2.expect_complete()


def test_partition_fails_if_partitioner_outcome_is_out_of_bounds(local_mat):
    def build(b, c1):
        part = b.add(Partition(2, lambda x: -1 if x < 0 else 0))
        Source.from_iterable([-3]) >> part.in_
        part.out(0) >> c1.in_
        part.out(1) >> Sink.ignore()
        return ClosedShape

    c1 = closed(build, TestSink.probe()).run(local_mat)
    c1.request(1)
    exc = c1.expect_error(PartitionOutOfBoundsError)
    assert "[0,1]" in str(exc) and "returned: [-1]" in str(exc)


def _raising(tag):
    def fn(x):
        if x == 3:
            raise TE(tag)
        return _by_size(x)

    return fn


def _out_of_bounds_on_3(x):
    return -1 if x == 3 else _by_size(x)


@pytest.mark.parametrize(
    "fn, directive",
    [
        (_raising("Resume"), Supervision.RESUME),
        (_raising("Restart"), Supervision.RESTART),
        (_out_of_bounds_on_3, Supervision.RESUME),
    ],
    ids=["resume", "restart", "out of bounds resumed"],
)
def test_partition_to_three_subscribers_with_supervision(local_mat, fn, directive):
    def build(b, s1, s2, s3):
        part = b.add(Partition(3, fn))
        Source.from_iterable([1, 2, 3, 4, 5]) >> part.in_
        part.out(0) >> s1.in_
        part.out(1) >> s2.in_
        part.out(2) >> s3.in_
        return ClosedShape

    graph = closed(build, Sink.seq(), Sink.seq(), Sink.seq(), combine=lambda *fs: fs).with_attributes(
        Attributes.supervision_strategy(lambda e: directive)
    )
    s1, s2, s3 = graph.run(local_mat)
    assert set(s1.result(5)) == {4, 5}
    assert set(s2.result(5)) == {1, 2}
    assert s3.result(5) == []


def test_divert_to_sends_matching_elements_to_the_sink(mat):
    odd, even = Source.range(1, 3).divert_to(TestSink.probe(), lambda x: x % 2 != 0, Keep.right).to_mat(TestSink.probe(), Keep.both).run(mat)
    even.request(1)
    even.expect_no_message(QUIET)
    odd.request(1)
    odd.expect_next(1)
    even.expect_next(2)
    odd.expect_complete()
    even.expect_complete()


def test_divert_to_cancels_when_any_downstream_cancels(local_mat):
    (pub, odd), even = (
        TestSource.probe()
        .divert_to(TestSink.probe(), lambda x: x % 2 != 0, Keep.both)
        .to_mat(TestSink.probe(), Keep.both)
        .run(local_mat)
    )
    even.request(1)
    pub.send_next(2)
    even.expect_next(2)
    odd.cancel()
    pub.expect_cancellation()
