"""throttle: ported from Pekko's FlowThrottleSpec (single-cost and various-cost elements, Pekko's
input buffer of 2), on virtual time (``Materializer.local(clock=ManualClock())``), so the
time-dependent cases check the exact moment each element is emitted instead of Pekko's tolerance
windows; plus the token bucket alone (Pekko's TokenBucketSpec, the cases for the bucket's arithmetic).

Not ported: "send elements downstream as soon as time comes" (wall-clock bucketing; the exact
emission times are checked instead) and the ByteString cost case in its original form (strings of
the same lengths are used).
"""
from __future__ import annotations

import pytest
from ops_kit import TE

from atoll import Attributes, Flow, Keep, Materializer, Sink, Source, Supervision
from atoll._impl.ops.throttle import TokenBucket, ThrottleMode
from atoll.errors import RateExceededError
from atoll.testkit import ManualClock, TestSink, TestSource, assert_all_stages_stopped

SHAPING = ThrottleMode.shaping
ENFORCING = ThrottleMode.enforcing


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


def _probes(op, mat):
    return TestSource.probe().via(op(Flow())).to_mat(TestSink.probe(), Keep.both).run(mat)


def _receive(sink, clock, n, within):
    """Pekko's ``receiveWithin(within, n)`` on virtual time: the elements that arrived by ``within``."""
    clock.advance(within)
    return [sink.expect_next() for _ in range(n)]


# =========================================================================== single cost
def test_work_for_the_happy_case(mat, clock):
    sink = Source.range(1, 6).throttle(19, 1.0, -1, SHAPING).run_with(TestSink.probe(), mat)
    sink.request(5)
    sink.expect_next(1)  # the automatic burst at 19/s is 1 token; one more every 1/19 s
    clock.advance(4 / 19)
    sink.expect_next(2, 3, 4, 5)
    sink.expect_complete()


def test_accept_very_high_rates(mat, clock):
    sink = Source.range(1, 6).throttle(1, 1e-9, 0, SHAPING).run_with(TestSink.probe(), mat)
    sink.request(5)
    clock.advance(1e-8)
    sink.expect_next(1, 2, 3, 4, 5)
    sink.expect_complete()


def test_accept_very_low_rates(mat):
    sink = Source.range(1, 6).throttle(1, 100 * 86400.0, 1, SHAPING).run_with(TestSink.probe(), mat)
    sink.request(5)
    sink.expect_next(1)
    sink.expect_no_message(0.1)
    sink.cancel()


def test_work_if_there_are_two_throttles_in_different_streams(mat):
    shared = Flow().throttle(1, 86400.0, 1, ENFORCING)
    assert Source.single(1).via(shared).via(shared).run_with(Sink.seq(), mat).result(3) == [1]
    assert Source.single(2).via(shared).via(shared).run_with(Sink.seq(), mat).result(3) == [2]


def test_emit_single_element_per_tick(mat, clock):
    src, sink = _probes(lambda f: f.throttle(1, 0.3, 0, SHAPING), mat)
    sink.request(20)
    src.send_next(1)
    sink.expect_no_message(0.299)  # an empty bucket: the first token arrives after 0.3 s
    clock.advance(0.001)
    sink.expect_next(1)
    src.send_next(2)
    sink.expect_no_message(0.299)
    clock.advance(0.001)
    sink.expect_next(2)
    src.send_complete()
    sink.expect_complete()


def test_not_send_downstream_if_upstream_does_not_emit_element(mat, clock):
    src, sink = _probes(lambda f: f.throttle(1, 0.3, 0, SHAPING), mat)
    sink.request(2)
    src.send_next(1)
    clock.advance(0.3)
    sink.expect_next(1)
    sink.expect_no_message(0.3)
    src.send_next(2)
    clock.advance(0.3)
    sink.expect_next(2)
    src.send_complete()
    sink.expect_complete()


def test_cancel_when_downstream_cancels(mat):
    sink = Source.range(1, 11).throttle(1, 0.3, 0, SHAPING).run_with(TestSink.probe(), mat)
    sink.cancel()


def test_send_elements_downstream_as_soon_as_time_comes(mat, clock):
    sink = Source.range(1, 6).throttle(1, 0.5).run_with(TestSink.probe(), mat)
    sink.request(5)
    sink.expect_next(1)  # the bucket starts full (burst 1)
    for n in range(2, 6):
        sink.expect_no_message(0.499)
        clock.advance(0.001)
        sink.expect_next(n)
    sink.expect_complete()


def test_burst_according_to_its_maximum_if_enough_time_passed(mat, clock):
    src, sink = _probes(lambda f: f.throttle(1, 0.2, 5, SHAPING), mat)
    sink.request(5)
    for i in range(1, 6):
        src.send_next(i)
    assert _receive(sink, clock, 5, 0.3) == [1, 2, 3, 4, 5]
    sink.request(5)
    sink.expect_no_message(1.2)
    for i in range(7, 12):
        src.send_next(i)
    clock.settle()
    sink.expect_next(7, 8, 9, 10, 11)  # the bucket refilled: a burst of 5, no waiting
    sink.cancel()


