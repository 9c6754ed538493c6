"""initial_timeout, completion_timeout, idle_timeout, backpressure_timeout: ported from Pekko's
TimeoutsSpec (the InitialTimeout, CompletionTimeout, IdleTimeout and BackpressureTimeout parts).

The timing cases run under ``Materializer.local(clock=ManualClock())``: time moves only with
``clock.advance`` and the probes' ``expect_no_message``, so the exact moment of each failure is
checked (the idle and backpressure timeouts check their deadline periodically, as Pekko: every
``timeout_check_interval(timeout)`` seconds, 0.125 s for a timeout of 1 s).

Not ported: "not fail prematurely when materialization is delayed under load" (30 streams under
wall-clock scheduling pressure; virtual time has no such pressure) and the bidi idle timeout
(``BidiFlow.idleTimeout`` is not part of this operator family).
"""
from __future__ import annotations

import pytest
from ops_kit import TE

from atoll import Flow, Keep, Materializer, Sink, Source
from atoll._impl.ops.timeouts import format_duration, timeout_check_interval
from atoll.errors import (
    BackpressureTimeoutError,
    CompletionTimeoutError,
    InitialTimeoutError,
    StreamIdleTimeoutError,
)
from atoll.testkit import ManualClock, TestSink, TestSource, assert_all_stages_stopped


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


OPS = {
    "initial_timeout": lambda f: f.initial_timeout(2.0),
    "completion_timeout": lambda f: f.completion_timeout(2.0),
    "idle_timeout": lambda f: f.idle_timeout(2.0),
    "backpressure_timeout": lambda f: f.backpressure_timeout(1.0),
}


# --------------------------------------------------------------------------- all four
@pytest.mark.parametrize("name", list(OPS))
def test_pass_through_elements_unmodified(mat, name):
    out = OPS[name](Source.range(1, 101)).grouped(200).run_with(Sink.head(), mat).result(3)
    assert out == list(range(1, 101))


@pytest.mark.parametrize("name", list(OPS))
def test_pass_through_error_unmodified(mat, name):
    fut = OPS[name](Source.range(1, 101).concat(Source.failed(TE("test")))).grouped(200).run_with(Sink.head(), mat)
    with pytest.raises(TE):
        fut.result(3)


@pytest.mark.parametrize("name", list(OPS))
def test_pass_completion_and_cancellation(mat, clock, name):
    src, sink = _probes(OPS[name], mat)
    sink.request(1)
    src.send_next(1)
    sink.expect_next(1)
    src.send_complete()
    sink.expect_complete()
    src, sink = _probes(OPS[name], mat)
    sink.cancel()
    src.expect_cancellation()
    assert clock.pending_timers == 0  # the timer went with the stage


@pytest.mark.parametrize("name, arg", [("initial_timeout", 0), ("completion_timeout", -1.0),
                                       ("idle_timeout", 0.0), ("backpressure_timeout", -0.5)])
def test_reject_a_timeout_that_is_not_positive(name, arg):
    with pytest.raises(ValueError, match=f"^{name}: argument 'timeout' must be > 0, got {arg}$"):
        getattr(Flow(), name)(arg)


@pytest.mark.parametrize("name", list(OPS))
def test_reject_a_timeout_that_is_not_a_number(name):
    with pytest.raises(TypeError, match=f"^{name}: argument 'timeout' must be a number of seconds"):
        getattr(Flow(), name)("1s")


# --------------------------------------------------------------------------- InitialTimeout
def test_initial_timeout_fails_if_no_initial_element_passes_until_timeout(mat, clock):
    sink = Source.maybe().initial_timeout(1.0).to_mat(TestSink.probe(), Keep.right).run(mat)
    sink.ensure_subscription()
    sink.expect_no_message(0.5)
    clock.advance(0.499)
    sink.expect_no_message(0)
    clock.advance(0.001)
    ex = sink.expect_error()
    assert isinstance(ex, InitialTimeoutError)
    assert str(ex) == "The first element has not yet passed through in 1 second."


def test_initial_timeout_does_not_fail_after_the_first_element(mat, clock):
    src, sink = _probes(lambda f: f.initial_timeout(1.0), mat)
    sink.request(2)
    src.send_next(1)
    sink.expect_next(1)
    sink.expect_no_message(5.0)  # the timer fires at 1 s and finds the first element passed
    src.send_next(2)
    sink.expect_next(2)
    src.send_complete()
    sink.expect_complete()


