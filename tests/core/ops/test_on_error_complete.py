"""on_error_complete: ported from Pekko's FlowOnErrorCompleteSpec (every case: all exceptions, a dedicated
exception type, an unexpected exception, a partial function applied / not applied), plus a raising
predicate, elements and completion passing through, and build-time validation."""
from __future__ import annotations

import pytest
from ops_kit import TE, fmat  # noqa: F401 - fmat is a fixture

from atoll import Sink, Source
from atoll.testkit import TestSink


class Timeout(Exception):
    pass


EX = RuntimeError("ex")


def _failing_at_2(exc):
    def fn(a):
        if a == 2:
            raise exc
        return a

    return fn


def _probe(pred, exc, fmat, *args):
    return Source.from_iterable([1, 2]).map(_failing_at_2(exc)).on_error_complete(*args).run_with(TestSink.probe(), fmat)


def test_complete_with_all_exceptions(fmat):
    p = _probe(None, EX, fmat, BaseException)
    p.request(2).expect_next(1)
    p.expect_complete()


def test_complete_with_dedicated_exception_type(fmat):
    p = _probe(None, ValueError(), fmat, ValueError)
    p.request(2).expect_next(1)
    p.expect_complete()


def test_fail_if_an_unexpected_exception_occurs(fmat):
    p = _probe(None, ValueError("v"), fmat, Timeout)
    p.request(1).expect_next(1)
    p.request(1)
    assert isinstance(p.expect_error(), ValueError)


def _pf(exc):
    if isinstance(exc, ValueError):
        return False
    if isinstance(exc, Timeout):
        return True
    return False  # not defined: the failure goes on


def test_complete_if_the_pf_is_applied(fmat):
    p = _probe(None, Timeout(), fmat, _pf)
    p.request(2).expect_next(1)
    p.expect_complete()


def test_fail_if_the_pf_is_not_applied(fmat):
    p = _probe(None, EX, fmat, _pf)
    p.request(2).expect_next(1)
    assert p.expect_error() is EX


def test_tuple_of_types(fmat):
    p = _probe(None, Timeout(), fmat, (ValueError, Timeout))
    p.request(2).expect_next(1)
    p.expect_complete()


def test_default_completes_on_any_failure(fmat):
    assert Source.failed(TE("x")).on_error_complete().run_with(Sink.seq(), fmat).result(3) == []


def test_raising_predicate_fails_with_its_exception(fmat):
    def pred(exc):
        raise TE("pred")

    with pytest.raises(TE) as info:
        Source.failed(TE("x")).on_error_complete(pred).run_with(Sink.seq(), fmat).result(3)
    assert info.value == TE("pred")


def test_passes_elements_and_completion(fmat):
    assert Source.range(0, 5).on_error_complete().run_with(Sink.seq(), fmat).result(3) == [0, 1, 2, 3, 4]


def test_validation():
    with pytest.raises(TypeError, match="on_error_complete: argument 'pred' must be None"):
        Source.empty().on_error_complete(3)
    with pytest.raises(TypeError, match="on_error_complete"):
        Source.empty().on_error_complete(int)
