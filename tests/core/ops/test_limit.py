"""limit and limit_weighted: ported from Pekko's FlowLimitSpec and FlowLimitWeightedSpec.

Deviation kept on purpose: Pekko's ``limit(-1)`` builds a stream that fails with
StreamLimitReachedException on its first element; Atoll rejects a negative limit when the
blueprint is built.
"""
from __future__ import annotations

import pytest
from ops_kit import TE

from atoll import Attributes, Flow, Keep, Sink, Source, Supervision
from atoll.errors import StreamLimitReachedError
from atoll.testkit import TestSink, TestSource

INT_MAX = 2**31 - 1
RESUME = Attributes.supervision_strategy(Supervision.resuming_decider)
RESTART = Attributes.supervision_strategy(Supervision.restarting_decider)


# =========================================================================== limit
def test_limit_produces_empty_sequence_when_source_is_empty_and_n_is_zero(mat):
    fut = Source.from_iterable([]).limit(0).grouped(INT_MAX).run_with(Sink.head_option(), mat)
    assert fut.result(3) is None


def test_limit_produces_output_identical_to_the_input_when_n_is_its_length(mat):
    data = list(range(1, 7))
    fut = Source.from_iterable(data).limit(len(data)).grouped(INT_MAX).run_with(Sink.head(), mat)
    assert fut.result(3) == data


def test_limit_produces_output_identical_to_the_input_when_n_exceeds_its_length(mat):
    data = list(range(1, 7))
    fut = Source.from_iterable(data).limit(len(data) + 2).grouped(INT_MAX).run_with(Sink.head(), mat)
    assert fut.result(3) == data


def test_limit_produces_n_elements_before_failing_when_n_is_below_the_input_size(mat):
    data = list(range(1, 7))
    n = len(data) - 2
    probe = Source.from_iterable(data).limit(n).run_with(TestSink.probe(), mat)
    probe.request(n + 1)
    probe.expect_next_n(data[:n])
    exc = probe.expect_error(StreamLimitReachedError)
    assert exc.n == n


def test_limit_fails_on_the_first_element_beyond_the_limit_and_cancels_upstream(mat):
    src, sink = TestSource.probe().limit(1).to_mat(TestSink.probe(), Keep.both).run(mat)
    sink.request(3)
    src.send_next("a")
    sink.expect_next("a")
    src.send_next("b")
    sink.expect_error(StreamLimitReachedError)
    assert isinstance(src.expect_cancellation(), StreamLimitReachedError)


# =========================================================================== limit_weighted
def test_limit_weighted_produces_empty_sequence_regardless_of_cost_when_empty_and_n_is_zero(mat):
    fut = Source.from_iterable([]).limit_weighted(0, lambda e: 999_999).grouped(INT_MAX).run_with(Sink.head_option(), mat)
    assert fut.result(3) is None


def test_limit_weighted_always_exhausts_the_source_if_cost_is_zero(mat):
    data = list(range(1, 16))
    fut = Source.from_iterable(data).limit_weighted(1, lambda e: 0).grouped(INT_MAX).run_with(Sink.head(), mat)
    assert fut.result(3) == data


def test_limit_weighted_exhausts_the_source_if_n_equals_its_length_and_cost_is_one(mat):
    data = list(range(1, 17))
    fut = Source.from_iterable(data).limit_weighted(len(data), lambda e: 1).grouped(INT_MAX).run_with(Sink.head(), mat)
    assert fut.result(3) == data


WORDS = ["this", "is", "some", "string"]


def test_limit_weighted_exhausts_the_source_if_n_covers_the_accumulated_cost(mat):
    n = sum(map(len, WORDS))
    fut = Source.from_iterable(WORDS).limit_weighted(n, len).grouped(INT_MAX).run_with(Sink.head(), mat)
    assert fut.result(3) == WORDS


def test_limit_weighted_fails_when_n_is_below_the_accumulated_cost(mat):
    n = sum(map(len, WORDS)) - 1
    fut = Source.from_iterable(WORDS).limit_weighted(n, len).grouped(INT_MAX).run_with(Sink.head(), mat)
    with pytest.raises(StreamLimitReachedError):
        fut.result(3)


def _cost_failing_on(bad):
    def cost(e):
        if e == bad:
            raise TE("cost")
        return 1

    return cost


def test_limit_weighted_fails_with_the_exception_of_cost_by_default(mat):
    probe = Source.range(1, 5).limit_weighted(10, _cost_failing_on(2)).run_with(TestSink.probe(), mat)
    probe.request(5)
    probe.expect_next(1)
    probe.expect_error(TE("cost"))


def test_limit_weighted_resume_skips_the_element_whose_cost_failed(mat):
    flow = Flow().limit_weighted(3, _cost_failing_on(2)).with_attributes(RESUME)
    out = Source.range(1, 5).via(flow).run_with(Sink.seq(), mat).result(3)
    assert out == [1, 3, 4]


def test_limit_weighted_restart_skips_the_element_and_resets_the_count(mat):
    flow = Flow().limit_weighted(2, _cost_failing_on(3)).with_attributes(RESTART)
    # 1 and 2 use up the limit; the failure on 3 resets it, so 4 and 5 fit again
    out = Source.range(1, 6).via(flow).run_with(Sink.seq(), mat).result(3)
    assert out == [1, 2, 4, 5]


# =========================================================================== build time
@pytest.mark.parametrize(
    "build, pattern",
    [
        (lambda: Flow().limit(-1), r"limit: argument 'n' must be >= 0, got -1"),
        (lambda: Source.range(1, 7).limit(-1), r"limit: argument 'n' must be >= 0, got -1"),
        (lambda: Flow().limit_weighted(-1, len), r"limit_weighted: argument 'n' must be >= 0, got -1"),
    ],
)
def test_limit_rejects_a_negative_limit_at_build_time(build, pattern):
    with pytest.raises(ValueError, match=pattern):
        build()


@pytest.mark.parametrize(
    "build, pattern",
    [
        (lambda: Flow().limit(2.5), r"limit: argument 'n' must be an int"),
        (lambda: Flow().limit_weighted("10", len), r"limit_weighted: argument 'n' must be an int"),
        (lambda: Flow().limit_weighted(10, 1), r"limit_weighted: argument 'cost' must be callable"),
    ],
)
def test_limit_rejects_bad_argument_types_at_build_time(build, pattern):
    with pytest.raises(TypeError, match=pattern):
        build()
