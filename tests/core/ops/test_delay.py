"""delay / delay_with: ported from Pekko's FlowDelaySpec, on virtual time
(``Materializer.local(clock=ManualClock())``): each "expect nothing for a while, then the element"
of the spec is checked at the exact moment the element is due.

Not ported: "not block overdue elements from being pushed to downstream stages" (wall-clock
histogram of 128 elements from a tick source), "work with linear increasing delay" in Pekko's form
(Atoll has no ``DelayStrategy.linearIncreasingDelay``; a stateful per-element strategy is tested
instead). ``DelayOverflowStrategy.drop_new`` is an addition (Pekko's delay has no dropNew).
"""
from __future__ import annotations

import pytest
from ops_kit import TE

from atoll import Attributes, Flow, Keep, Materializer, Sink, Source, Supervision
from atoll._impl.ops.delay import DelayOverflowStrategy
from atoll._impl.ops.throttle import ThrottleMode
from atoll.errors import BufferOverflowError
from atoll.testkit import ManualClock, TestSink, TestSource, assert_all_stages_stopped

S = DelayOverflowStrategy


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture(params=["fused", "unfused"])
def mat(request, clock):
    m = Materializer.local(clock=clock, fusion=request.param == "fused")
    yield m
    try:
        assert_all_stages_stopped(m, timeout=5.0)
    finally:
        m.shutdown()


def _probes(op, mat):
    return TestSource.probe().via(op(Flow())).to_mat(TestSink.probe(), Keep.both).run(mat)


def _due(sink, clock, at, *elems):
    """Nothing until virtual time ``at``, then ``elems``."""
    clock.advance(at - clock.now() - 0.001)
    sink.expect_no_message(0)
    clock.advance(0.001)
    sink.expect_next(*elems)


def test_deliver_elements_with_some_time_shift(mat, clock):
    fut = Source.range(1, 11).delay(1.0).grouped(100).run_with(Sink.head(), mat)
    clock.advance(1.0)
    assert fut.result(3) == list(range(1, 11))


def test_add_delay_to_initial_delay_if_exists_upstream(mat, clock):
    sink = Source.range(1, 11).initial_delay(1.0).delay(1.0).run_with(TestSink.probe(), mat)
    sink.request(10)
    _due(sink, clock, 2.0, 1)
    sink.expect_next_n(list(range(2, 11)))
    sink.expect_complete()


def test_deliver_element_after_time_passed_from_actual_receiving_element(mat, clock):
    sink = Source.range(1, 4).delay(0.3).run_with(TestSink.probe(), mat)
    sink.request(2)
    _due(sink, clock, 0.3, 1, 2)
    sink.expect_no_message(0.2)
    sink.request(1)
    sink.expect_next(3)  # buffered: long overdue
    sink.expect_complete()


def test_deliver_elements_with_delay_for_slow_stream(mat, clock):
    src, sink = _probes(lambda f: f.delay(0.3), mat)
    sink.request(100)
    src.send_next(1)
    _due(sink, clock, 0.3, 1)
    src.send_next(2)
    _due(sink, clock, 0.6, 2)
    src.send_complete()
    sink.expect_complete()


def test_deliver_delayed_elements_that_arrive_within_the_same_timeout_as_preceding_group(mat, clock):
    src, sink = _probes(lambda f: f.delay(0.3), mat)
    sink.request(100)
    src.send_next(1)
    src.send_next(2)
    sink.expect_no_message(0.2)
    src.send_next(3)
    _due(sink, clock, 0.3, 1, 2)
    _due(sink, clock, 0.5, 3)
    src.send_complete()
    sink.expect_complete()


@pytest.mark.parametrize("strategy, expected", [
    (S.drop_tail, list(range(1, 16)) + [20]),
    (S.drop_head, list(range(5, 21))),
    (S.drop_buffer, list(range(17, 21))),
    (S.drop_new, list(range(1, 17))),
])
def test_dropping_strategies_when_the_internal_buffer_is_full(mat, clock, strategy, expected):
    fut = (Source.range(1, 21).delay(1.0, strategy).with_attributes(Attributes.input_buffer(16, 16))
           .grouped(100).run_with(Sink.head(), mat))
    clock.advance(1.0)
    assert fut.result(3) == expected


