"""take_within, drop_within, initial_delay: ported from Pekko's FlowTakeWithinSpec, FlowDropWithinSpec
and FlowInitialDelaySpec, on virtual time (``Materializer.local(clock=ManualClock())``): time moves
only with ``clock.advance`` and the probes' ``expect_no_message``.

Added beyond the specs: the exact moment of the cut (an element at ``d`` itself: take_within has
completed, drop_within still drops it, as Pekko's ``<=``), downstream cancellation and the build-time
validation."""
from __future__ import annotations

import pytest

from atoll import Flow, Keep, Materializer, Sink, Source
from atoll.errors import InitialTimeoutError
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


# --------------------------------------------------------------------------- take_within
def test_take_within_delivers_elements_within_the_duration_but_not_afterwards(mat, clock):
    src, sink = _probes(lambda f: f.take_within(1.0), mat)
    sink.request(100)
    sent = 0
    for _ in range(2):
        for _ in range(src.expect_request()):
            sent += 1
            src.send_next(sent)
    for n in range(1, sent + 1):
        sink.expect_next(n)
    sink.expect_no_message(0.999)
    clock.advance(0.001)
    sink.expect_complete()
    src.expect_cancellation()
    sink.expect_no_message(0.2)


def test_take_within_delivers_buffered_elements_on_complete_before_the_timeout(mat, clock):
    sink = Source.range(1, 4).take_within(1.0).run_with(TestSink.probe(), mat)
    sink.ensure_subscription()
    sink.expect_no_message(0.2)
    sink.request(100)
    sink.expect_next(1, 2, 3)
    sink.expect_complete()
    sink.expect_no_message(0.2)


def test_take_within_completes_without_demand_when_the_time_is_up(mat, clock):
    src, sink = _probes(lambda f: f.take_within(0.5), mat)
    sink.ensure_subscription()
    clock.advance(0.5)
    sink.expect_complete()
    src.expect_cancellation()


# --------------------------------------------------------------------------- drop_within
def test_drop_within_delivers_elements_after_the_duration_but_not_before(mat, clock):
    src, sink = _probes(lambda f: f.drop_within(1.0), mat)
    sink.request(100)
    sent = 0
    for _ in range(2):
        for _ in range(src.expect_request()):
            sent += 1
            src.send_next(sent)
    dropped = sent
    sink.expect_no_message(1.5)
    for _ in range(src.expect_request()):
        sent += 1
        src.send_next(sent)
    for n in range(dropped + 1, sent + 1):
        sink.expect_next(n)
    src.send_complete()
    sink.expect_complete()
    sink.expect_no_message(0.2)


def test_drop_within_drops_an_element_arriving_exactly_at_the_duration(mat, clock):
    src, sink = _probes(lambda f: f.drop_within(1.0), mat)
    sink.request(3)
    clock.advance(1.0)
    src.send_next(1)  # at 1 s: still dropped (Pekko: elapsed <= d)
    sink.expect_no_message(0.001)
    src.send_next(2)
    sink.expect_next(2)
    src.send_next(3)
    sink.expect_next(3)
    src.send_complete()
    sink.expect_complete()


def test_drop_within_delivers_completion_even_before_the_duration(mat, clock):
    src, sink = _probes(lambda f: f.drop_within(86400.0), mat)
    src.send_complete()
    sink.expect_subscription_and_complete()


# --------------------------------------------------------------------------- initial_delay
def test_initial_delay_works_with_zero_delay(mat, clock):
    assert Source.range(1, 11).initial_delay(0).grouped(100).run_with(Sink.head(), mat).result(3) == list(range(1, 11))


def test_initial_delay_delays_elements_by_the_specified_time_but_not_more(mat, clock):
    fut = Source.range(1, 11).initial_delay(2.0).initial_timeout(1.0).run_with(Sink.ignore(), mat)
    clock.advance(1.0)
    with pytest.raises(InitialTimeoutError):
        fut.result(3)
    fut = Source.range(1, 11).initial_delay(1.0).initial_timeout(2.0).run_with(Sink.seq(), mat)
    clock.advance(1.0)
    assert fut.result(3) == list(range(1, 11))


def test_initial_delay_holds_back_the_first_element_exactly_the_delay(mat, clock):
    sink = Source.range(1, 4).initial_delay(1.0).run_with(TestSink.probe(), mat)
    sink.request(3)
    sink.expect_no_message(0.999)
    clock.advance(0.001)
    sink.expect_next(1, 2, 3)
    sink.expect_complete()


def test_initial_delay_properly_ignores_timer_while_backpressured(mat, clock):
    sink = Source.range(1, 11).initial_delay(0.5).run_with(TestSink.probe(), mat)
    sink.ensure_subscription()
    sink.expect_no_message(1.5)
    sink.request(20)
    sink.expect_next_n(list(range(1, 11)))
    sink.expect_complete()


# --------------------------------------------------------------------------- validation
@pytest.mark.parametrize("op, arg, bad, text", [
    ("take_within", "d", 0, "> 0"), ("take_within", "d", -1.0, "> 0"),
    ("drop_within", "d", 0.0, "> 0"), ("initial_delay", "d", -0.1, ">= 0"),
])
def test_reject_bad_durations(op, arg, bad, text):
    with pytest.raises(ValueError, match=f"^{op}: argument '{arg}' must be {text}, got {bad}$"):
        getattr(Flow(), op)(bad)


@pytest.mark.parametrize("op", ["take_within", "drop_within", "initial_delay"])
def test_reject_a_duration_that_is_not_a_number(op):
    with pytest.raises(TypeError, match=f"^{op}: argument 'd' must be a number of seconds"):
        getattr(Flow(), op)(None)
