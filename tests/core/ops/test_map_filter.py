"""map, filter and filter_not: ported from Pekko's FlowMapSpec and FlowFilterSpec.

Every test runs on a fused and an unfused materializer (``fmat``), so both the generated loop and
the operators' own stage logic are held to the same contract.
"""
from __future__ import annotations

import random

import pytest
from ops_kit import RANDOM_TEST_RANGE, TE, fmat, run_script  # noqa: F401

from atoll import Attributes, Flow, Keep, Sink, Source, Supervision
from atoll.testkit import TestSink, TestSource

LONG_MAX = 2**63 - 1


# ---------------------------------------------------------------------------------------- map
@pytest.mark.parametrize("seed", RANDOM_TEST_RANGE)
def test_map_script(fmat, seed):
    rng = random.Random(seed)
    phases = []
    for _ in RANDOM_TEST_RANGE:
        x = rng.randint(-(2**31), 2**31 - 1)
        phases.append(([x], [str(x)]))
    run_script(fmat, lambda f: f.map(str), phases, seed=seed)


def test_map_does_not_blow_up_with_high_request_counts(fmat):
    src = Source.from_iterable([1])
    for _ in range(5):
        src = src.map(lambda x: x + 1)
    probe = src.run_with(TestSink.probe(), fmat)
    for _ in range(10_000):
        probe.request(LONG_MAX)
    probe.expect_next(6)
    probe.expect_complete()


def test_map_applies_fn_lazily_one_element_per_demand(fmat):
    calls = []
    src, sink = (
        TestSource.probe()
        .map(lambda x: calls.append(x) or x * 10)
        .to_mat(TestSink.probe(), Keep.both)
        .run(fmat)
    )
    sink.request(1)
    src.send_next(1)
    sink.expect_next(10)
    src.send_next(2)
    sink.expect_no_message(0.05)
    sink.request(1)
    sink.expect_next(20)
    src.send_complete()
    sink.expect_complete()
    assert calls == [1, 2]


def test_map_fails_with_the_exception_of_fn(fmat):
    src, sink = (
        TestSource.probe()
        .map(lambda x: 1 // x)
        .to_mat(TestSink.probe(), Keep.both)
        .run(fmat)
    )
    sink.request(3)
    src.send_next(1)
    sink.expect_next(1)
    src.send_next(0)
    assert isinstance(sink.expect_error(), ZeroDivisionError)
    assert isinstance(src.expect_cancellation(), ZeroDivisionError)


# ---------------------------------------------------------------------------------------- filter
@pytest.mark.parametrize("seed", RANDOM_TEST_RANGE)
def test_filter_script(fmat, seed):
    rng = random.Random(seed)
    phases = []
    for _ in RANDOM_TEST_RANGE:
        x = rng.randint(-(2**31), 2**31 - 1)
        phases.append(([x], [x] if x & 1 == 0 else []))
    run_script(fmat, lambda f: f.filter(lambda x: x % 2 == 0), phases, seed=seed)


def test_filter_does_not_blow_up_with_high_request_counts(fmat):
    probe = (
        Source.from_iterable([0] * 1000 + [1])
        .filter(lambda x: x != 0)
        .to_mat(TestSink.probe(), Keep.right)
        .with_attributes(Attributes.input_buffer(1, 1))
        .run(fmat)
    )
    for _ in range(10_000):
        probe.request(LONG_MAX)
    probe.expect_next(1)
    probe.expect_complete()


def test_filter_continues_if_error_with_resume(fmat):
    def pred(x):
        if x == 2:
            raise TE("TEST")
        return True

    probe = (
        Source.range(1, 4)
        .via(Flow().filter(pred).with_attributes(Attributes.supervision_strategy(Supervision.resuming_decider)))
        .run_with(TestSink.probe(), fmat)
    )
    probe.request(3)
    probe.expect_next(1, 3)
    probe.expect_complete()


def test_filter_drops_rejected_elements_while_downstream_waits_and_buffers_completion(fmat):
    # Pekko's "filter out elements without demand", adapted: Atoll's filter pulls upstream only
    # when downstream has demand (see Filter's docstring), so the demand is signalled first.
    src, sink = (
        TestSource.probe()
        .filter(lambda x: x > 1000)
        .to_mat(TestSink.probe(), Keep.both)
        .add_attributes(Attributes.input_buffer(1, 1))
        .run(fmat)
    )
    sink.request(1)
    src.send_next_many(1, 2, 3, 4, 5, 1001)
    sink.expect_next(1001)
    src.send_next(1002)
    src.send_complete()  # completion waits behind the element still in flight
    sink.expect_no_message(0.05)
    sink.request_next(1002)
    sink.expect_complete()


def test_filter_completes_when_all_remaining_elements_are_filtered_out(fmat):
    # Pekko's "complete without demand if remaining elements are filtered out", adapted: one
    # element of demand lets the filter consume (and drop) the whole rest of the stream.
    probe = Source.range(1, 1001).filter(lambda x: x > 1000).run_with(TestSink.probe(), fmat)
    probe.ensure_subscription()
    probe.request(1)
    probe.expect_complete()


@pytest.mark.parametrize("seed", RANDOM_TEST_RANGE)
def test_filter_not_script(fmat, seed):
    rng = random.Random(seed)
    phases = []
    for _ in RANDOM_TEST_RANGE:
        x = rng.randint(-(2**31), 2**31 - 1)
        phases.append(([x], [x] if x & 1 == 1 else []))
    run_script(fmat, lambda f: f.filter_not(lambda x: x % 2 == 0), phases, seed=seed)


def test_filter_uses_truthiness_of_the_predicate(fmat):
    out = Source.range(0, 6).filter(lambda x: x % 3).run_with(Sink.seq(), fmat).result(3)
    assert out == [1, 2, 4, 5]
    out = Source.range(0, 6).filter_not(lambda x: x % 3).run_with(Sink.seq(), fmat).result(3)
    assert out == [0, 3]


# ---------------------------------------------------------------------------------------- build time
def test_map_filter_reject_non_callables_at_build_time():
    with pytest.raises(TypeError, match=r"map: argument 'fn' must be callable"):
        Flow().map(42)
    with pytest.raises(TypeError, match=r"filter: argument 'pred' must be callable"):
        Source.single(1).filter("x > 1")
    with pytest.raises(TypeError, match=r"filter_not: argument 'pred' must be callable"):
        Flow().filter_not(None)
