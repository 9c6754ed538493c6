"""expand / extrapolate: ported from Pekko's FlowExpandSpec and FlowExtrapolateSpec (Pekko's input
buffers of 2), under ``Materializer.local(clock=ManualClock())``: where the spec needs an element
to arrive before a request ("if the request comes first it will be extrapolated"), the test waits
until the islands are quiescent (``expect_no_message(0)`` / ``clock.settle()``) instead of racing.

Not ported: the "backpressure publisher when subscriber is slower" cases (they count Reactive
Streams request batches of Pekko's input buffer, which Atoll's channel protocol sizes differently);
backpressure is checked with a bounded count of pulled elements instead."""
from __future__ import annotations

import itertools

import pytest
from ops_kit import TE

from atoll import Attributes, Flow, Keep, Materializer, Sink, Source, Supervision
from atoll.testkit import ManualClock, TestSink, TestSource, assert_all_stages_stopped


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


def _sup(decider):
    return Attributes.supervision_strategy(decider)


def _forever(x):
    return itertools.repeat(x)


class _Broken:
    """An iterator whose every step raises."""

    def __iter__(self):
        return self

    def __next__(self):
        raise TE("boom")


# =========================================================================== expand
def test_pass_through_elements_unchanged_when_there_is_no_rate_difference(mat):
    src, sink = _probes(Flow().expand(lambda x: iter([x])), mat)
    for i in range(1, 101):
        src.send_next(i)
        sink.expect_no_message(0)  # the element is there before the request
        assert sink.request_next() == i
    sink.cancel()


def test_expand_elements_while_upstream_is_silent(mat):
    src, sink = _probes(Flow().expand(_forever), mat)
    src.send_next(42)
    for _ in range(100):
        assert sink.request_next() == 42
    src.send_next(-42)
    sink.expect_no_message(0.5)
    assert sink.request_next() == -42
    sink.cancel()


def test_do_not_drop_last_element(mat):
    src, sink = _probes(Flow().expand(_forever), mat)
    src.send_next(1)
    assert sink.request_next() == 1
    src.send_next(2)
    src.send_complete()
    sink.expect_no_message(0.5)
    assert sink.request_next() == 2
    sink.expect_complete()


def test_work_on_a_variable_rate_chain(mat):
    fut = Source.range(1, 101).expand(_forever).run_with(Sink.fold(set(), lambda s, x: s | {x}), mat)
    assert fut.result(10) == set(range(1, 101))


def test_backpressure_publisher_when_subscriber_is_slower(mat):
    pulled = []

    def record(x):
        pulled.append(x)
        return x

    src, sink = TestSource.probe().map(record).expand(_forever).to_mat(TestSink.probe(), Keep.both).run(mat)
    src.send_next(1)
    assert sink.request_next() == 1
    assert sink.request_next() == 1
    for _ in range(2):
        src.send_next(2)  # one is taken by expand (waiting to be emitted first), one waits in the buffer
    sink.expect_no_message(0.5)
    sink.request(2)
    sink.expect_next(2, 2)
    assert pulled == [1, 2, 2]
    sink.cancel()


def test_work_properly_with_finite_extrapolations(mat):
    src, sink = _probes(Flow().expand(lambda i: ((i, k) for k in range(3))), mat)
    src.send_next(1)
    sink.request(4)
    sink.expect_next((1, 0), (1, 1), (1, 2))
    sink.expect_no_message(0.1)
    src.send_next(2)
    src.send_complete()
    sink.expect_next((2, 0))
    sink.expect_complete()


def _expander(i):
    if i == 3:
        raise TE("boom")
    return iter([i])


@pytest.mark.parametrize("attrs", [_sup(Supervision.stopping_decider), None])
def test_fail_stream_when_expander_throws_and_supervision_is_stop(mat, attrs):
    flow = Flow().expand(_expander)
    if attrs is not None:
        flow = flow.with_attributes(attrs)
    with pytest.raises(TE, match="boom"):
        Source.range(1, 6).via(flow).run_with(Sink.ignore(), mat).result(3)


def _expander_12(i):
    if i == 1:
        return iter([1, 10, 11])
    if i == 2:
        raise TE("boom")
    return iter([i])


def test_resume_and_keep_current_extrapolation_when_expander_throws(mat):
    src, sink = _probes(Flow().expand(_expander_12).with_attributes(_sup(Supervision.resuming_decider)), mat)
    src.send_next(1)
    assert sink.request_next() == 1
    src.send_next(2)  # dropped under Resume
    sink.expect_no_message(0)
    assert sink.request_next() == 10  # the current extrapolation goes on
    sink.cancel()


