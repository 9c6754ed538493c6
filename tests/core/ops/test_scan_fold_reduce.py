"""scan, fold and reduce: ported from Pekko's FlowScanSpec, FlowFoldSpec and FlowReduceSpec (the
Flow/Source operator parts; the Sink.fold/Sink.reduce cases are kept because the specs compose them
with the operators)."""
from __future__ import annotations

import itertools
import operator
import random

import pytest
from ops_kit import TE

from atoll import Attributes, Flow, Keep, NotUsed, Sink, Source, Supervision
from atoll.errors import NoSuchElementError
from atoll.testkit import TestSink, TestSource

RESUME = Attributes.supervision_strategy(Supervision.resuming_decider)
RESTART = Attributes.supervision_strategy(Supervision.restarting_decider)
add = operator.add


# =========================================================================== scan
def _scan(src, mat):
    return src.scan(0, add).run_fold([], lambda acc, x: acc + [x], mat).result(3)


def test_scan(mat):
    rng = random.Random(7)
    v = [rng.randint(-(2**31), 2**31 - 1) for _ in range(rng.randint(100, 999))]
    assert _scan(Source.from_iterable(v), mat) == list(itertools.accumulate(v, initial=0))


def test_scan_empty_failed(mat):
    e = TE("fail!")
    with pytest.raises(TE) as info:
        _scan(Source.failed(e), mat)
    assert info.value is e


def test_scan_empty(mat):
    assert _scan(Source.empty(), mat) == [0]


def test_scan_emits_values_promptly(mat):
    src, fut = TestSource.probe().scan(0, add).take(2).to_mat(Sink.seq(), Keep.both).run(mat)
    src.send_next(1)  # upstream never completes: take(2) ends the stream
    assert fut.result(3) == [0, 1]
    src.expect_cancellation()


def _positive_sum(old, current):
    if current <= 0:
        raise ValueError("requirement failed")
    return old + current


def test_scan_restarts_properly(mat):
    scan = Flow().scan(0, _positive_sum).with_attributes(RESTART)
    probe = Source.from_iterable([1, 3, -1, 5, 7]).via(scan).run_with(TestSink.probe(), mat)
    assert probe.to_strict(3) == [0, 1, 4, 0, 5, 12]


def test_scan_resumes_properly(mat):
    scan = Flow().scan(0, _positive_sum).with_attributes(RESUME)
    probe = Source.from_iterable([1, 3, -1, 5, 7]).via(scan).run_with(TestSink.probe(), mat)
    assert probe.to_strict(3) == [0, 1, 4, 9, 16]


def test_scan_fails_with_the_exception_of_fn_by_default(mat):
    probe = Source.from_iterable([1, 3, -1, 5, 7]).scan(0, _positive_sum).run_with(TestSink.probe(), mat)
    probe.request(10)
    probe.expect_next(0, 1, 4)
    probe.expect_error(ValueError)


def test_scan_normally_for_empty_source(mat):
    probe = Source.empty().scan(0, add).run_with(TestSink.probe(), mat)
    probe.request(2)
    probe.expect_next(0)
    probe.expect_complete()


def test_scan_fails_when_upstream_failed(mat):
    ex = TE("")
    probe = Source.failed(ex).scan(0, add).run_with(TestSink.probe(), mat)
    probe.request(2)
    first = probe.expect_next_or_error()  # Pekko allows either: zero first, or the failure right away
    if first == 0:
        probe.expect_error(ex)
    else:
        assert first == ex


def test_scan_emits_zero_on_the_first_pull_before_any_element(mat):
    src, sink = TestSource.probe().scan(10, add).to_mat(TestSink.probe(), Keep.both).run(mat)
    sink.request(1)
    sink.expect_next(10)
    sink.expect_no_message(0.05)
    sink.request(2)
    src.send_next(1)
    sink.expect_next(11)
    src.send_next(2)
    sink.expect_next(13)
    src.send_complete()
    sink.expect_complete()


def test_scan_flushes_zero_when_upstream_completes_before_demand(mat):
    src, sink = TestSource.probe().scan(0, add).to_mat(TestSink.probe(), Keep.both).run(mat)
    src.send_complete()
    sink.expect_subscription()
    sink.expect_no_message(0.05)
    sink.request(1)
    sink.expect_next(0)
    sink.expect_complete()


