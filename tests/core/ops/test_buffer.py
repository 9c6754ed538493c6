"""buffer(size, strategy) with every overflow strategy: ported from Pekko's FlowBufferSpec.

As in the Pekko spec, the stream runs with an input buffer of one element, so the probe publisher
only gets ahead of the buffer stage by one element. Both probes live in the stream's island and
share its inbox, so a ``request`` sent after the last ``send_next`` is always handled after that
element arrived (Pekko's spec waits 500 ms there to avoid the race its actors have).

Added beyond the Pekko spec: upstream completion and failure while elements are buffered, and the
build-time validation of ``buffer``'s arguments.
"""
from __future__ import annotations

import pytest
from ops_kit import TE

from atoll import Attributes, Flow, Keep, OverflowStrategy, Sink, Source
from atoll.errors import BufferOverflowError
from atoll.testkit import TestSink, TestSource

ONE = Attributes.input_buffer(1, 1)
DROPPING = [OverflowStrategy.drop_head, OverflowStrategy.drop_tail, OverflowStrategy.drop_buffer]


def _probes(mat, size, strategy):
    graph = TestSource.probe().buffer(size, strategy).to_mat(TestSink.probe(), Keep.both).add_attributes(ONE)
    src, sink = graph.run(mat)
    sink.ensure_subscription()
    return src, sink


def _head_of_grouped(source, mat):
    return source.grouped(1001).add_attributes(ONE).run_with(Sink.head(), mat).result(3)


# =========================================================================== backpressure
def test_pass_elements_through_normally_in_backpressured_mode(mat):
    out = _head_of_grouped(Source.range(1, 1001).buffer(100, OverflowStrategy.backpressure), mat)
    assert out == list(range(1, 1001))


def test_pass_elements_through_normally_in_backpressured_mode_with_buffer_size_one(mat):
    out = _head_of_grouped(Source.range(1, 1001).buffer(1, OverflowStrategy.backpressure), mat)
    assert out == list(range(1, 1001))


def test_pass_elements_through_a_chain_of_backpressured_buffers_of_different_size(mat):
    bp = OverflowStrategy.backpressure
    src = Source.range(1, 1001)
    for size in (1, 10, 256, 1, 5, 128):
        src = src.buffer(size, bp)
    assert _head_of_grouped(src, mat) == list(range(1, 1001))


def test_accept_elements_that_fit_in_the_buffer_while_downstream_is_silent(mat):
    src, sink = _probes(mat, 100, OverflowStrategy.backpressure)
    for i in range(1, 101):
        src.send_next(i)
    for i in range(1, 101):
        sink.request(1)
        sink.expect_next(i)
    sink.cancel()
    src.expect_cancellation()


def test_backpressure_stops_pulling_when_the_buffer_is_full(mat):
    src, sink = _probes(mat, 3, OverflowStrategy.backpressure)
    src.send_next_many(1, 2, 3)  # buffered: the buffer is full and does not pull any more
    src.send_next(4)  # taken by the input boundary (one element), but not pulled from it
    src.expect_no_message(0.05)  # no further demand reaches the publisher
    sink.request(1)
    sink.expect_next(1)
    src.expect_request()  # room again: 4 is pulled in and the boundary asks for one more
    sink.request(4)
    sink.expect_next(2, 3, 4)
    src.send_complete()
    sink.expect_complete()


# =========================================================================== dropping strategies
def test_drop_head_elements_if_buffer_is_full_and_configured_so(mat):
    src, sink = _probes(mat, 100, OverflowStrategy.drop_head)
    for i in range(1, 201):
        src.send_next(i)
    for i in range(101, 201):
        sink.request(1)
        sink.expect_next(i)
    sink.request(1)
    sink.expect_no_message(0.1)
    src.send_next(-1)
    sink.request(1)
    sink.expect_next(-1)
    sink.cancel()
    src.expect_cancellation()


def test_drop_tail_elements_if_buffer_is_full_and_configured_so(mat):
    src, sink = _probes(mat, 100, OverflowStrategy.drop_tail)
    for i in range(1, 201):
        src.send_next(i)
    for i in range(1, 100):
        sink.request(1)
        sink.expect_next(i)
    sink.request(1)
    sink.expect_next(200)
    sink.request(1)
    sink.expect_no_message(0.1)
    src.send_next(-1)
    sink.request(1)
    sink.expect_next(-1)
    sink.cancel()
    src.expect_cancellation()


def test_drop_all_elements_if_buffer_is_full_and_configured_so(mat):
    src, sink = _probes(mat, 100, OverflowStrategy.drop_buffer)
    for i in range(1, 151):
        src.send_next(i)
    for i in range(101, 151):
        sink.request(1)
        sink.expect_next(i)
    sink.request(1)
    sink.expect_no_message(0.1)
    src.send_next(-1)
    sink.request(1)
    sink.expect_next(-1)
    sink.cancel()
    src.expect_cancellation()