def test_burst_some_elements_if_have_enough_time(mat, clock):
    src, sink = _probes(lambda f: f.throttle(1, 0.2, 5, SHAPING), mat)
    sink.request(5)
    for i in range(1, 6):
        src.send_next(i)
    assert _receive(sink, clock, 5, 0.3) == [1, 2, 3, 4, 5]  # now 0.3 s; one token arrived at 0.2 s
    sink.request(1)
    src.send_next(6)
    sink.expect_next(6)
    sink.expect_no_message(0.5)  # tokens at 0.4, 0.6 s... : two are there at 0.8 s
    sink.request(5)
    for i in range(7, 11):
        src.send_next(i)
    assert _receive(sink, clock, 2, 0.1) == [7, 8]
    sink.cancel()


def test_throw_exception_when_exceeding_throughput_in_enforced_mode(mat):
    out = Source.range(1, 6).throttle(1, 0.2, 5, ENFORCING).run_with(Sink.seq(), mat).result(3)
    assert out == [1, 2, 3, 4, 5]  # the burst is 5: this does not fail
    fut = Source.range(1, 7).throttle(1, 0.2, 5, ENFORCING).run_with(Sink.ignore(), mat)
    with pytest.raises(RateExceededError, match=r"^Maximum throttle throughput exceeded\.$"):
        fut.result(3)


def test_properly_combine_shape_and_throttle_modes(mat, clock):
    sink = (Source.range(1, 6).throttle(1, 0.1, 5, SHAPING).throttle(1, 0.1, 5, ENFORCING)
            .run_with(TestSink.probe(), mat))
    sink.request(5)
    sink.expect_next(1, 2, 3, 4, 5)
    sink.expect_complete()


def test_completes_after_the_delayed_element(mat, clock):
    src, sink = _probes(lambda f: f.throttle(1, 1.0, 1, SHAPING), mat)
    sink.request(3)
    src.send_next(1)
    sink.expect_next(1)
    src.send_next(2)
    src.send_complete()
    sink.expect_no_message(0.999)
    clock.advance(0.001)
    sink.expect_next(2)
    sink.expect_complete()


# =========================================================================== various cost
def test_cost_work_for_happy_case(mat, clock):
    sink = Source.range(1, 6).throttle(cost=1, per=0.1, maximum_burst=0, cost_fn=lambda _: 1).run_with(
        TestSink.probe(), mat)
    sink.request(5)
    clock.advance(0.5)
    sink.expect_next(1, 2, 3, 4, 5)
    sink.expect_complete()


def test_emit_elements_according_to_cost(mat, clock):
    items = ["x" * (2 * i) for i in range(1, 5)]  # lengths 2, 4, 6, 8
    sink = Source.from_iterable(items).throttle(cost=2, per=0.2, maximum_burst=0, cost_fn=len, mode=SHAPING).run_with(
        TestSink.probe(), mat)
    sink.request(4)
    # 2 tokens per 0.2 s: the elements are due at 0.2, 0.6, 1.2 and 2.0 s
    for i, due in enumerate((0.2, 0.6, 1.2, 2.0)):
        clock.advance(due - clock.now() - 0.001)
        sink.expect_no_message(0)
        clock.advance(0.001)
        sink.expect_next(items[i])
    sink.expect_complete()


def test_cost_not_send_downstream_if_upstream_does_not_emit_element(mat, clock):
    src, sink = _probes(lambda f: f.throttle(cost=2, per=0.3, maximum_burst=0, cost_fn=lambda x: x), mat)
    sink.request(2)
    src.send_next(1)
    clock.advance(0.15)
    sink.expect_next(1)
    sink.expect_no_message(0.3)
    src.send_next(2)
    clock.advance(0.3)
    sink.expect_next(2)
    src.send_complete()
    sink.expect_complete()


def test_cost_burst_some_elements_if_have_enough_time(mat, clock):
    src, sink = _probes(lambda f: f.throttle(cost=2, per=0.4, maximum_burst=5,
                                              cost_fn=lambda e: 1 if e < 9 else 20), mat)
    sink.request(5)
    for i in range(1, 6):
        src.send_next(i)
    assert _receive(sink, clock, 5, 0.3) == [1, 2, 3, 4, 5]
    sink.request(1)
    src.send_next(6)
    sink.expect_next(6)
    sink.expect_no_message(0.5)
    sink.request(5)
    for i in range(7, 10):
        src.send_next(i)
    assert _receive(sink, clock, 2, 0.2) == [7, 8]
    sink.expect_no_message(0.5)  # 9 costs 20 tokens: 4 s of waiting
    sink.cancel()


