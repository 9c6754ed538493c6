"""Sink.count, Sink.exists, Sink.forall, Sink.none: ported from Pekko's SinkSpec ("The forall sink", "The none
sink", "The exists sink": every case), plus cancelling upstream once decided, Stop/Resume supervision, the
count sink, and the chunk forms' parity with the element-only run."""
from __future__ import annotations

import pytest
from chunk_kit import Boom, outcome, resuming, same
from ops_kit import TE, fmat  # noqa: F401 - fmat is a fixture

from atoll import Attributes, Keep, Sink, Source, Supervision
from atoll.testkit import TestSource

RESUME = Attributes.supervision_strategy(Supervision.resuming_decider)
RESTART = Attributes.supervision_strategy(Supervision.restarting_decider)


# ---------------------------------------------------------------------------------------------- count
def test_count(fmat):
    assert Source.range(0, 100).run_with(Sink.count(), fmat).result(3) == 100


def test_count_empty(fmat):
    assert Source.empty().run_with(Sink.count(), fmat).result(3) == 0


def test_count_failure(fmat):
    with pytest.raises(TE):
        Source.failed(TE("x")).run_with(Sink.count(), fmat).result(3)


# ---------------------------------------------------------------------------------------------- forall
def test_forall_completes_with_true_when_all_match(fmat):
    assert Source.range(1, 5).run_with(Sink.forall(lambda x: x > 0), fmat).result(3) is True


def test_forall_completes_with_true_on_empty_stream(fmat):
    assert Source.empty().run_with(Sink.forall(lambda x: x > 0), fmat).result(3) is True


def test_forall_completes_with_false_when_any_does_not_match(fmat):
    assert Source.range(1, 5).run_with(Sink.forall(lambda x: x > 2), fmat).result(3) is False


def test_forall_cancels_upstream_once_false(fmat):
    probe, fut = TestSource.probe().to_mat(Sink.forall(lambda x: x < 2), Keep.both).run(fmat)
    probe.send_next(1)
    probe.send_next(2)
    probe.expect_cancellation()
    assert fut.result(3) is False


def test_forall_completes_with_failure_when_the_predicate_throws_with_stop(fmat):
    def pred(x):
        if x == 2:
            raise TE("boom")
        return True

    with pytest.raises(TE):
        Source.range(1, 5).run_with(Sink.forall(pred), fmat).result(3)


@pytest.mark.parametrize("attrs", [RESUME, RESTART])
def test_forall_skips_the_failing_element_with_resume_or_restart(fmat, attrs):
    def pred(x):
        if x == 2:
            raise TE("boom")
        return True

    assert Source.range(1, 5).run_with(Sink.forall(pred).with_attributes(attrs), fmat).result(3) is True


def test_forall_upstream_failure(fmat):
    with pytest.raises(TE):
        Source.failed(TE("up")).run_with(Sink.forall(lambda x: True), fmat).result(3)


# ---------------------------------------------------------------------------------------------- exists
def test_exists_completes_with_true_when_any_matches(fmat):
    assert Source.range(1, 5).run_with(Sink.exists(lambda x: x > 2), fmat).result(3) is True


def test_exists_completes_with_false_on_empty_stream(fmat):
    assert Source.empty().run_with(Sink.exists(lambda x: x > 0), fmat).result(3) is False


def test_exists_completes_with_false_when_none_matches(fmat):
    assert Source.range(1, 5).run_with(Sink.exists(lambda x: x > 10), fmat).result(3) is False


def test_exists_cancels_upstream_once_true(fmat):
    probe, fut = TestSource.probe().to_mat(Sink.exists(lambda x: x == 2), Keep.both).run(fmat)
    probe.send_next(1)
    probe.send_next(2)
    probe.expect_cancellation()
    assert fut.result(3) is True


def test_exists_completes_with_failure_when_the_predicate_throws_with_stop(fmat):
    def pred(x):
        if x == 2:
            raise TE("boom")
        return False

    with pytest.raises(TE):
        Source.range(1, 5).run_with(Sink.exists(pred), fmat).result(3)


