"""keep_alive: ported from Pekko's FlowIdleInjectSpec, on virtual time
(``Materializer.local(clock=ManualClock())``; Pekko's spec sets the initial input buffer to 2).

Not ported: "not inject prematurely when materialization is delayed under load" (30 streams under
wall-clock scheduling pressure; virtual time has no such pressure)."""
from __future__ import annotations

import pytest
from ops_kit import TE

from atoll import Flow, Keep, Materializer, Sink, Source
from atoll.testkit import ManualClock, TestSink, TestSource, assert_all_stages_stopped


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture(params=["fused", "unfused"])
def mat(request, clock):
    m = Materializer.local(clock=clock, fusion=request.param == "fused", input_buffer=(2, 16))
    yield m
    try:
        assert_all_stages_stopped(m, timeout=5.0)
    finally:
        m.shutdown()


def _zero():
    return 0


def _probes(mat, prefix=None):
    src = TestSource.probe()
    if prefix is not None:
        up = Source.from_iterable(prefix).concat(src, Keep.right)
    else:
        up = src
    return up.keep_alive(1.0, _zero).to_mat(TestSink.probe(), Keep.both).run(mat)


def test_not_emit_additional_elements_if_upstream_is_fast_enough(mat):
    out = Source.range(1, 11).keep_alive(1.0, _zero).grouped(1000).run_with(Sink.head(), mat).result(3)
    assert out == list(range(1, 11))


def test_emit_elements_periodically_after_silent_periods(mat, clock):
    gap = Source.range(1, 6).concat(Source.range(6, 11).initial_delay(2.0))
    fut = gap.keep_alive(0.6, _zero).grouped(1000).run_with(Sink.head(), mat)
    clock.advance(2.0)
    assert fut.result(3) == [1, 2, 3, 4, 5, 0, 0, 0, 6, 7, 8, 9, 10]


def test_immediately_pull_upstream(mat):
    src, sink = _probes(mat)
    sink.request(1)
    src.send_next(1)
    sink.expect_next(1)
    src.send_complete()
    sink.expect_complete()


def test_immediately_pull_upstream_after_busy_period(mat):
    src, sink = _probes(mat, prefix=range(1, 11))
    sink.request(10)
    sink.expect_next_n(list(range(1, 11)))
    sink.request(1)
    src.send_next(1)
    sink.expect_next(1)
    src.send_complete()
    sink.expect_complete()


def test_work_if_timer_fires_before_initial_request(mat):
    src, sink = _probes(mat)
    sink.ensure_subscription()
    sink.expect_no_message(1.5)
    sink.request(1)
    sink.expect_next(0)
    src.send_complete()
    sink.expect_complete()


def test_work_if_timer_fires_before_initial_request_after_busy_period(mat):
    src, sink = _probes(mat, prefix=range(1, 11))
    sink.request(10)
    sink.expect_next_n(list(range(1, 11)))
    sink.expect_no_message(1.5)
    sink.request(1)
    sink.expect_next(0)
    src.send_complete()
    sink.expect_complete()


def test_prefer_upstream_element_over_injected(mat):
    src, sink = _probes(mat)
    sink.ensure_subscription()
    sink.expect_no_message(1.5)
    src.send_next(1)
    sink.expect_no_message(0.5)
    sink.request(1)
    sink.expect_next(1)
    src.send_complete()
    sink.expect_complete()


def test_prefer_upstream_element_over_injected_after_busy_period(mat):
    src, sink = _probes(mat, prefix=range(1, 11))
    sink.request(10)
    sink.expect_next_n(list(range(1, 11)))
    sink.expect_no_message(1.5)
    src.send_next(1)
    sink.expect_no_message(0.5)
    sink.request(1)
    sink.expect_next(1)
    src.send_complete()
    sink.expect_complete()


def test_reset_deadline_properly_after_injected_element(mat, clock):
    src, sink = _probes(mat)
    sink.request(2)
    sink.expect_no_message(0.999)
    clock.advance(0.001)
    sink.expect_next(0)
    sink.expect_no_message(0.999)
    clock.advance(0.001)
    sink.expect_next(0)
    sink.cancel()
    src.expect_cancellation()


def test_not_inject_idle_element_before_timeout_elapses_from_stream_start(mat, clock):
    src = TestSource.probe()
    src, sink = src.keep_alive(0.5, _zero).to_mat(TestSink.probe(), Keep.both).run(mat)
    sink.ensure_subscription()
    sink.expect_no_message(0.3)
    sink.request(1)
    sink.expect_no_message(0.199)
    clock.advance(0.001)
    sink.expect_next(0)
    src.send_complete()
    sink.expect_complete()


def test_an_element_held_while_upstream_completes_is_emitted_first(mat):
    src, sink = _probes(mat)
    sink.ensure_subscription()
    src.send_next(7)
    src.send_complete()
    sink.expect_no_message(0)
    sink.request(1)
    sink.expect_next(7)
    sink.expect_complete()


def test_inject_raising_fails_the_stream(mat, clock):
    def boom():
        raise TE("inject")

    sink = Source.never().keep_alive(1.0, boom).run_with(TestSink.probe(), mat)
    sink.request(1)
    clock.advance(1.0)
    assert sink.expect_error() == TE("inject")


def test_validation():
    with pytest.raises(ValueError, match=r"^keep_alive: argument 'max_idle' must be > 0, got 0$"):
        Flow().keep_alive(0, _zero)
    with pytest.raises(TypeError, match=r"^keep_alive: argument 'inject' must be callable, got 0$"):
        Flow().keep_alive(1.0, 0)
