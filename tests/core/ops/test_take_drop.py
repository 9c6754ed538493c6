"""take, take_while, drop and drop_while: ported from Pekko's FlowTakeSpec, FlowTakeWhileSpec,
FlowDropSpec and FlowDropWhileSpec.

Deviation kept on purpose: Pekko's ``take(n)``/``drop(n)`` accept a negative ``n`` (take nothing,
drop nothing); Atoll rejects it when the blueprint is built (see the build-time tests below).
"""
from __future__ import annotations

import random

import pytest
from ops_kit import RANDOM_TEST_RANGE, TE, run_script

from atoll import Attributes, Flow, Keep, Sink, Source, Supervision
from atoll.testkit import TestSink, TestSource

RESUME = Attributes.supervision_strategy(Supervision.resuming_decider)
RESTART = Attributes.supervision_strategy(Supervision.restarting_decider)


def _random_count(rng):
    return min(max(rng.randint(-10, 59), 0), 50)


# =========================================================================== take
@pytest.mark.parametrize("seed", RANDOM_TEST_RANGE)
def test_take_script(mat, seed):
    d = _random_count(random.Random(seed))
    if d >= len(RANDOM_TEST_RANGE):
        phases = [([n], [n]) for n in RANDOM_TEST_RANGE]
        run_script(mat, lambda f: f.take(d), phases, seed=seed)
    else:
        # the d-th element completes the stream (and cancels upstream) by itself
        phases = [([n], [n]) for n in RANDOM_TEST_RANGE if n <= d]
        run_script(mat, lambda f: f.take(d), phases, seed=seed, completes_early=True)


@pytest.mark.parametrize("d", [0, 1, 4, 10])
def test_take_script_at_fixed_counts(mat, d):
    phases = [([n], [n]) for n in RANDOM_TEST_RANGE if n <= d]
    run_script(mat, lambda f: f.take(d), phases, seed=d, completes_early=d < 10)


def test_take_zero_completes_eagerly_independently_of_upstream_completion(mat):
    Source.never().take(0).run_with(Sink.ignore(), mat).result(3)


def test_take_cancels_upstream_once_the_count_is_reached(mat):
    src, sink = TestSource.probe().take(2).to_mat(TestSink.probe(), Keep.both).run(mat)
    sink.request(5)
    src.send_next(1)
    sink.expect_next(1)
    src.send_next(2)
    sink.expect_next(2)
    sink.expect_complete()
    src.expect_cancellation()


def test_take_completes_when_upstream_completes_first(mat):
    assert Source.range(0, 3).take(10).run_with(Sink.seq(), mat).result(3) == [0, 1, 2]


def test_take_passes_upstream_failure_on(mat):
    src, sink = TestSource.probe().take(5).to_mat(TestSink.probe(), Keep.both).run(mat)
    sink.request(5)
    src.send_next(1)
    sink.expect_next(1)
    src.send_error(TE("up"))
    sink.expect_error(TE("up"))


# =========================================================================== take_while
def test_take_while_takes_while_predicate_is_true(mat):
    probe = Source.range(1, 5).take_while(lambda x: x < 3).run_with(TestSink.probe(), mat)
    probe.request(3)
    probe.expect_next(1, 2)
    probe.expect_complete()


def test_take_while_completes_for_an_empty_stream(mat):
    probe = Source.empty().take_while(lambda x: x < 2).run_with(TestSink.probe(), mat)
    probe.request(1)
    probe.expect_complete()


def test_take_while_inclusive_can_be_used_to_implement_take_until(mat):
    # Pekko's "can be used to implemented takeUntil": Atoll has no take_until; its inclusive
    # take_while is the same operator
    out = (
        Source.from_iterable(["message", "message", "DONE", "unexpected"])
        .take_while(lambda m: m != "DONE", inclusive=True)
        .to_mat(Sink.seq(), Keep.right)
        .run(mat)
        .result(3)
    )
    assert out == ["message", "message", "DONE"]


def test_take_while_continues_if_error(mat):
    def pred(a):
        if a == 3:
            raise TE("test")
        return True

    probe = Source.range(1, 5).via(Flow().take_while(pred).with_attributes(RESUME)).run_with(TestSink.probe(), mat)
    probe.request(4)
    probe.expect_next(1, 2, 4)
    probe.expect_complete()


def test_take_while_fails_with_the_exception_of_the_predicate_by_default(mat):
    def pred(a):
        if a == 3:
            raise TE("test")
        return True

    probe = Source.range(1, 5).take_while(pred).run_with(TestSink.probe(), mat)
    probe.request(4)
    probe.expect_next(1, 2)
    probe.expect_error(TE("test"))


