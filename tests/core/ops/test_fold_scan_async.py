"""fold_async and scan_async: ported from Pekko's FlowFoldAsyncSpec and FlowScanAsyncSpec.

Pekko's ``Future { ... }`` bodies become ``async def`` functions or already completed futures; where the
order of a completion against upstream's completion matters, the test completes a ``Future`` itself.
Not ported: ``Sink.foldAsync``/``runFoldAsync`` (Atoll has no ``Sink.fold_async``), "work with slow
futures" (a timing case; "pending futures resolved" cases cover the waiting).
"""
from __future__ import annotations

import pytest
from ops_kit import TE, fmat  # noqa: F401
from test_map_async_kit import Calls, done, failed

from atoll import Attributes, Flow, Keep, Sink, Source, Supervision
from atoll.errors import PortStateError
from atoll.testkit import TestSink, TestSource

RESUME = Attributes.supervision_strategy(Supervision.resuming_decider)
RESTART = Attributes.supervision_strategy(Supervision.restarting_decider)


async def _add(a, b):
    return a + b


# =========================================================================== FlowFoldAsyncSpec
def test_fold_work_when_using_source_fold_async(fmat):
    assert Source.range(1, 101).fold_async(0, _add).run_with(Sink.head(), fmat).result(3) == 5050


def test_fold_work_when_chained(fmat):
    flow = Flow().fold_async(0, lambda a, b: done(a + b))
    out = Source.range(1, 101).fold_async(0, _add).via(flow).run_with(Sink.head(), fmat).result(3)
    assert out == 5050


def test_fold_propagate_an_error(fmat):
    def boom(x):
        if x > 50:
            raise TE("Boom!")
        return x

    fut = Source.range(1, 101).map(boom).fold_async(0, _add).run_with(Sink.head(), fmat)
    with pytest.raises(TE, match="Boom!"):
        fut.result(3)


def test_fold_complete_future_with_failure_when_folding_function_fails(fmat):
    fut = Source.range(1, 101).fold_async(0, lambda x, y: failed(TE("Boom!")) if x > 50 else done(x + y)) \
        .run_with(Sink.head(), fmat)
    with pytest.raises(TE, match="Boom!"):
        fut.result(3)


def test_fold_not_blow_up_with_high_request_counts(fmat):
    probe = Source.from_iterator(lambda: iter(range(1, 10001))).fold_async(1, _add).run_with(TestSink.probe(), fmat)
    probe.request(2**31 - 1)
    probe.expect_next(50005001)
    probe.expect_complete()


def test_fold_signal_future_failure(fmat):
    async def fn(_, n):
        if n == 3:
            raise TE("err1")
        return n

    probe = Source.range(1, 6).fold_async(0, fn).run_with(TestSink.probe(), fmat)
    probe.request(10)
    assert probe.expect_error() == TE("err1")


def test_fold_signal_error_from_fold_async(fmat):
    def fn(_, n):
        if n == 3:
            raise TE("err2")
        return done(n + 1)

    probe = Source.range(1, 6).fold_async(0, fn).run_with(TestSink.probe(), fmat)
    probe.request(10)
    assert probe.expect_error() == TE("err2")


async def _pair_step(acc, n):
    i, res = acc
    if n == 3:
        raise TE("err3")
    return (n, i + res * n)


def _pair_step_throwing(acc, n):
    i, res = acc
    if n == 3:
        raise TE("err4")
    return done((n, i + res * n))


@pytest.mark.parametrize("fn", [_pair_step, _pair_step_throwing], ids=["future failure", "fold_async throws"])
@pytest.mark.parametrize("attrs,expected", [(RESUME, (5, 74)), (RESTART, (5, 24))], ids=["resume", "restart"])
def test_fold_supervision(fmat, fn, attrs, expected):
    probe = Source.range(1, 6).fold_async((0, 1), fn).with_attributes(attrs).run_with(TestSink.probe(), fmat)
    probe.request(10)
    probe.expect_next(expected)
    probe.expect_complete()


def test_fold_resume_after_multiple_failures(fmat):
    futures = [failed(TE(f"failure{i}")) for i in range(1, 6)] + [done("happy!")]
    fut = Source.from_iterable(futures).fold_async("", lambda _, f: f).with_attributes(RESUME).run_with(Sink.head(), fmat)
    assert fut.result(3) == "happy!"


