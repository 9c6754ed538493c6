"""fold_while and Sink.fold_while: ported from Pekko's FlowFoldWhileSpec (happy path, forall and exists built on
it) and SinkFoldSpec ("sink.foldWhile works in happy path"), plus the
fold cases it shares (empty stream, failure, supervision, early cancellation of upstream) and the chunk
form's parity with the element-only run."""
from __future__ import annotations

import operator

import pytest
from chunk_kit import Boom, check, restarting, resuming
from ops_kit import TE, fmat  # noqa: F401 - fmat is a fixture

from atoll import Attributes, Sink, Source, Supervision
from atoll.testkit import TestSink, TestSource

add = operator.add


def test_happy_path(fmat):
    assert Source.range(1, 11).fold_while(0, lambda a: a < 10, add).run_with(Sink.head(), fmat).result(3) == 10


def test_can_be_used_to_implement_forall(fmat):
    def f(x):
        return x < 5

    got = Source.range(1, 11).fold_while(True, lambda a: a, lambda a, x: a and f(x)).run_with(Sink.head(), fmat)
    assert got.result(3) is False


def test_can_be_used_to_implement_exists(fmat):
    def f(x):
        return x > 5

    got = Source.range(1, 11).fold_while(False, lambda a: not a, lambda a, x: a or f(x)).run_with(Sink.head(), fmat)
    assert got.result(3) is True


def test_runs_to_completion_when_the_predicate_keeps_holding(fmat):
    assert Source.range(1, 11).fold_while(0, lambda a: True, add).run_with(Sink.seq(), fmat).result(3) == [55]


def test_empty_stream_emits_zero(fmat):
    assert Source.empty().fold_while(7, lambda a: True, add).run_with(Sink.seq(), fmat).result(3) == [7]


def test_emits_and_cancels_upstream_when_the_predicate_fails(fmat):
    src, probe = TestSource.probe().fold_while(0, lambda a: a < 3, add).to_mat(TestSink.probe(), lambda a, b: (a, b)).run(fmat)
    probe.request(1)
    src.send_next(1)
    src.send_next(1)
    probe.expect_no_message(0.05)
    src.send_next(1)
    probe.expect_next(3)
    probe.expect_complete()
    src.expect_cancellation()


def test_upstream_failure(fmat):
    src, probe = TestSource.probe().fold_while(0, lambda a: True, add).to_mat(TestSink.probe(), lambda a, b: (a, b)).run(fmat)
    probe.request(1)
    src.send_next(1)
    src.send_error(TE("up"))
    assert probe.expect_error() == TE("up")


def _fn(a, x):
    if x == 3:
        raise TE("boom")
    return a + x


@pytest.mark.parametrize("decider,want", [(Supervision.resuming_decider, 12), (Supervision.restarting_decider, 9)])
def test_supervision(fmat, decider, want):
    got = (Source.range(1, 6).fold_while(0, lambda a: True, _fn)
           .with_attributes(Attributes.supervision_strategy(decider)).run_with(Sink.head(), fmat))
    assert got.result(3) == want


def test_stop_fails(fmat):
    with pytest.raises(TE):
        Source.range(1, 6).fold_while(0, lambda a: True, _fn).run_with(Sink.head(), fmat).result(3)


def test_predicate_failure_is_supervised(fmat):
    def pred(a):
        if a == 3:
            raise TE("pred")
        return a < 10

    got = (Source.range(1, 11).fold_while(0, pred, add)
           .with_attributes(Attributes.supervision_strategy(Supervision.resuming_decider)).run_with(Sink.head(), fmat))
    assert got.result(3) == 10


# ---------------------------------------------------------------------------------------------- chunk form
DATA = list(range(1, 41))


def _chunk_fn(a, x):
    if x % 11 == 0:
        raise Boom(x)
    return a + x


@pytest.mark.parametrize("limit", [0, 5, 100, 10**6])
def test_chunk_form_matches_element_form(limit):
    want = 0
    for x in DATA:
        want += x
        if not want < limit:
            break
    assert check(lambda f: f.fold_while(0, lambda a: a < limit, add), DATA) == ("ok", [want])


@pytest.mark.parametrize("decider", [None, resuming, restarting])
def test_chunk_form_supervision(decider):
    got = check(lambda f: f.fold_while(0, lambda a: a < 300, _chunk_fn), DATA, decider)
    if decider is None:
        assert got[0] == "err" and got[1] == Boom(11)


def test_validation():
    with pytest.raises(TypeError, match="fold_while: argument 'pred' must be callable"):
        Source.empty().fold_while(0, None, add)
    with pytest.raises(TypeError, match="fold_while: argument 'fn' must be callable"):
        Source.empty().fold_while(0, bool, 1)
    with pytest.raises(ValueError, match="fold_while: argument 'zero' must not be None"):
        Source.empty().fold_while(None, bool, add)


def test_sink_fold_while_works_in_happy_path(fmat):
    assert Source.range(1, 11).run_with(Sink.fold_while(0, lambda a: a < 10, add), fmat).result(3) == 10


def test_sink_fold_while_cancels_upstream_once_the_predicate_fails(fmat):
    probe, fut = TestSource.probe().to_mat(Sink.fold_while(0, lambda a: a < 3, add), lambda a, b: (a, b)).run(fmat)
    probe.send_next(2)
    probe.send_next(2)
    probe.expect_cancellation()
    assert fut.result(3) == 4


def test_sink_fold_while_empty_stream_gives_zero(fmat):
    assert Source.empty().run_with(Sink.fold_while(5, lambda a: True, add), fmat).result(3) == 5
