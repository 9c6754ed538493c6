"""watch_termination: ported from Pekko's FlowWatchTerminationSpec.

Atoll's ``watch_termination(combine=Keep.right)`` is Pekko's ``watchTermination()(combine)``.

Added beyond the Pekko spec: a cancellation with a failure cause fails the future, elements pass
unchanged, materialized-value combination, and a fresh future per materialization.
"""
from __future__ import annotations

from concurrent.futures import Future

from ops_kit import TE

from atoll import Done, Flow, Keep, Materializer, NotUsed, Sink, Source
from atoll.errors import AbruptStageTerminationError, AbruptTerminationError
from atoll.testkit import TestSink, TestSource


def test_complete_future_when_stream_is_completed(mat):
    fut, probe = Source.range(1, 5).watch_termination().to_mat(TestSink.probe(), Keep.both).run(mat)
    probe.request(4)
    probe.expect_next(1, 2, 3, 4)
    assert fut.result(3) is Done
    probe.expect_complete()


def test_complete_future_when_stream_is_cancelled_from_downstream(mat):
    fut, probe = Source.range(1, 5).watch_termination().to_mat(TestSink.probe(), Keep.both).run(mat)
    probe.request(3)
    probe.expect_next(1, 2, 3)
    probe.cancel()
    assert fut.result(3) is Done


def test_fail_future_when_stream_is_failed(mat):
    ex = TE("Stream failed.")
    src, fut = TestSource.probe().watch_termination(Keep.both).to(Sink.ignore()).run(mat)
    src.send_next(1)
    src.send_error(ex)
    assert fut.exception(3) is ex


def test_complete_the_future_for_an_empty_stream(mat):
    fut, probe = Source.empty().watch_termination().to_mat(TestSink.probe(), Keep.both).run(mat)
    probe.request(1)
    assert fut.result(3) is Done
    probe.expect_complete()


def test_complete_future_for_graph(mat):
    (src, fut), sink = (
        TestSource.probe()
        .watch_termination(Keep.both)
        .concat(Source.range(2, 6))
        .to_mat(TestSink.probe(), Keep.both)
        .run(mat)
    )
    sink.request(5)
    src.send_next(1)
    sink.expect_next(1)
    sink.expect_no_message(0.05)
    assert not fut.done()
    src.send_complete()
    assert fut.result(3) is Done
    sink.expect_next_n([2, 3, 4, 5])
    sink.expect_complete()


def test_fail_future_when_stream_abruptly_terminated():
    m = Materializer.local()
    try:
        src, fut = TestSource.probe().watch_termination(Keep.both).to(Sink.ignore()).run(m)
        src.ensure_subscription()
        m.shutdown()
        assert isinstance(fut.exception(3), (AbruptTerminationError, AbruptStageTerminationError))
    finally:
        m.shutdown()


# =========================================================================== beyond the Pekko spec
def test_fail_future_when_downstream_cancels_with_a_failure(mat):
    src, fut, sink = _watched(mat)
    cause = TE("down")
    sink.cancel(cause)
    assert src.expect_cancellation() == cause
    assert fut.exception(3) == cause


def test_pass_elements_and_demand_through_unchanged(mat):
    src, fut, sink = _watched(mat)
    sink.request(2)
    src.send_next_many("a", "b")
    sink.expect_next("a", "b")
    sink.expect_no_message(0.05)
    assert not fut.done()
    src.send_complete()
    sink.expect_complete()
    assert fut.result(3) is Done


def test_watch_termination_combines_with_the_current_materialized_value(mat):
    left = Source.single(1).watch_termination(Keep.left).to(Sink.ignore()).run(mat)
    assert left is NotUsed
    both = Source.single(1).watch_termination(Keep.both).to(Sink.ignore()).run(mat)
    assert both[0] is NotUsed and both[1].result(3) is Done
    right = Source.single(1).watch_termination().to(Sink.ignore()).run(mat)
    assert isinstance(right, Future) and right.result(3) is Done


def test_each_materialization_gets_its_own_future(mat):
    flow = Flow().watch_termination()
    f1 = Source.single(1).via_mat(flow, Keep.right).to(Sink.ignore()).run(mat)
    f2 = Source.failed(TE("x")).via_mat(flow, Keep.right).to(Sink.ignore()).run(mat)
    assert f1 is not f2
    assert f1.result(3) is Done
    assert f2.exception(3) == TE("x")


def _watched(mat):
    (src, fut), sink = (
        TestSource.probe().watch_termination(Keep.both).to_mat(TestSink.probe(), Keep.both).run(mat)
    )
    return src, fut, sink