def test_fold_finish_after_future_failure(fmat):
    async def fn(_, n):
        if n == 3:
            raise TE("err3b")
        return n

    fut = Source.range(1, 4).fold_async(1, fn).with_attributes(RESUME).grouped(10).run_with(Sink.head(), fmat)
    assert fut.result(3) == [2]


def test_fold_signal_error_when_future_is_completed_with_none(fmat):
    probe = Source.from_iterable(["a", "b"]).fold_async("", lambda _a, _b: done(None)).run_with(TestSink.probe(), fmat)
    probe.request(10)
    err = probe.expect_error()
    assert isinstance(err, PortStateError) and "must not be None" in str(err)


@pytest.mark.parametrize("attrs,expected", [(RESUME, "ac"), (RESTART, "c")], ids=["resume", "restart"])
def test_fold_supervise_a_future_completed_with_none(fmat, attrs, expected):
    def fn(acc, elem):
        return done(None) if elem == "b" else done(acc + elem)

    probe = Source.from_iterable("abc").fold_async("", fn).with_attributes(attrs).run_with(TestSink.probe(), fmat)
    probe.request(10)
    probe.expect_next(expected)
    probe.expect_complete()


def test_fold_handle_cancel_properly(fmat):
    src, sink = TestSource.probe().fold_async(0, lambda _, n: done(n)).to_mat(TestSink.probe(), Keep.both).run(fmat)
    src.expect_request()
    sink.cancel()
    src.expect_cancellation()


def test_fold_return_zero_given_an_empty_stream(fmat):
    assert Source.from_iterator(lambda: iter(())).fold_async(0, _add).run_with(Sink.head(), fmat).result(3) == 0


def test_fold_return_zero_plus_item_given_a_stream_of_one_item(fmat):
    assert Source.single(100).fold_async(5, _add).run_with(Sink.head(), fmat).result(3) == 105


def test_fold_waits_for_the_result_in_flight_when_upstream_completes(fmat):
    calls = Calls(key=lambda acc, n: n)
    src, sink = TestSource.probe().fold_async(0, calls).to_mat(TestSink.probe(), Keep.both).run(fmat)
    sink.request(1)
    src.send_next(1)
    calls.wait_for(1)
    calls.complete(1, 1)
    src.send_next(2)
    calls.wait_for(2)
    src.send_complete()
    sink.expect_no_message(0.05)
    calls.complete(2, 3)
    sink.expect_next(3)
    sink.expect_complete()


def test_fold_validation():
    with pytest.raises(TypeError, match="fold_async: argument 'fn' must be callable"):
        Flow().fold_async(0, None)
    with pytest.raises(ValueError, match="fold_async: argument 'zero' must not be None"):
        Flow().fold_async(None, _add)


# =========================================================================== FlowScanAsyncSpec
SUM_SCAN = Flow().scan_async(0, _add)


def test_scan_work_with_an_empty_source(fmat):
    probe = Source.empty().via(SUM_SCAN).run_with(TestSink.probe(), fmat)
    probe.request(1)
    assert probe.expect_next_or_complete() == 0


def test_scan_complete_after_zero_element_has_been_consumed(fmat):
    pub, sub = TestSource.probe().scan_async(0, lambda acc, x: done(acc + x)).to_mat(TestSink.probe(), Keep.both).run(fmat)
    sub.request(10)
    sub.expect_next(0)
    pub.send_complete()
    sub.expect_complete()


def test_scan_complete_after_stream_has_been_consumed_and_pending_futures_resolved(fmat):
    pub, sub = TestSource.probe().scan_async(0, lambda acc, x: done(acc + x)).to_mat(TestSink.probe(), Keep.both).run(fmat)
    pub.send_next(1)
    sub.request(10)
    sub.expect_next(0)
    sub.expect_next(1)
    pub.send_complete()
    sub.expect_complete()


def test_scan_fail_after_zero_element_has_been_consumed(fmat):
    pub, sub = TestSource.probe().scan_async(0, lambda acc, x: done(acc + x)).to_mat(TestSink.probe(), Keep.both).run(fmat)
    sub.request(10)
    sub.expect_next(0)
    pub.send_error(TE("bang"))
    assert sub.expect_error() == TE("bang")


def test_scan_work_with_a_single_source(fmat):
    probe = Source.single(1).via(SUM_SCAN).run_with(TestSink.probe(), fmat)
    probe.request(2)
    probe.expect_next(0, 1)
    probe.expect_complete()