@pytest.mark.parametrize("attrs", [RESUME, RESTART])
def test_exists_skips_the_failing_element_with_resume_or_restart(fmat, attrs):
    def pred(x):
        if x == 2:
            raise TE("boom")
        return x == 4

    assert Source.range(1, 5).run_with(Sink.exists(pred).with_attributes(attrs), fmat).result(3) is True


def test_validation():
    with pytest.raises(TypeError, match="Sink.exists: argument 'pred' must be callable"):
        Sink.exists(1)
    with pytest.raises(TypeError, match="Sink.forall: argument 'pred' must be callable"):
        Sink.forall(None)


# ---------------------------------------------------------------------------------------------- chunk forms
DATA = list(range(1, 41))


def _raising(x):
    if x % 9 == 0:
        raise Boom(x)
    return x > 30


@pytest.mark.parametrize("make", [Sink.count, lambda: Sink.exists(lambda x: x == 17), lambda: Sink.forall(lambda x: x < 17),
                                  lambda: Sink.none(lambda x: x == 17), lambda: Sink.none(lambda x: x > 100),
                                  lambda: Sink.exists(_raising), lambda: Sink.exists(_raising).with_attributes(
                                      Attributes.supervision_strategy(resuming)), lambda: Sink.take_last(5)])
def test_chunk_forms_match_the_element_form(make):
    def graph():
        return Source.from_iterable(DATA).to_mat(make(), Keep.right)

    want = outcome(graph(), fusion=False)
    for size in (1, 3, 1024):
        assert same(outcome(graph(), chunk_size=size), want), size


# ---------------------------------------------------------------------------------------------- exact SinkSpec ports
def _oops_at_2(result):
    def pred(elem):
        if elem == 2:
            raise RuntimeError("Oops")
        return result(elem)

    return pred


def test_spec_forall_completes_with_true_with_restart_strategy(fmat):
    sink = Sink.forall(_oops_at_2(lambda e: e > 0)).with_attributes(RESTART)
    assert Source.range(1, 3).run_with(sink, fmat).result(3) is True


def test_spec_exists_with_restart_strategy(fmat):
    sink = Sink.exists(_oops_at_2(lambda e: e > 1)).with_attributes(RESTART)
    assert Source.range(1, 3).run_with(sink, fmat).result(3) is False


def test_spec_none_completes_with_true_when_all_elements_do_not_match(fmat):
    assert Source.range(1, 5).run_with(Sink.none(lambda x: x < 0), fmat).result(3) is True


def test_spec_none_completes_with_false_when_any_element_matches(fmat):
    assert Source.range(1, 5).run_with(Sink.none(lambda x: x > 2), fmat).result(3) is False


def test_spec_none_completes_with_true_if_the_stream_is_empty(fmat):
    assert Source.empty().run_with(Sink.none(lambda x: x > 2), fmat).result(3) is True


def test_spec_none_completes_with_failure_if_the_stream_failed(fmat):
    with pytest.raises(RuntimeError, match="Oops"):
        Source.failed(RuntimeError("Oops")).run_with(Sink.none(lambda x: x > 2), fmat).result(3)


def test_spec_none_completes_with_false_with_restart_strategy(fmat):
    sink = Sink.none(_oops_at_2(lambda e: e > 1)).with_attributes(RESTART)
    assert Source.range(1, 4).run_with(sink, fmat).result(3) is False


def test_none_cancels_upstream_once_matched(fmat):
    probe, fut = TestSource.probe().to_mat(Sink.none(lambda x: x == 2), Keep.both).run(fmat)
    probe.send_next(1)
    probe.send_next(2)
    probe.expect_cancellation()
    assert fut.result(3) is False


def test_none_validation():
    with pytest.raises(TypeError, match="Sink.none: argument 'pred' must be callable"):
        Sink.none(None)