def test_take_while_inclusive_emits_the_failing_element_and_then_no_more(mat):
    probe = Source.range(1, 11).take_while(lambda x: x < 3, True).run_with(TestSink.probe(), mat)
    probe.request(4)
    probe.expect_next(1, 2, 3)
    probe.expect_complete()


def test_take_while_cancels_upstream_when_the_predicate_fails(mat):
    src, sink = TestSource.probe().take_while(lambda x: x < 3).to_mat(TestSink.probe(), Keep.both).run(mat)
    sink.request(5)
    src.send_next(1)
    sink.expect_next(1)
    src.send_next(5)
    sink.expect_complete()
    src.expect_cancellation()


# =========================================================================== drop
@pytest.mark.parametrize("seed", RANDOM_TEST_RANGE)
def test_drop_script(mat, seed):
    d = _random_count(random.Random(seed))
    phases = [([n], [] if n <= d else [n]) for n in RANDOM_TEST_RANGE]
    run_script(mat, lambda f: f.drop(d), phases, seed=seed)


@pytest.mark.parametrize("d", [0, 1, 4, 10, 11])
def test_drop_script_at_fixed_counts(mat, d):
    phases = [([n], [] if n <= d else [n]) for n in RANDOM_TEST_RANGE]
    run_script(mat, lambda f: f.drop(d), phases, seed=d)


def test_drop_zero_drops_nothing(mat):
    assert Source.from_iterable([1, 2, 3]).drop(0).run_with(Sink.seq(), mat).result(3) == [1, 2, 3]


# =========================================================================== drop_while
def test_drop_while_drops_while_predicate_is_true(mat):
    probe = Source.range(1, 5).drop_while(lambda x: x < 3).run_with(TestSink.probe(), mat)
    probe.request(2)
    probe.expect_next(3, 4)
    probe.expect_complete()


def test_drop_while_completes_for_an_empty_stream(mat):
    probe = Source.empty().drop_while(lambda x: x < 2).run_with(TestSink.probe(), mat)
    probe.request(1)
    probe.expect_complete()


def test_drop_while_continues_if_error(mat):
    def pred(a):
        if a < 3:
            return True
        raise TE("")

    probe = Source.range(1, 5).via(Flow().drop_while(pred).with_attributes(RESUME)).run_with(TestSink.probe(), mat)
    probe.request(1)
    probe.expect_complete()


def test_drop_while_restarts_with_strategy(mat):
    def pred(a):
        if a in (1, 3):
            return True
        if a == 4:
            return False
        raise TE("")

    probe = Source.range(1, 5).via(Flow().drop_while(pred).with_attributes(RESTART)).run_with(TestSink.probe(), mat)
    probe.request(1)
    probe.expect_next(4)
    probe.expect_complete()


def test_drop_while_stops_consulting_the_predicate_once_it_failed(mat):
    calls = []

    def pred(x):
        calls.append(x)
        return x < 3

    out = Source.from_iterable([1, 2, 3, 1, 2]).drop_while(pred).run_with(Sink.seq(), mat).result(3)
    assert out == [3, 1, 2]
    assert calls == [1, 2, 3]


def test_drop_while_fails_with_the_exception_of_the_predicate_by_default(mat):
    def pred(a):
        raise TE("pred")

    probe = Source.range(1, 5).drop_while(pred).run_with(TestSink.probe(), mat)
    probe.request(1)
    probe.expect_error(TE("pred"))


# =========================================================================== build time
@pytest.mark.parametrize(
    "build, pattern",
    [
        (lambda: Flow().take(-1), r"take: argument 'n' must be >= 0, got -1"),
        (lambda: Source.range(1, 4).take(-1), r"take: argument 'n' must be >= 0, got -1"),
        (lambda: Flow().drop(-1), r"drop: argument 'n' must be >= 0, got -1"),
        (lambda: Source.range(1, 4).drop(-5), r"drop: argument 'n' must be >= 0, got -5"),
    ],
)
def test_take_and_drop_reject_negative_counts_at_build_time(build, pattern):
    # Pekko's "not take anything for negative n" / "not drop anything for negative n": rejected here
    with pytest.raises(ValueError, match=pattern):
        build()


@pytest.mark.parametrize(
    "build, pattern",
    [
        (lambda: Flow().take(1.5), r"take: argument 'n' must be an int"),
        (lambda: Flow().drop("2"), r"drop: argument 'n' must be an int"),
        (lambda: Flow().take_while(None), r"take_while: argument 'pred' must be callable"),
        (lambda: Flow().drop_while(True), r"drop_while: argument 'pred' must be callable"),
    ],
)
def test_take_and_drop_reject_bad_argument_types_at_build_time(build, pattern):
    with pytest.raises(TypeError, match=pattern):
        build()