@pytest.mark.parametrize("strategy", DROPPING, ids=repr)
def test_work_with_dropping_strategy_if_buffer_size_of_one(mat, strategy):
    src, sink = _probes(mat, 1, strategy)
    for i in range(1, 201):
        src.send_next(i)
    sink.request(1)
    sink.expect_next(200)
    sink.request(1)
    sink.expect_no_message(0.1)
    src.send_next(-1)
    sink.request(1)
    sink.expect_next(-1)
    sink.cancel()
    src.expect_cancellation()


@pytest.mark.parametrize("strategy", DROPPING, ids=repr)
def test_dropping_strategies_keep_pulling_while_full(mat, strategy):
    # an overflowing dropping buffer never backpressures: every element sent is requested
    src, sink = _probes(mat, 2, strategy)
    for i in range(1, 11):
        src.send_next(i)
    src.expect_request()
    src.send_complete()
    sink.request(5)
    expected = {"drop_head": [9, 10], "drop_tail": [1, 10], "drop_buffer": [9, 10]}[strategy.kind]
    sink.expect_next(*expected)
    sink.expect_complete()


# =========================================================================== fail
def test_fail_upstream_if_buffer_is_full_and_configured_so(mat):
    src, sink = _probes(mat, 100, OverflowStrategy.fail)
    for i in range(1, 101):
        src.send_next(i)
    for i in range(1, 11):
        sink.request(1)
        sink.expect_next(i)
    for i in range(101, 112):
        src.send_next(i)
    src.expect_cancellation()
    err = sink.expect_error(BufferOverflowError)
    assert str(err) == "Buffer overflow (max capacity was: 100)!"


def test_fail_strategy_accepts_elements_up_to_its_capacity(mat):
    src, sink = _probes(mat, 3, OverflowStrategy.fail)
    src.send_next_many(1, 2, 3)
    src.send_complete()
    sink.request(4)
    sink.expect_next(1, 2, 3)
    sink.expect_complete()


# =========================================================================== termination
@pytest.mark.parametrize("strategy", DROPPING + [OverflowStrategy.backpressure, OverflowStrategy.fail], ids=repr)
def test_upstream_completion_waits_until_the_buffer_is_drained(mat, strategy):
    src, sink = _probes(mat, 4, strategy)
    src.send_next_many(1, 2, 3)
    src.send_complete()
    sink.request(1)
    sink.expect_next(1)
    sink.expect_no_message(0.05)
    sink.request(2)
    sink.expect_next(2, 3)
    sink.expect_complete()


@pytest.mark.parametrize("strategy", DROPPING + [OverflowStrategy.backpressure, OverflowStrategy.fail], ids=repr)
def test_upstream_failure_overtakes_buffered_elements(mat, strategy):
    src, sink = _probes(mat, 4, strategy)
    src.send_next_many(1, 2)
    src.send_error(TE("up"))
    sink.expect_error(TE("up"))  # without any demand: the buffered elements are dropped


def test_empty_stream_completes_through_a_buffer(mat):
    probe = Source.empty().buffer(10, OverflowStrategy.backpressure).run_with(TestSink.probe(), mat)
    probe.expect_subscription_and_complete()


def test_downstream_cancellation_cancels_upstream_even_with_buffered_elements(mat):
    src, sink = _probes(mat, 4, OverflowStrategy.backpressure)
    src.send_next_many(1, 2)
    sink.cancel()
    src.expect_cancellation()


def test_buffer_is_reusable_across_materializations(mat):
    flow = Flow().buffer(3, OverflowStrategy.drop_head)
    for _ in range(2):
        assert Source.range(0, 10).via(flow).run_with(Sink.seq(), mat).result(3) == list(range(10))


# =========================================================================== build-time validation
@pytest.mark.parametrize("size", [0, -1])
def test_buffer_rejects_a_size_below_one(size):
    with pytest.raises(ValueError, match="buffer.*size"):
        Source.single(1).buffer(size, OverflowStrategy.backpressure)
    with pytest.raises(ValueError, match="buffer.*size"):
        Flow().buffer(size, OverflowStrategy.fail)


@pytest.mark.parametrize("size", [1.5, "3", None, True])
def test_buffer_rejects_a_size_that_is_not_an_int(size):
    with pytest.raises(TypeError, match="buffer.*size"):
        Source.single(1).buffer(size, OverflowStrategy.backpressure)


@pytest.mark.parametrize("strategy", ["backpressure", None, 1, OverflowStrategy])
def test_buffer_rejects_a_strategy_that_is_not_an_overflow_strategy(strategy):
    with pytest.raises(TypeError, match="buffer.*strategy"):
        Source.single(1).buffer(4, strategy)


def test_overflow_strategy_rejects_an_unknown_kind():
    with pytest.raises(ValueError, match="OverflowStrategy"):
        OverflowStrategy("drop_new")


def test_overflow_strategies_are_distinct_values():
    kinds = ["backpressure", "drop_head", "drop_tail", "drop_buffer", "fail"]
    strategies = [getattr(OverflowStrategy, k) for k in kinds]
    assert len(set(strategies)) == 5
    assert OverflowStrategy("fail") == OverflowStrategy.fail
