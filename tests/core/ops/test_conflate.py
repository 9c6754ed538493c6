"""conflate / conflate_with_seed: ported from Pekko's FlowConflateSpec (Pekko's input buffers of 2).

The streams run under ``Materializer.local(clock=ManualClock())``: the spec's ``expectNoMessage``
pauses become virtual-time pauses that also wait until every island is quiescent, so "the elements
arrived before the demand" holds exactly where Pekko's spec relies on timing. The "variable rate
chain" cases use a downstream that randomly yields the thread instead of sleeping."""
from __future__ import annotations

import random
import time

import pytest
from ops_kit import TE

from atoll import Attributes, Flow, Keep, Materializer, OverflowStrategy, Sink, Source, Supervision
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


def _probes(flow, mat, attrs=None):
    g = TestSource.probe().via(flow).to_mat(TestSink.probe(), Keep.both)
    if attrs is not None:
        g = g.with_attributes(attrs)
    return g.run(mat)


SEEDED = Flow().conflate_with_seed(lambda i: i, lambda s, i: s + i)
SIMPLE = Flow().conflate(lambda a, b: a + b)


@pytest.mark.parametrize("flow", [SEEDED, SIMPLE], ids=["with_seed", "simple"])
def test_pass_through_elements_unchanged_when_there_is_no_rate_difference(mat, flow):
    src, sink = _probes(flow, mat)
    for i in range(1, 101):
        sink.request(1)
        src.send_next(i)
        sink.expect_next(i)
    sink.cancel()
    src.expect_cancellation()


@pytest.mark.parametrize("flow", [SEEDED, SIMPLE], ids=["with_seed", "simple"])
def test_conflate_elements_while_downstream_is_silent(mat, flow):
    src, sink = _probes(flow, mat)
    sink.ensure_subscription()
    for i in range(1, 101):
        src.send_next(i)
    sink.expect_no_message(1.0)
    sink.request(1)
    sink.expect_next(5050)
    sink.cancel()


def _jittery(seed):
    rng = random.Random(seed)

    def fn(i):
        if rng.random() < 0.5:
            time.sleep(0)  # yield the thread: upstream may run ahead
        return i

    return fn


@pytest.mark.parametrize("simple", [False, True])
def test_work_on_a_variable_rate_chain(mat, simple):
    src = Source.range(1, 1001)
    src = src.conflate(lambda a, b: a + b) if simple else src.conflate_with_seed(lambda i: i, lambda s, i: s + i)
    fut = src.map(_jittery(7)).run_with(Sink.fold(0, lambda a, b: a + b), mat)
    assert fut.result(10) == 500500


def test_backpressure_subscriber_when_upstream_is_slower(mat):
    src, sink = _probes(SEEDED, mat)
    sink.request(1)
    src.send_next(1)
    sink.expect_next(1)
    sink.request(1)
    sink.expect_no_message(0.5)
    src.send_next(2)
    sink.expect_next(2)
    src.send_next(3)
    src.send_next(4)
    sink.expect_no_message(0.5)  # both arrived (virtual-time pauses settle): no race with the demand
    sink.request(1)
    sink.expect_next(7)
    sink.request(1)
    sink.expect_no_message(0.5)
    sink.cancel()


def test_work_with_a_buffer_and_fold(mat):
    fut = (Source.range(1, 51).conflate_with_seed(lambda i: i, lambda s, i: s + i)
           .buffer(50, OverflowStrategy.backpressure).run_with(Sink.fold(0, lambda a, b: a + b), mat))
    assert fut.result(3) == sum(range(1, 51))


def _sup(decider):
    return Attributes.supervision_strategy(decider)


def test_restart_when_seed_throws_and_a_restarting_decider_is_used(mat):
    def seed(i):
        if i % 2 == 0:
            raise TE("I hate even seed numbers")
        return i

    flow = Flow().conflate_with_seed(seed, lambda s, i: s + i).with_attributes(_sup(Supervision.restarting_decider))
    src, sink = _probes(flow, mat, Attributes.input_buffer(1, 1))
    src.send_next(1)
    sink.request(1)
    sink.expect_next(1)
    src.send_next(2)  # the seed throws: 2 is lost
    src.send_next(3)
    sink.request(1)
    sink.expect_next(3)
    sink.cancel()


def test_restart_when_aggregate_throws_and_a_restarting_decider_is_used(mat):
    def agg(state, elem):
        if elem == "two":
            raise TE("two is a three letter word")
        return state + elem

    flow = Flow().conflate_with_seed(lambda i: i, agg).with_attributes(_sup(Supervision.restarting_decider))
    src, sink = _probes(flow, mat, Attributes.input_buffer(4, 4))
    for s in ("one", "two", "three"):
        src.send_next(s)
    src.send_complete()
    sink.expect_no_message(0)
    assert sink.request_next() == "three"  # "one" is lost with the restart
    sink.expect_complete()


def test_resume_when_aggregate_throws_and_a_resuming_decider_is_used(mat):
    def agg(state, elem):
        if elem == 2:
            raise TE("three is a four letter word")
        return state + [elem]

    flow = Flow().conflate_with_seed(lambda i: [i], agg).with_attributes(_sup(Supervision.resuming_decider))
    src, sink = _probes(flow, mat, Attributes.input_buffer(1, 1))
    for i in range(1, 5):
        src.send_next(i)
    sink.expect_no_message(0)
    sink.request(1)
    sink.expect_next([1, 3, 4])
    sink.cancel()


def test_validation():
    with pytest.raises(TypeError, match=r"^conflate: argument 'aggregate' must be callable, got 1$"):
        Flow().conflate(1)
    with pytest.raises(TypeError, match=r"^conflate_with_seed: argument 'seed' must be callable, got None$"):
        Flow().conflate_with_seed(None, lambda a, b: a)