def test_pass_elements_with_delay_through_normally_in_backpressured_mode(mat, clock):
    sink = (Source.range(1, 4).delay(0.3, S.backpressure).with_attributes(Attributes.input_buffer(1, 1))
            .run_with(TestSink.probe(), mat))
    sink.request(5)
    _due(sink, clock, 0.3, 1)
    _due(sink, clock, 0.6, 2)
    _due(sink, clock, 0.9, 3)
    sink.expect_complete()


def test_fail_on_overflow_in_fail_mode(mat):
    sink = (Source.range(1, 21).delay(0.3, S.fail).with_attributes(Attributes.input_buffer(16, 16))
            .run_with(TestSink.probe(), mat))
    sink.request(100)
    ex = sink.expect_error()
    assert isinstance(ex, BufferOverflowError)
    assert str(ex) == "Buffer overflow for delay operator (max capacity was: 16)!"


def test_emit_early_when_buffer_is_full_and_in_emit_early_mode(mat, clock):
    src, sink = _probes(lambda f: f.delay(10.0, S.emit_early).with_attributes(Attributes.input_buffer(16, 16)), mat)
    sink.request(20)
    for i in range(1, 17):
        src.send_next(i)
    sink.expect_no_message(0.3)
    src.send_next(17)
    sink.expect_next(1)
    src.send_error(TE("the end"))  # fails despite the non-empty buffer
    assert sink.expect_error() == TE("the end")


def test_properly_delay_according_to_buffer_size(mat, clock):
    # with a buffer of 1, the delays add up
    fut = (Source.range(1, 6).delay(0.5, S.backpressure).with_attributes(Attributes.input_buffer(1, 1))
           .run_with(Sink.seq(), mat))
    clock.advance(2.499)
    assert not fut.done()
    clock.advance(0.001)
    assert fut.result(3) == [1, 2, 3, 4, 5]
    # with a buffer large enough for all, they do not
    fut = (Source.range(1, 101).delay(1.0, S.backpressure).with_attributes(Attributes.input_buffer(100, 100))
           .run_with(Sink.ignore(), mat))
    clock.advance(1.0)
    fut.result(3)


def test_not_overflow_buffer_when_backpressure(mat, clock):
    sink = (Source.range(1, 7).delay(0.1, S.backpressure).with_attributes(Attributes.input_buffer(2, 2))
            .throttle(1, 0.2, 1, ThrottleMode.shaping).run_with(TestSink.probe(), mat))
    sink.request(10)
    clock.advance(2.0)
    sink.expect_next_n(list(range(1, 7)))
    sink.expect_complete()


def test_not_drop_messages_on_overflow_when_emit_early(mat, clock):
    sink = Source.range(1, 3).delay(1.0, S.emit_early).with_attributes(Attributes.input_buffer(1, 1)).run_with(
        TestSink.probe(), mat)
    sink.request(10)
    clock.advance(1.0)
    sink.expect_next_n([1, 2])
    sink.expect_complete()


def test_emit_early_with_a_full_buffer_keeps_every_element(mat, clock):
    fut = Source.range(1, 10).delay(1.0, S.emit_early).add_attributes(Attributes.input_buffer(5, 5)).run_with(
        Sink.seq(), mat)
    clock.advance(1.0)
    assert fut.result(3) == list(range(1, 10))


def test_work_with_empty_source(mat):
    sink = Source.empty().delay(0).run_with(TestSink.probe(), mat)
    sink.request(1)
    sink.expect_complete()