def test_scan_rejects_bad_arguments_at_build_time():
    with pytest.raises(TypeError, match=r"scan: argument 'fn' must be callable"):
        Flow().scan(0, 0)
    with pytest.raises(ValueError, match=r"scan: argument 'zero' must not be None"):
        Flow().scan(None, add)


# =========================================================================== fold
INPUT = range(1, 101)
EXPECTED = sum(INPUT)


def _input():
    return Source.from_iterable(INPUT)


def test_fold_works_when_using_source_run_fold(mat):
    assert _input().run_fold(0, add, mat).result(3) == EXPECTED


def test_fold_works_when_using_source_fold(mat):
    assert _input().fold(0, add).run_with(Sink.head(), mat).result(3) == EXPECTED


def test_fold_works_when_using_sink_fold(mat):
    assert _input().run_with(Sink.fold(0, add), mat).result(3) == EXPECTED


def test_fold_works_when_using_flow_fold(mat):
    assert _input().via(Flow().fold(0, add)).run_with(Sink.head(), mat).result(3) == EXPECTED


def test_fold_works_when_using_source_fold_flow_fold_and_sink_fold(mat):
    out = _input().fold(0, add).via(Flow().fold(0, add)).run_with(Sink.fold(0, add), mat).result(3)
    assert out == EXPECTED


def _fail_above_50(x):
    if x > 50:
        raise TE("Boom!")
    return x


def test_fold_propagates_an_error(mat):
    fut = _input().map(_fail_above_50).run_fold(NotUsed, Keep.none, mat)
    with pytest.raises(TE, match="Boom!"):
        fut.result(3)


def test_flow_fold_propagates_an_error(mat):
    fut = _input().map(_fail_above_50).fold(0, add).run_with(Sink.head(), mat)
    with pytest.raises(TE, match="Boom!"):
        fut.result(3)


def _boom_when_acc_above_50(x, y):
    if x > 50:
        raise TE("Boom!")
    return x + y


def test_fold_fails_when_the_function_throws_and_supervision_stops(mat):
    with pytest.raises(TE, match="Boom!"):
        _input().run_fold(0, _boom_when_acc_above_50, mat).result(3)


def test_flow_fold_fails_when_the_function_throws_and_supervision_stops(mat):
    with pytest.raises(TE, match="Boom!"):
        _input().fold(0, _boom_when_acc_above_50).run_with(Sink.head(), mat).result(3)


def _boom_on_50(x, y):
    if y == 50:
        raise TE("Boom!")
    return x + y


def test_sink_fold_resumes_with_the_accumulated_state(mat):
    fold = Sink.fold(0, _boom_on_50).with_attributes(RESUME)
    assert _input().run_with(fold, mat).result(3) == EXPECTED - 50


def test_sink_fold_restarts_with_zero(mat):
    fold = Sink.fold(0, _boom_on_50).with_attributes(RESTART)
    assert _input().run_with(fold, mat).result(3) == sum(range(51, 101))


def test_flow_fold_resumes_with_the_accumulated_state(mat):
    fold = Flow().fold(0, _boom_on_50).with_attributes(RESUME)
    assert _input().via(fold).run_with(Sink.head(), mat).result(3) == EXPECTED - 50


def test_flow_fold_restarts_with_zero(mat):
    fold = Flow().fold(0, _boom_on_50).with_attributes(RESTART)
    assert _input().via(fold).run_with(Sink.head(), mat).result(3) == sum(range(51, 101))


def test_fold_completes_with_zero_given_an_empty_stream(mat):
    assert Source.from_iterator(lambda: iter(())).run_fold(0, add, mat).result(3) == 0
    assert Source.empty().fold(0, add).run_with(Sink.seq(), mat).result(3) == [0]


def test_flow_fold_emits_once_upstream_completes_and_downstream_pulls(mat):
    src, sink = TestSource.probe().fold(0, add).to_mat(TestSink.probe(), Keep.both).run(mat)
    src.send_next_many(1, 2, 3)  # buffered at the input until downstream asks
    src.send_complete()
    sink.expect_subscription()
    sink.expect_no_message(0.05)
    sink.request(1)
    sink.expect_next(6)
    sink.expect_complete()