def test_complete_immediately_on_upstream_finish_if_expanded_is_true(mat):
    sink = Source.single(1).expand(lambda _: iter([1, 2, 3])).run_with(TestSink.probe(), mat)
    assert sink.request_next() == 1
    sink.expect_complete()


def test_restart_and_reset_current_extrapolation_when_expander_throws(mat):
    src, sink = _probes(Flow().expand(_expander_12).with_attributes(_sup(Supervision.restarting_decider)), mat)
    src.send_next(1)
    assert sink.request_next() == 1
    src.send_next(2)
    sink.expect_no_message(0)
    sink.request(1)
    sink.expect_no_message(0.3)  # the extrapolation was reset: nothing to emit
    src.send_next(3)
    sink.expect_next(3)
    sink.cancel()


def _broken_on_3(i):
    return _Broken() if i == 3 else iter([i])


@pytest.mark.parametrize("decider", [Supervision.resuming_decider, Supervision.restarting_decider])
def test_resume_or_restart_when_iterator_throws_during_iteration(mat, decider):
    fut = Source.range(1, 5).expand(_broken_on_3).with_attributes(_sup(decider)).run_with(Sink.seq(), mat)
    assert fut.result(3) == [1, 2, 4]


def test_stop_when_iterator_throws_during_iteration(mat):
    with pytest.raises(TE, match="boom"):
        Source.range(1, 5).expand(_broken_on_3).run_with(Sink.seq(), mat).result(3)


# =========================================================================== extrapolate
def test_extrapolate_passes_through_elements_unchanged_when_there_is_no_rate_difference(mat):
    src, sink = _probes(Flow().extrapolate(lambda _: iter(())), mat)
    for i in range(1, 101):
        src.send_next(i)
        sink.expect_no_message(0)
        assert sink.request_next() == i
    sink.cancel()


def test_extrapolate_from_elements_while_upstream_is_silent(mat):
    src, sink = _probes(Flow().extrapolate(lambda e: itertools.repeat(e + 1)), mat)
    src.send_next(42)
    assert sink.request_next() == 42
    for _ in range(100):
        assert sink.request_next() == 43
    src.send_next(-42)
    sink.expect_no_message(0.5)
    assert sink.request_next() == -42
    sink.cancel()


def test_extrapolate_always_emits_the_initial_element_first(mat):
    src, sink = _probes(Flow().extrapolate(_forever, initial=44), mat)
    src.send_next(42)
    sink.expect_no_message(0)
    assert sink.request_next() == 44
    assert sink.request_next() == 42
    sink.cancel()


def test_extrapolate_emits_the_initial_element_when_upstream_is_empty(mat):
    sink = Source.empty().extrapolate(lambda _: iter(()), initial=7).run_with(TestSink.probe(), mat)
    assert sink.request_next() == 7
    sink.expect_complete()


def test_extrapolate_does_not_drop_the_last_element(mat):
    src, sink = _probes(Flow().extrapolate(lambda _: iter(())), mat)
    src.send_next(1)
    assert sink.request_next() == 1
    src.send_next(2)
    src.send_complete()
    sink.expect_no_message(0.5)
    assert sink.request_next() == 2
    sink.expect_complete()


def test_extrapolate_works_on_a_variable_rate_chain(mat):
    fut = Source.range(1, 101).extrapolate(_forever).run_with(Sink.fold(set(), lambda s, x: s | {x}), mat)
    assert fut.result(10) == set(range(1, 101))


def _broken_extrapolator(i):
    return _Broken() if i == 3 else iter(())


def test_extrapolate_stops_when_extrapolator_throws_during_iterator_evaluation(mat):
    src, sink = _probes(Flow().extrapolate(_broken_extrapolator).with_attributes(_sup(Supervision.stopping_decider)),
                        mat)
    src.send_next(3)
    assert sink.request_next() == 3
    sink.request(1)
    assert sink.expect_error() == TE("boom")


@pytest.mark.parametrize("decider", [Supervision.resuming_decider, Supervision.restarting_decider])
def test_extrapolate_resumes_or_restarts_when_extrapolator_throws_during_iterator_evaluation(mat, decider):
    src, sink = _probes(Flow().extrapolate(_broken_extrapolator).with_attributes(_sup(decider)), mat)
    src.send_next(3)
    assert sink.request_next() == 3
    sink.request(1)
    sink.expect_no_message(0.3)
    src.send_next(4)
    sink.expect_next(4)
    sink.cancel()


def test_validation():
    with pytest.raises(TypeError, match=r"^expand: argument 'extrapolate' must be callable, got 1$"):
        Flow().expand(1)
    with pytest.raises(TypeError, match=r"^extrapolate: argument 'fn' must be callable, got None$"):
        Flow().extrapolate(None)