# --------------------------------------------------------------------------- CompletionTimeout
def test_completion_timeout_fails_if_not_completed_until_timeout(mat, clock):
    src, sink = _probes(lambda f: f.completion_timeout(2.0), mat)
    src.send_next(1)
    assert sink.request_next() == 1
    sink.expect_no_message(0.5)
    src.send_next(2)
    assert sink.request_next() == 2
    sink.expect_no_message(0.5)
    clock.advance(0.999)
    sink.expect_no_message(0)
    clock.advance(0.001)
    ex = sink.expect_error()
    assert isinstance(ex, CompletionTimeoutError)
    assert str(ex) == "The stream has not been completed in 2 seconds."
    src.expect_cancellation()


# --------------------------------------------------------------------------- IdleTimeout
def test_idle_timeout_fails_if_time_between_elements_is_too_large(mat, clock):
    src, sink = _probes(lambda f: f.idle_timeout(1.0), mat)
    for _ in range(4):  # two seconds in all, but never a second without an element
        src.send_next(1)
        assert sink.request_next() == 1
        sink.expect_no_message(0.5)
    # now 2 s; the last element passed at 1.5 s: its deadline is 2.5 s (the check at 2.5 s finds it
    # not yet passed), found passed by the check at 2.625 s
    clock.advance(0.5)
    sink.expect_no_message(0)
    clock.advance(0.125)
    ex = sink.expect_error()
    assert isinstance(ex, StreamIdleTimeoutError)
    assert str(ex) == "No elements passed in the last 1 second."
    src.expect_cancellation()


def test_idle_timeout_does_not_fail_before_timeout_elapses_from_stream_start(mat, clock):
    src, sink = _probes(lambda f: f.idle_timeout(1.0), mat)
    sink.request(1)
    sink.expect_no_message(0.8)
    src.send_next(42)
    sink.expect_next(42)
    src.send_complete()
    sink.expect_complete()


# --------------------------------------------------------------------------- BackpressureTimeout
def test_backpressure_timeout_succeeds_if_subscriber_demand_arrives(mat, clock):
    sink = Source.range(1, 5).backpressure_timeout(1.0).run_with(TestSink.probe(), mat)
    for i in range(1, 4):
        assert sink.request_next() == i
        sink.expect_no_message(0.25)
    assert sink.request_next() == 4
    sink.expect_complete()


def test_backpressure_timeout_does_not_throw_if_demand_is_unfulfilled_by_upstream(mat, clock):
    src, sink = _probes(lambda f: f.backpressure_timeout(1.0), mat)
    sink.request(1)
    sink.expect_no_message(3.0)  # demand is there: waiting for upstream is no backpressure
    src.send_next(1)
    sink.expect_next(1)
    src.send_complete()
    sink.expect_complete()


def test_backpressure_timeout_fails_after_no_demand_for_a_while(mat, clock):
    sink = Source.repeat(1).backpressure_timeout(1.0).run_with(TestSink.probe(), mat)
    assert sink.request_next() == 1
    assert sink.request_next() == 1
    assert sink.request_next() == 1
    # the last element went at 0 s, so the deadline is 1 s; checks run every 0.125 s
    clock.advance(1.0)
    sink.expect_no_message(0)
    clock.advance(0.125)
    ex = sink.expect_error()
    assert isinstance(ex, BackpressureTimeoutError)
    assert str(ex) == "No demand signalled in the last 1 second."


def test_backpressure_timeout_counts_from_the_start_while_downstream_gives_no_demand(mat, clock):
    # as Pekko: the stage starts out waiting for demand, with the deadline one timeout after the start
    src, sink = _probes(lambda f: f.backpressure_timeout(1.0), mat)
    sink.ensure_subscription()
    clock.advance(1.0)
    sink.expect_no_message(0)  # the check at 1 s finds the deadline not yet passed
    clock.advance(0.125)
    ex = sink.expect_error()
    assert isinstance(ex, BackpressureTimeoutError)
    src.expect_cancellation()


# --------------------------------------------------------------------------- helpers
@pytest.mark.parametrize("seconds, text", [(1.0, "1 second"), (2, "2 seconds"), (0.5, "500 milliseconds"),
                                           (1.5, "1500 milliseconds"), (60, "1 minute"), (0.001, "1 millisecond"),
                                           (7200, "2 hours"), (1e-6, "1 microsecond")])
def test_format_duration_is_pekkos_to_coarsest(seconds, text):
    assert format_duration(seconds) == text


@pytest.mark.parametrize("timeout, interval", [(10.0, 1.0), (1.0, 0.125), (0.5, 0.1), (0.1, 0.05)])
def test_timeout_check_interval_is_pekkos(timeout, interval):
    assert timeout_check_interval(timeout) == pytest.approx(interval)