def test_flow_fold_rejects_bad_arguments_at_build_time():
    with pytest.raises(TypeError, match=r"fold: argument 'fn' must be callable"):
        Flow().fold(0, "add")
    with pytest.raises(ValueError, match=r"fold: argument 'zero' must not be None"):
        Flow().fold(None, add)


# =========================================================================== reduce
def _reduce_input():
    return Source.from_iterable(INPUT).filter(lambda _: True).map(lambda x: x)


def _reduce_source():
    return _reduce_input().reduce(add).filter(lambda _: True).map(lambda x: x)


def _reduce_flow():
    return Flow().filter(lambda _: True).map(lambda x: x).reduce(add).filter(lambda _: True).map(lambda x: x)


def test_reduce_works_when_using_sink_reduce(mat):  # Pekko: "Source.runReduce" and "Sink.reduce"
    assert _reduce_input().run_with(Sink.reduce(add), mat).result(3) == EXPECTED


def test_reduce_works_when_using_source_reduce(mat):
    assert _reduce_source().run_with(Sink.head(), mat).result(3) == EXPECTED


def test_reduce_works_when_using_flow_reduce(mat):
    assert _reduce_input().via(_reduce_flow()).run_with(Sink.head(), mat).result(3) == EXPECTED


def test_reduce_works_when_using_source_reduce_flow_reduce_and_sink_reduce(mat):
    assert _reduce_source().via(_reduce_flow()).run_with(Sink.reduce(add), mat).result(3) == EXPECTED


def test_reduce_propagates_an_error(mat):
    fut = _reduce_input().map(_fail_above_50).run_with(Sink.reduce(Keep.none), mat)
    with pytest.raises(TE, match="Boom!"):
        fut.result(3)


def test_flow_reduce_propagates_an_error(mat):
    fut = _reduce_input().map(_fail_above_50).reduce(add).run_with(Sink.head(), mat)
    with pytest.raises(TE, match="Boom!"):
        fut.result(3)


def test_reduce_fails_when_the_function_throws_and_supervision_stops(mat):
    with pytest.raises(TE, match="Boom!"):
        _reduce_input().run_with(Sink.reduce(_boom_when_acc_above_50), mat).result(3)
    with pytest.raises(TE, match="Boom!"):
        _reduce_input().reduce(_boom_when_acc_above_50).run_with(Sink.head(), mat).result(3)


def test_sink_reduce_resumes_with_the_accumulated_state(mat):
    reduce = Sink.reduce(_boom_on_50).with_attributes(RESUME)
    assert _reduce_input().run_with(reduce, mat).result(3) == EXPECTED - 50


def test_sink_reduce_restarts_and_forgets_the_accumulator(mat):
    reduce = Sink.reduce(_boom_on_50).with_attributes(RESTART)
    assert _reduce_input().run_with(reduce, mat).result(3) == sum(range(51, 101))


def test_flow_reduce_resumes_with_the_accumulated_state(mat):
    reduce = Flow().reduce(_boom_on_50).with_attributes(RESUME)
    assert _reduce_input().via(reduce).run_with(Sink.head(), mat).result(3) == EXPECTED - 50


def test_flow_reduce_restarts_and_forgets_the_accumulator(mat):
    reduce = Flow().reduce(_boom_on_50).with_attributes(RESTART)
    assert _reduce_input().via(reduce).run_with(Sink.head(), mat).result(3) == sum(range(51, 101))


def test_reduce_fails_on_empty_stream_using_sink_reduce(mat):  # Pekko: "Source.runReduce" and "Sink.reduce"
    with pytest.raises(NoSuchElementError, match="empty stream"):
        Source.empty().run_with(Sink.reduce(add), mat).result(3)


def test_reduce_fails_on_empty_stream_using_flow_reduce(mat):
    with pytest.raises(NoSuchElementError, match="empty stream"):
        Source.empty().via(_reduce_flow()).run_with(Sink.fold(0, add), mat).result(3)


def test_flow_reduce_of_a_single_element_emits_it(mat):
    assert Source.single(7).reduce(add).run_with(Sink.seq(), mat).result(3) == [7]


def test_flow_reduce_rejects_a_non_callable_at_build_time():
    with pytest.raises(TypeError, match=r"reduce: argument 'fn' must be callable"):
        Flow().reduce(3)
