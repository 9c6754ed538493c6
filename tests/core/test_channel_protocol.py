"""The Reactive Streams protocol at island boundaries: sequence numbers, demand rules, terminal signals.

The probes are channel endpoints themselves, so their raw peer refs let a test break the protocol
on purpose (a frame gap, an unrequested element, a request of 0) and check how a boundary reacts.
"""
from __future__ import annotations

import pytest

from atoll import Keep, Sink, Source
from atoll.errors import ProtocolError, SpecViolationError
from atoll._impl.islands.boundaries import MAX_DEMAND
from atoll.testkit import TestSink, TestSource


def test_frame_with_a_sequence_gap_fails_the_channel(mat):
    src, sink = TestSource.probe().to_mat(TestSink.probe(), Keep.both).run(mat)
    sink.request(5)
    src.expect_request()
    src.send_next(1)
    sink.expect_next(1)
    src._subscriber.on_next(5, [2])  # frame #1 expected
    err = sink.expect_error(ProtocolError)
    assert "frame #5" in str(err) and "expected #1" in str(err)
    assert isinstance(src.expect_cancellation(), ProtocolError)


def test_duplicate_frame_is_a_protocol_error(mat):
    src, sink = TestSource.probe().to_mat(TestSink.probe(), Keep.both).run(mat)
    sink.request(5)
    src.expect_request()
    src.send_next(1)
    src._subscriber.on_next(0, [1])  # frame #0 again
    ev = sink.expect_event()
    if ev[0] == "next":  # the first element may or may not have left before the failure
        ev = sink.expect_event()
    assert ev[0] == "error" and isinstance(ev[1], ProtocolError)
    src.expect_cancellation()


def test_more_elements_than_requested_is_a_spec_violation(mat):
    src, sink = TestSource.probe().to_mat(TestSink.probe(), Keep.both).run(mat)
    assert src.expect_request() == 16
    src.ensure_subscription()
    src._subscriber.on_next(0, list(range(17)))
    sink.request(1)
    err = sink.expect_error(SpecViolationError)
    assert "overrun" in str(err)


def test_request_with_a_sequence_gap_fails_the_publisher(mat):
    sink = Source.repeat(1).run_with(TestSink.probe(), mat)
    sink.request(1)
    sink.expect_next(1)
    sink._subscription.request(1, 7)  # request #1 expected
    err = sink.expect_error(ProtocolError)
    assert "request #7" in str(err)


def test_non_positive_request_is_rule_3_9(mat):
    sink = Source.repeat(1).run_with(TestSink.probe(), mat)
    sink.request(0)
    err = sink.expect_error(SpecViolationError)
    assert "3.9" in str(err)


def test_demand_saturates_at_2_pow_63_minus_1(mat):
    sink = Source.range(0, 5).run_with(TestSink.probe(), mat)
    sink.request(MAX_DEMAND)
    sink.request(MAX_DEMAND)  # would overflow: saturates instead (rule 3.17)
    sink.expect_next(0, 1, 2, 3, 4)
    sink.expect_complete()


def test_no_element_beyond_demand_and_terminal_signals_are_final(mat):
    src, sink = TestSource.probe().to_mat(TestSink.probe(), Keep.both).run(mat)
    sink.request(2)
    src.send_next_many(1, 2, 3)
    sink.expect_next(1, 2)
    sink.expect_no_message(0.1)
    src.send_complete()
    sink.request(1)
    sink.expect_next(3)
    sink.expect_complete()
    src._subscriber.on_next(4, [99])  # after completion: ignored
    src._subscriber.on_complete()
    sink.expect_no_message(0.1)


def test_cancel_is_idempotent(mat):
    src, sink = TestSource.probe().to_mat(TestSink.probe(), Keep.both).run(mat)
    sink.request(1)
    sink.cancel()
    sink.cancel()
    src.expect_cancellation()
    src.expect_no_message(0.1)


def test_upstream_completion_waits_for_buffered_elements(mat):
    src, sink = TestSource.probe().map(lambda x: x).to_mat(TestSink.probe(), Keep.both).run(mat)
    src.send_next_many(1, 2, 3).send_complete()
    sink.expect_no_message(0.05)
    assert sink.to_strict() == [1, 2, 3]


def test_upstream_failure_drops_buffered_elements(mat):
    # Pekko's input boundary clears its buffer on error: the failure overtakes buffered elements
    src, fut = TestSource.probe().to_mat(Sink.seq(), Keep.both).run(mat)
    src.send_error(ValueError("boom"))
    with pytest.raises(ValueError, match="boom"):
        fut.result(3)
