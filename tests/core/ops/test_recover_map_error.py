"""recover and map_error: ported from Pekko's FlowRecoverSpec and FlowMapErrorSpec.

Pekko passes partial functions; Atoll passes plain functions. "Not defined for this exception" is
spelled by re-raising the exception given to ``fn``. The failing ``map`` upstream runs fused and
unfused (``fmat``), as both paths must deliver the failure to the error-handling stage.

Added beyond the Pekko specs: the recovered element waits for demand, ``recover`` returning None,
``map_error`` returning something that is not an exception, cancellation passing through, reuse
across materializations and the build-time validation of the arguments.
"""
from __future__ import annotations

import logging

import pytest
from ops_kit import TE, fmat  # noqa: F401

from atoll import Attributes, Flow, Keep, Sink, Source
from atoll.testkit import TestSink, TestSource

ONE = Attributes.input_buffer(1, 1)
EX = TE("ex")
BOOM = TE("BOOM!")


def _failing_at(n):
    def fn(a):
        if a == n:
            raise EX
        return a

    return fn


def _only(exc_type, result):
    """``fn`` for recover/map_error defined for ``exc_type`` only (Pekko's partial function)."""

    def fn(exc):
        if isinstance(exc, exc_type):
            return result
        raise exc

    return fn


def _sink(source, mat):
    return source.add_attributes(ONE).run_with(TestSink.probe(), mat)


# =========================================================================== recover (FlowRecoverSpec)
def test_recover_when_there_is_a_handler(fmat):
    probe = _sink(Source.range(1, 5).map(_failing_at(3)).recover(lambda e: 0), fmat)
    probe.request_next(1)
    probe.request_next(2)
    probe.request_next(0)
    probe.request(1)
    probe.expect_complete()


def test_recover_fails_stream_if_handler_is_not_for_such_exception_type(fmat):
    probe = _sink(Source.range(1, 4).map(_failing_at(2)).recover(_only(IndexError, 0)), fmat)
    probe.request_next(1)
    probe.request(1)
    assert probe.expect_error(EX) is EX


def test_recover_does_not_influence_stream_when_there_is_no_exception(fmat):
    probe = _sink(Source.range(1, 4).map(lambda x: x).recover(lambda e: 0), fmat)
    probe.request(3)
    probe.expect_next_n([1, 2, 3])
    probe.expect_complete()


def test_recover_finishes_stream_if_it_is_empty(mat):
    probe = _sink(Source.empty().recover(lambda e: 0), mat)
    probe.request(1)
    probe.expect_complete()


def test_recover_does_not_log_the_exception_thrown_from_its_handler(mat, caplog):
    ex = IndexError("quite intuitive")

    def handler(e):
        if isinstance(e, RuntimeError):
            raise ex
        return 0

    with caplog.at_level(logging.DEBUG, logger="atoll"):
        probe = _sink(Source.failed(RuntimeError("expected illegal state")).recover(handler), mat)
        assert probe.expect_subscription_and_error(IndexError) is ex
    assert not [r for r in caplog.records if r.exc_info and r.exc_info[1] is ex]


def test_recover_emits_the_recovered_element_only_when_downstream_pulls(mat):
    src, sink = TestSource.probe().recover(lambda e: -1).to_mat(TestSink.probe(), Keep.both).run(mat)
    sink.request(1)
    src.send_next(1)
    sink.expect_next(1)
    src.send_error(TE("up"))
    sink.expect_no_message(0.05)
    sink.request(1)
    sink.expect_next(-1)
    sink.expect_complete()


def test_recover_emits_at_once_when_downstream_is_waiting(mat):
    src, sink = TestSource.probe().recover(lambda e: str(e)).to_mat(TestSink.probe(), Keep.both).run(mat)
    sink.request(2)
    src.send_error(TE("up"))
    sink.expect_next("up")
    sink.expect_complete()


def test_recover_passes_the_original_exception_to_its_handler(mat):
    seen = []

    def handler(e):
        seen.append(e)
        return 0

    ex = TE("seen")
    assert Source.failed(ex).recover(handler).run_with(Sink.seq(), mat).result(3) == [0]
    assert seen[0] is ex


def test_recover_returning_none_fails_with_type_error(mat):
    ex = TE("up")
    fut = Source.failed(ex).recover(lambda e: None).run_with(Sink.seq(), mat)
    with pytest.raises(TypeError, match="recover") as info:
        fut.result(3)
    assert info.value.__cause__ is ex


