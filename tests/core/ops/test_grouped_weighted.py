"""grouped_weighted: ported from Pekko's FlowGroupedWeightedSpec (every case), plus signal holding and
build-time validation."""
from __future__ import annotations

import pytest
from ops_kit import TE, fmat  # noqa: F401 - fmat is a fixture

from atoll import Keep, Sink, Source
from atoll.testkit import TestSink, TestSource


def test_produce_no_group_when_source_is_empty(fmat):
    assert Source.empty().grouped_weighted(1, lambda e: 999999).run_with(Sink.seq(), fmat).result(3) == []


def test_always_exhaust_a_source_into_a_single_group_if_cost_is_0(fmat):
    got = Source.range(1, 16).grouped_weighted(1, lambda e: 0).run_with(Sink.seq(), fmat).result(3)
    assert got == [list(range(1, 16))]


def test_exhaust_into_one_group_if_min_weight_equals_the_accumulated_cost(fmat):
    got = Source.range(1, 17).grouped_weighted(16, lambda e: 1).run_with(Sink.seq(), fmat).result(3)
    assert got == [list(range(1, 17))]


def test_exhaust_into_one_group_if_min_weight_is_greater_than_the_accumulated_cost(fmat):
    words = ["this", "is", "some", "string"]
    got = Source.from_iterable(words).grouped_weighted(2**63 - 1, len).run_with(Sink.seq(), fmat).result(3)
    assert got == [words]


def test_emit_a_group_each_time_the_weight_reaches_min_weight(fmat):
    got = Source.from_iterable([1, 2, 1, 2]).grouped_weighted(2, lambda e: e).run_with(Sink.seq(), fmat).result(3)
    assert got == [[1, 2], [1, 2]]


def test_not_emit_group_when_weight_is_less_than_min_weight_and_upstream_has_not_completed(fmat):
    src, probe = TestSource.probe().grouped_weighted(10, lambda e: 0).to_mat(TestSink.probe(), Keep.both).run(fmat)
    src.send_next(1)
    probe.request(1)
    probe.expect_no_message(0.05)
    src.send_complete()
    probe.expect_next([1])
    probe.expect_complete()


@pytest.mark.parametrize("w", [-1, 0])
def test_fail_at_build_time_when_min_weight_is_not_positive(w):
    with pytest.raises(ValueError, match=f"grouped_weighted: min_weight must be > 0, got {w}"):
        Source.range(1, 6).grouped_weighted(w, lambda e: 1)


def test_fail_the_stage_when_cost_is_negative(fmat):
    src, probe = TestSource.probe().grouped_weighted(1, lambda e: -1).to_mat(TestSink.probe(), Keep.both).run(fmat)
    probe.request(1)
    probe.expect_no_message(0.05)
    src.send_next(1)
    err = probe.expect_error()
    assert isinstance(err, ValueError) and str(err) == "Negative weight [-1] for element [1] is not allowed"


def test_cost_function_failure_fails_the_stream(fmat):
    def cost(e):
        raise TE("cost")

    with pytest.raises(TE):
        Source.range(1, 3).grouped_weighted(1, cost).run_with(Sink.seq(), fmat).result(3)


def test_signal_waits_behind_the_group_holding_earlier_elements(fmat):
    src, probe = (TestSource.probe().grouped_weighted(3, lambda e: e)
                  .to_mat(TestSink.probe(signals=True), Keep.both).run(fmat))
    probe.request(5)
    src.send_next(1)
    src.send_watermark(10)
    probe.expect_no_message(0.05)
    src.send_next(2)
    probe.expect_next([1, 2])
    probe.expect_watermark(10)
    src.send_watermark(11)
    probe.expect_watermark(11)
    src.send_complete()
    probe.expect_complete()


def test_validation():
    with pytest.raises(TypeError, match="grouped_weighted: argument 'cost' must be callable"):
        Source.empty().grouped_weighted(1, 2)
    with pytest.raises(TypeError, match="grouped_weighted: min_weight must be an int"):
        Source.empty().grouped_weighted(1.5, len)