def test_cost_throw_exception_when_exceeding_throughput_in_enforced_mode(mat):
    out = Source.range(1, 5).throttle(cost=2, per=0.2, maximum_burst=10, cost_fn=lambda x: x, mode=ENFORCING).run_with(
        Sink.seq(), mat).result(3)
    assert out == [1, 2, 3, 4]
    with pytest.raises(ValueError, match="maximum_burst' must be > 0 in enforcing mode"):
        Flow().throttle(cost=2, per=0.2, maximum_burst=0, cost_fn=lambda x: x, mode=ENFORCING)
    fut = Source.range(1, 7).throttle(cost=2, per=0.2, maximum_burst=1, cost_fn=lambda x: x, mode=ENFORCING).run_with(
        Sink.ignore(), mat)
    with pytest.raises(RateExceededError):
        fut.result(3)


def _boom_on(k):
    def cost(n):
        if n == k:
            raise TE("boom")
        return 1

    return cost


def _sup(decider):
    return Attributes.supervision_strategy(decider)


@pytest.mark.parametrize("attrs", [None, _sup(Supervision.stopping_decider)])
def test_stop_on_cost_calculation_function_exception(mat, attrs):
    flow = Flow().throttle(cost=1, per=1.0, maximum_burst=100, cost_fn=_boom_on(3))
    if attrs is not None:
        flow = flow.with_attributes(attrs)
    sink = Source.range(1, 6).via(flow).run_with(TestSink.probe(), mat)
    sink.request(5)
    sink.expect_next(1, 2)
    assert sink.expect_error() == TE("boom")


@pytest.mark.parametrize("mode", [SHAPING, ENFORCING])
@pytest.mark.parametrize("decider", [Supervision.resuming_decider, Supervision.restarting_decider])
def test_resume_or_restart_on_cost_calculation_function_exception(mat, mode, decider):
    flow = Flow().throttle(cost=1, per=1.0, maximum_burst=100, cost_fn=_boom_on(3), mode=mode).with_attributes(
        _sup(decider))
    sink = Source.range(1, 6).via(flow).run_with(TestSink.probe(), mat)
    sink.request(5)
    sink.expect_next(1, 2, 4, 5)
    sink.expect_complete()


def test_resume_and_complete_when_the_last_element_fails_cost_calculation(mat):
    flow = Flow().throttle(cost=1, per=1.0, maximum_burst=100, cost_fn=_boom_on(5)).with_attributes(
        _sup(Supervision.resuming_decider))
    sink = Source.range(1, 6).via(flow).run_with(TestSink.probe(), mat)
    sink.request(5)
    sink.expect_next(1, 2, 3, 4)
    sink.expect_complete()


def test_negative_cost_fails_the_stream(mat):
    fut = Source.range(1, 3).throttle(cost=1, per=1.0, cost_fn=lambda _: -1).run_with(Sink.ignore(), mat)
    with pytest.raises(ValueError, match="^Cost must be non-negative$"):
        fut.result(3)


# =========================================================================== validation
def test_validation():
    with pytest.raises(ValueError, match=r"^throttle: argument 'elements' must be >= 1, got 0$"):
        Flow().throttle(0, 1.0)
    with pytest.raises(ValueError, match=r"^throttle: argument 'per' must be > 0, got 0$"):
        Flow().throttle(1, 0)
    with pytest.raises(ValueError, match=r"^throttle: argument 'cost' must be >= 1, got 0$"):
        Flow().throttle(cost=0, per=1.0, cost_fn=len)
    with pytest.raises(ValueError, match=r"^throttle: argument 'maximum_burst' must be >= 0, got -2$"):
        Flow().throttle(1, 1.0, -2)
    with pytest.raises(ValueError, match="1 unit / nanosecond"):
        Flow().throttle(10, 1e-9)
    with pytest.raises(TypeError, match=r"^throttle: argument 'mode' must be a ThrottleMode"):
        Flow().throttle(1, 1.0, 1, "shaping")
    with pytest.raises(TypeError, match="needs both 'cost' and 'cost_fn'"):
        Flow().throttle(cost=1, per=1.0)
    with pytest.raises(TypeError, match="either 'elements' or 'cost'"):
        Flow().throttle(1, 1.0, cost=1, cost_fn=len)
    with pytest.raises(TypeError, match="argument 'per' is required"):
        Flow().throttle(1)


# =========================================================================== the token bucket
def test_token_bucket_starts_full_and_refills_one_token_per_period():
    b = TokenBucket(10, 1)
    b.init(0)
    for _ in range(10):
        assert b.offer(1, 0) == 0
    assert b.offer(1, 0) == 1  # empty: one period for the next token
    b2 = TokenBucket(2, 10)
    b2.init(0)
    assert b2.offer(2, 0) == 0
    assert b2.offer(1, 5) == 5
    assert b2.offer(1, 10) == 10  # the token of 10 was spent ahead by the previous offer


def test_token_bucket_caps_at_capacity_and_allows_a_cost_above_it():
    b = TokenBucket(3, 10)
    b.init(0)
    assert b.offer(3, 0) == 0
    assert b.offer(0, 1000) == 0  # 100 periods passed: capped at 3
    assert b.offer(3, 1000) == 0
    b.init(0)
    assert b.offer(5, 0) == 20  # 2 tokens missing