def test_scan_work_with_a_large_source(fmat):
    assert Source.range(1, 10001).via(SUM_SCAN).run_with(Sink.last(), fmat).result(10) == sum(range(1, 10001))


def test_scan_throw_error_with_a_failed_source(fmat):
    probe = Source.failed(TE("failed source")).via(SUM_SCAN).run_with(TestSink.probe(), fmat)
    probe.request(2)
    first = probe.expect_next_or_error()
    if first == 0:
        assert probe.expect_error() == TE("failed source")
    else:
        assert first == TE("failed source")


def _failed_scan(acc, nxt):
    if nxt >= 0:
        return _add(acc, nxt)
    raise TE("non fatal exception")


def _failed_future(acc, nxt):
    if nxt >= 0:
        return _add(acc, nxt)
    return failed(TE("non fatal exception"))


def _scan(fn, attrs, mat, elements=(1, -1, 1)):
    probe = Source.from_iterable(list(elements)).scan_async(0, fn).with_attributes(attrs).run_with(TestSink.probe(), mat)
    probe.request(len(elements) + 1)
    probe.expect_next(0)
    return probe


@pytest.mark.parametrize("fn", [_failed_scan, _failed_future], ids=["failed scan", "failed future"])
@pytest.mark.parametrize("attrs,expected", [(RESTART, (1, 1)), (RESUME, (1, 2))], ids=["restart", "resume"])
def test_scan_supervision_skips_error_values(fmat, fn, attrs, expected):
    _scan(fn, attrs, fmat).expect_next(*expected).expect_complete()


@pytest.mark.parametrize("attrs", [RESTART, RESUME], ids=["restart", "resume"])
@pytest.mark.parametrize("completion_first", [False, True], ids=["after future resolved", "before future resolved"])
def test_scan_skip_error_values_and_handle_stage_completion(fmat, attrs, completion_first):
    promises = [done(1), Calls()]
    pending = promises[1]

    def fn(_acc, nxt):
        return promises[0] if nxt == 0 else pending(nxt)

    pub, sub = TestSource.probe().scan_async(0, fn).with_attributes(attrs).to_mat(TestSink.probe(), Keep.both).run(fmat)
    sub.request(3)
    pub.send_next(0)
    sub.expect_next(0, 1)
    pub.send_next(1)
    pending.wait_for(1)
    if completion_first:
        pub.send_complete()
        pending.fail(1, TE("bang"))
    else:
        pending.fail(1, TE("bang"))
        pub.send_complete()
    sub.expect_complete()


@pytest.mark.parametrize("fn", [_failed_scan, _failed_future], ids=["failed scan function", "failed future"])
def test_scan_stopping_decider_throws_error(fmat, fn):
    probe = _scan(fn, Attributes.supervision_strategy(Supervision.stopping_decider), fmat, elements=(-1,))
    assert probe.expect_error() == TE("non fatal exception")


def test_scan_stopping_decider_throws_error_with_a_none_element(fmat):
    probe = Source.from_iterable(["null"]).scan_async("", lambda _a, _b: done(None)).run_with(TestSink.probe(), fmat)
    probe.request(2)
    probe.expect_next("")
    err = probe.expect_error()
    assert isinstance(err, PortStateError) and "must not be None" in str(err)


def test_scan_zero_waits_for_demand_after_upstream_completed(fmat):
    pub, sub = TestSource.probe().scan_async(7, _add).to_mat(TestSink.probe(), Keep.both).run(fmat)
    pub.send_complete()
    sub.expect_no_message(0.05)
    sub.request(1)
    sub.expect_next(7)
    sub.expect_complete()


def test_scan_validation():
    with pytest.raises(TypeError, match="scan_async: argument 'fn' must be callable"):
        Flow().scan_async(0, "x")
    with pytest.raises(ValueError, match="scan_async: argument 'zero' must not be None"):
        Flow().scan_async(None, _add)


def test_scan_a_signal_waits_for_the_result_in_flight(fmat):
    calls = Calls(key=lambda acc, n: n)
    pub, sub = TestSource.probe().scan_async(0, calls).to_mat(TestSink.probe(signals=True), Keep.both).run(fmat)
    sub.request(10)
    sub.expect_next(0)
    pub.send_next(1)
    calls.wait_for(1)
    pub.send_watermark(9)
    sub.expect_no_message(0.1)
    calls.complete(1, 1)
    sub.expect_next(1)
    sub.expect_watermark(9)
    pub.send_complete()
    sub.expect_complete()