def test_work_with_fixed_delay(mat, clock):
    sink = Source.range(1, 4).delay(1.0).run_with(TestSink.probe(), mat)
    sink.request(1)
    _due(sink, clock, 1.0, 1)
    sink.request(2)
    sink.expect_next(2, 3)  # they arrived at 0 s too
    sink.expect_complete()


def test_work_without_delay(mat):
    elems = [1, 2, 3, 4, 5, 6, 7, 8, 9, 0]
    sink = Source.from_iterable(elems).delay(0).run_with(TestSink.probe(), mat)
    sink.request(len(elems))
    sink.expect_next_n(elems)
    sink.expect_complete()


def test_elements_due_within_ten_milliseconds_go_at_once(mat, clock):
    sink = Source.single(1).delay(0.01).run_with(TestSink.probe(), mat)
    sink.request(1)
    sink.expect_next(1)  # Pekko's precision of 10 ms
    sink.expect_complete()


# --------------------------------------------------------------------------- delay_with
def _increasing():
    state = {"d": 0.0}

    def next_delay(_elem):
        state["d"] += 1.0
        return state["d"]

    return next_delay


def test_delay_with_a_stateful_per_element_strategy(mat, clock):
    sink = Source.range(1, 4).delay_with(_increasing, S.backpressure).run_with(TestSink.probe(), mat)
    sink.request(3)
    _due(sink, clock, 1.0, 1)
    _due(sink, clock, 2.0, 2)
    _due(sink, clock, 3.0, 3)
    sink.expect_complete()


def _failing_on(k):
    def factory():
        inner = _increasing()

        def next_delay(elem):
            if elem == k:
                raise TE("delay boom")
            return inner(elem)

        return next_delay

    return factory


def test_delay_with_fails_with_stop_supervision_when_the_strategy_throws(mat):
    fut = Source.range(1, 4).delay_with(_failing_on(2)).run_with(Sink.seq(), mat)
    with pytest.raises(TE, match="delay boom"):
        fut.result(3)


def test_delay_with_resumes_and_keeps_the_strategy_state(mat, clock):
    fut = (Source.range(1, 4).delay_with(_failing_on(2))
           .with_attributes(Attributes.supervision_strategy(Supervision.resuming_decider)).run_with(Sink.seq(), mat))
    clock.advance(1.999)
    assert not fut.done()
    clock.advance(0.001)  # 3 got the second delay: 2 s
    assert fut.result(3) == [1, 3]


def test_delay_with_restarts_with_a_new_strategy(mat, clock):
    fut = (Source.range(1, 4).delay_with(_failing_on(2))
           .with_attributes(Attributes.supervision_strategy(Supervision.restarting_decider)).run_with(Sink.seq(), mat))
    clock.advance(1.0)  # 3 got the first delay of a new strategy: 1 s
    assert fut.result(3) == [1, 3]


# --------------------------------------------------------------------------- validation
def test_validation():
    with pytest.raises(ValueError, match=r"^delay: argument 'of' must be >= 0, got -1$"):
        Flow().delay(-1)
    with pytest.raises(TypeError, match=r"^delay: argument 'strategy' must be a DelayOverflowStrategy"):
        Flow().delay(1.0, "drop_tail")
    with pytest.raises(TypeError, match=r"^delay_with: argument 'strategy_factory' must be callable"):
        Flow().delay_with(1.0)
    with pytest.raises(ValueError, match="unknown kind"):
        DelayOverflowStrategy("drop_all")


# --------------------------------------------------------------------------- event time
def test_delayed_elements_keep_their_own_timestamps_in_an_event_time_graph(mat, clock):
    src, sink = (TestSource.probe(event_time=True).delay(1.0)
                 .to_mat(TestSink.probe(event_time=True), Keep.both).run(mat))
    sink.request(2)
    src.send_next(1, ts=100)
    src.send_next(2, ts=200)  # grabbed while 1 is still held
    clock.advance(1.0)
    sink.expect_next_with_timestamp(1, 100)
    sink.expect_next_with_timestamp(2, 200)
    src.send_complete()
    sink.expect_complete()