def test_recover_handler_raising_a_new_exception_fails_the_stream_with_it(mat):
    def handler(e):
        raise BOOM

    probe = _sink(Source.range(1, 4).map(_failing_at(2)).recover(handler), mat)
    probe.request_next(1)
    probe.request(1)
    assert probe.expect_error(BOOM) is BOOM


def test_recover_passes_downstream_cancellation_upstream(mat):
    src, sink = TestSource.probe().recover(lambda e: 0).to_mat(TestSink.probe(), Keep.both).run(mat)
    sink.request(1)
    src.send_next(1)
    sink.expect_next(1)
    sink.cancel()
    src.expect_cancellation()


def test_recover_is_reusable_across_materializations(mat):
    flow = Flow().map(_failing_at(2)).recover(lambda e: 0)
    for _ in range(2):
        assert Source.range(1, 5).via(flow).run_with(Sink.seq(), mat).result(3) == [1, 0]


# =========================================================================== map_error (FlowMapErrorSpec)
def test_map_error_when_there_is_a_handler(fmat):
    probe = _sink(Source.range(1, 5).map(_failing_at(3)).map_error(lambda e: BOOM), fmat)
    probe.request(3)
    probe.expect_next(1)
    probe.expect_next(2)
    assert probe.expect_error(BOOM) is BOOM


def test_map_error_fails_the_stream_with_exception_thrown_in_handler_and_logs_it(fmat, caplog):
    def handler(e):
        raise BOOM

    with caplog.at_level(logging.DEBUG, logger="atoll"):
        probe = _sink(Source.range(1, 4).map(_failing_at(2)).map_error(handler), fmat)
        probe.request_next(1)
        probe.request(1)
        assert probe.expect_error(BOOM) is BOOM
    assert [r for r in caplog.records if r.exc_info and r.exc_info[1] is BOOM]


def test_map_error_passes_through_the_original_exception_if_handler_does_not_handle_it(fmat):
    probe = _sink(Source.range(1, 4).map(_failing_at(2)).map_error(_only(IndexError, BOOM)), fmat)
    probe.request_next(1)
    probe.request(1)
    assert probe.expect_error(EX) is EX


def test_map_error_does_not_influence_stream_when_there_is_no_exception(fmat):
    probe = _sink(Source.range(1, 4).map(lambda x: x).map_error(lambda e: BOOM), fmat)
    probe.request(3)
    probe.expect_next_n([1, 2, 3])
    probe.expect_complete()


def test_map_error_finishes_stream_if_it_is_empty(mat):
    probe = _sink(Source.empty().map_error(lambda e: BOOM), mat)
    probe.request(1)
    probe.expect_complete()


def test_map_error_returning_a_non_exception_fails_with_type_error(mat):
    ex = TE("up")
    fut = Source.failed(ex).map_error(lambda e: "not an exception").run_with(Sink.seq(), mat)
    with pytest.raises(TypeError, match="map_error") as info:
        fut.result(3)
    assert info.value.__cause__ is ex


def test_map_error_does_not_cancel_the_failed_upstream(mat):
    # the mapped failure goes downstream; upstream failed already, so nothing is cancelled
    src, sink = TestSource.probe().map_error(lambda e: BOOM).to_mat(TestSink.probe(), Keep.both).run(mat)
    sink.request(1)
    src.send_next(1)
    sink.expect_next(1)
    src.send_error(TE("up"))
    assert sink.expect_error(BOOM) is BOOM
    src.expect_no_message(0.05)


def test_map_error_passes_downstream_cancellation_upstream(mat):
    src, sink = TestSource.probe().map_error(lambda e: BOOM).to_mat(TestSink.probe(), Keep.both).run(mat)
    sink.cancel()
    src.expect_cancellation()


# =========================================================================== build-time validation
@pytest.mark.parametrize("fn", [None, 0, "x"])
def test_recover_rejects_a_non_callable(fn):
    with pytest.raises(TypeError, match="recover.*fn"):
        Source.single(1).recover(fn)


@pytest.mark.parametrize("fn", [None, 0, BOOM])
def test_map_error_rejects_a_non_callable(fn):
    with pytest.raises(TypeError, match="map_error.*fn"):
        Flow().map_error(fn)
