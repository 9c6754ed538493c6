"""batch / batch_weighted: ported from Pekko's FlowBatchSpec and FlowBatchWeightedSpec (Pekko's
input buffers of 2), under ``Materializer.local(clock=ManualClock())`` so the spec's pauses are
virtual-time pauses that wait until the islands are quiescent (no race between elements and demand)."""
from __future__ import annotations

import sys

import pytest
from ops_kit import TE

from atoll import Attributes, Flow, Keep, Materializer, OverflowStrategy, Sink, Source, Supervision
from atoll.testkit import ManualClock, TestSink, TestSource, assert_all_stages_stopped

MAX = sys.maxsize


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture(params=["fused", "unfused"])
def mat(request, clock):
    m = Materializer.local(clock=clock, fusion=request.param == "fused", input_buffer=(2, 2))
    yield m
    try:
        assert_all_stages_stopped(m, timeout=5.0)
    finally:
        m.shutdown()


def _probes(flow, mat):
    return TestSource.probe().via(flow).to_mat(TestSink.probe(), Keep.both).run(mat)


def _add(a, b):
    return a + b


def test_pass_through_elements_unchanged_when_there_is_no_rate_difference(mat):
    src, sink = _probes(Flow().batch(2, lambda i: i, _add), mat)
    for i in range(1, 101):
        sink.request(1)
        src.send_next(i)
        sink.expect_next(i)
    sink.cancel()


def test_aggregate_elements_while_downstream_is_silent(mat):
    src, sink = _probes(Flow().batch(MAX, lambda i: [i], lambda xs, i: [i] + xs), mat)
    sink.ensure_subscription()
    for i in range(1, 11):
        src.send_next(i)
    sink.expect_no_message(1.0)
    sink.request(1)
    sink.expect_next([10, 9, 8, 7, 6, 5, 4, 3, 2, 1])
    sink.cancel()


def test_work_on_a_variable_rate_chain(mat):
    fut = Source.range(1, 1001).batch(100, lambda i: i, _add).run_with(Sink.fold(0, _add), mat)
    assert fut.result(10) == 500500


def test_backpressure_subscriber_when_upstream_is_slower(mat):
    src, sink = _probes(Flow().batch(2, lambda i: i, _add), mat)
    sink.request(1)
    src.send_next(1)
    sink.expect_next(1)
    sink.request(1)
    sink.expect_no_message(0.5)
    src.send_next(2)
    sink.expect_next(2)
    src.send_next(3)
    src.send_next(4)
    sink.expect_no_message(0.5)
    sink.request(1)
    sink.expect_next(7)
    sink.request(1)
    sink.expect_no_message(0.5)
    sink.cancel()


def test_a_pending_element_does_not_join_a_full_batch(mat):
    src, sink = _probes(Flow().batch(2, lambda i: [i], lambda xs, i: xs + [i]), mat)
    sink.ensure_subscription()
    src.send_next(1)
    src.send_next(2)  # the batch is full
    src.send_next(3)  # pending: upstream is not pulled again
    sink.expect_no_message(0.1)
    sink.request(1)
    sink.expect_next([1, 2])
    sink.request(1)
    sink.expect_next([3])
    src.send_complete()
    sink.expect_complete()


def test_work_with_a_buffer_and_fold(mat):
    fut = (Source.range(1, 51).batch(MAX, lambda i: i, _add).buffer(50, OverflowStrategy.backpressure)
           .run_with(Sink.fold(0, _add), mat))
    assert fut.result(3) == sum(range(1, 51))


def _cost_boom(i):
    if i == 3:
        raise TE("boom")
    return i


def _sup(decider):
    return Attributes.supervision_strategy(decider)


@pytest.mark.parametrize("attrs", [_sup(Supervision.stopping_decider), None])
def test_fail_stream_when_cost_fn_throws_and_supervision_is_stop(mat, attrs):
    flow = Flow().batch_weighted(10, _cost_boom, lambda i: i, _add)
    if attrs is not None:
        flow = flow.with_attributes(attrs)
    fut = Source.range(1, 6).via(flow).run_with(Sink.ignore(), mat)
    with pytest.raises(TE, match="boom"):
        fut.result(3)


def test_resume_when_cost_fn_throws_and_supervision_is_resume(mat):
    fut = (Source.range(1, 6).batch_weighted(MAX, _cost_boom, lambda i: i, _add)
           .with_attributes(_sup(Supervision.resuming_decider)).run_with(Sink.fold(0, _add), mat))
    assert fut.result(3) == 12  # 3 is skipped


def _cost_boom_one(i):
    if i == 3:
        raise TE("boom")
    return 1


@pytest.mark.parametrize("decider, expected", [(Supervision.resuming_decider, 1 + 2 + 4 + 5),
                                               (Supervision.restarting_decider, 4 + 5)])
def test_keep_or_reset_the_accumulated_batch_when_cost_fn_throws(mat, decider, expected):
    flow = Flow().batch_weighted(MAX, _cost_boom_one, lambda i: i, _add).with_attributes(_sup(decider))
    src, sink = _probes(flow, mat)
    sink.ensure_subscription()
    for i in range(1, 6):
        src.send_next(i)
    src.send_complete()
    sink.expect_no_message(0.3)
    sink.request(1)
    sink.expect_next(expected)
    sink.expect_complete()


def test_seed_throwing_with_resume_drops_the_element(mat):
    def seed(i):
        if i == 1:
            raise TE("seed")
        return i

    flow = Flow().batch(MAX, seed, _add).with_attributes(_sup(Supervision.resuming_decider))
    src, sink = _probes(flow, mat)
    sink.ensure_subscription()
    for i in range(1, 4):
        src.send_next(i)
    src.send_complete()
    sink.expect_no_message(0)
    sink.request(1)
    sink.expect_next(5)
    sink.expect_complete()


# --------------------------------------------------------------------------- FlowBatchWeightedSpec
def test_not_aggregate_heavy_elements(mat):
    src, sink = _probes(Flow().batch_weighted(3, lambda _: 4, lambda i: i, _add), mat)
    sink.ensure_subscription()
    src.send_next(1)
    src.send_next(2)
    sink.expect_no_message(0)
    sink.request(1)
    sink.expect_next(1)
    src.send_next(3)
    sink.expect_no_message(1.0)
    sink.request(2)
    sink.expect_next(2)
    sink.expect_next(3)
    sink.cancel()


def test_validation():
    with pytest.raises(ValueError, match=r"^batch: argument 'max' must be >= 1, got 0$"):
        Flow().batch(0, lambda i: i, _add)
    with pytest.raises(ValueError, match=r"^batch_weighted: argument 'max_weight' must be >= 1, got -1$"):
        Flow().batch_weighted(-1, len, lambda i: i, _add)
    with pytest.raises(TypeError, match=r"^batch_weighted: argument 'cost' must be callable"):
        Flow().batch_weighted(3, 4, lambda i: i, _add)
    with pytest.raises(TypeError, match=r"^batch: argument 'aggregate' must be callable"):
        Flow().batch(3, lambda i: i, None)
