"""map_async_partitioned and map_async_partitioned_unordered: ported from Pekko's FlowMapAsyncPartitionedSpec.

Promises become futures the test completes (``Calls``); Pekko's random completion orders are seeded.
Cases whose upstream blocks a thread use a publisher probe that sends nothing more. "not run more
futures than allowed" runs coroutines that count the calls in flight overall and per partition.
"""
from __future__ import annotations

import asyncio
import logging
import random
import threading

import pytest
from ops_kit import TE, fmat  # noqa: F401
from test_map_async_kit import Calls, done, failed

from atoll import Attributes, Flow, Keep, Sink, Source, Supervision
from atoll.testkit import TestSink, TestSource

RESUME = Attributes.supervision_strategy(Supervision.resuming_decider)
KINDS = ["ordered", "unordered"]


def _part(src, kind, parallelism, partitioner, fn):
    if kind == "ordered":
        return src.map_async_partitioned(parallelism, partitioner, fn)
    return src.map_async_partitioned_unordered(parallelism, partitioner, fn)


def test_produce_future_elements(fmat):
    async def fn(elem, _p):
        return elem

    c = Source.range(1, 4).map_async_partitioned(4, lambda x: x % 2, fn).run_with(TestSink.probe(), fmat)
    c.request(2)
    c.expect_next(1)
    c.expect_next(2)
    c.expect_no_message(0.1)
    c.request(2)
    c.expect_next(3)
    c.expect_complete()


@pytest.mark.parametrize("seed", [1, 2])
def test_produce_elements_in_order_of_ingestion_regardless_of_future_completion_order(fmat, seed):
    rng = random.Random(seed)
    calls = Calls()
    c = Source.range(0, 50).map_async_partitioned(25, lambda x: x % 7, calls).run_with(TestSink.probe(), fmat)
    c.request(1000)
    left = set(range(50))
    while left:
        # the calls made so far and not completed: complete one of them at random
        started = set(calls.wait_for(min(left))) & left
        n = rng.choice(sorted(started))
        calls.complete(n)
        left.discard(n)
    for i in range(50):
        c.expect_next(i)
    c.expect_complete()


@pytest.mark.parametrize("kind", KINDS)
def test_emit_completed_elements_after_downstream_demand_resumes(fmat, kind):
    calls = Calls()
    downstream = _part(Source.range(0, 4), kind, 3, lambda x: x, calls).run_with(TestSink.probe(), fmat)
    downstream.request(1)
    assert calls.wait_for(0, 1, 2) == [0, 1, 2]
    calls.complete(0)
    downstream.expect_next(0)
    assert calls.wait_for(3) == [0, 1, 2, 3]
    for n in (1, 2, 3):
        calls.complete(n)
    downstream.expect_no_message(0.1)
    downstream.request(3)
    remaining = downstream.expect_next_n(3)
    assert (remaining if kind == "ordered" else sorted(remaining)) == [1, 2, 3]
    downstream.expect_complete()


def test_not_run_more_futures_than_overall_parallelism(fmat):
    p = 3
    seen = Calls()

    def fn(elem, _part):
        seen(elem)
        return done(elem)

    c = Source.range(1, 23).map_async_partitioned(p, lambda x: x % 22, fn).run_with(TestSink.probe(), fmat)
    c.ensure_subscription()
    seen.expect_no_call(0.1)
    c.request(1)
    assert sorted(seen.wait_for(*range(1, p + 2))) == list(range(1, p + 2))
    seen.expect_no_call(0.1)
    c.request(2)
    assert sorted(seen.wait_for(p + 2, p + 3)) == list(range(1, p + 4))
    seen.expect_no_call(0.1)
    c.request(10)
    assert sorted(seen.wait_for(*range(p + 4, p + 14))) == list(range(1, p + 14))
    seen.expect_no_call(0.1)
    c.cancel()


def test_not_backpressure_when_partition_slots_are_busy(fmat):
    calls = Calls()
    src, result = TestSource.probe().map_async_partitioned(10, lambda n: n < 9, calls) \
        .to_mat(Sink.seq(), Keep.both).run(fmat)
    for n in range(0, 11):
        src.send_next(n)  # all go into the stage right away
    assert calls.wait_for(0, 9) == [0, 9]  # one in flight per partition
    calls.expect_no_call(0.05)
    calls.complete(0)
    for n in range(1, 9):
        calls.wait_for(n)
        calls.complete(n)
    calls.complete(9)
    calls.wait_for(10)
    calls.complete(10)
    src.send_complete()
    assert result.result(3) == list(range(0, 11))


@pytest.mark.parametrize("kind", KINDS)
def test_signal_future_already_failed(fmat, kind):
    calls = Calls()

    def fn(elem, _p):
        return failed(TE("BOOM TRES!")) if elem == 3 else calls(elem)

    c = _part(Source.range(1, 6), kind, 4, lambda x: x % 3, fn).run_with(TestSink.probe(), fmat)
    c.request(10)
    assert c.expect_error() == TE("BOOM TRES!")


@pytest.mark.parametrize("kind", KINDS)
def test_signal_future_failure(fmat, kind):
    calls = Calls()
    c = _part(Source.range(1, 6), kind, 4, lambda x: x % 3, calls).run_with(TestSink.probe(), fmat)
    c.request(10)
    calls.wait_for(1, 2, 3)
    calls.fail(3, TE("BOOM TROIS!"))
    assert c.expect_error() == TE("BOOM TROIS!")


@pytest.mark.parametrize("kind", KINDS)
def test_signal_future_failure_asap(fmat, kind):
    fn = lambda e, _p: failed(TE("BOOM EIN!")) if e == 1 else done(e)  # noqa: E731
    src, fut = _part(TestSource.probe(), kind, 4, lambda x: x % 3, fn).to_mat(Sink.ignore(), Keep.both).run(fmat)
    src.send_next(1)
    with pytest.raises(TE, match="BOOM EIN!"):
        fut.result(3)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fail_asap_midstream(fmat, seed):
    calls = Calls()
    probe = Source.range(0, 6).map_async_partitioned(5, lambda x: x % 7, calls) \
        .map(lambda n: chr(ord("A") + n)).run_with(TestSink.probe(), fmat)
    probe.request(100)
    failure = TE("BOOM två")
    calls.wait_for(0, 1, 2, 3, 4)
    order = list(range(5))
    random.Random(seed).shuffle(order)
    for n in order:
        if n == 2:
            calls.fail(n, failure)
        else:
            calls.complete(n)
    got = []
    while True:
        ev = probe.expect_next_or_error()
        if isinstance(ev, BaseException):
            assert ev == failure
            break
        got.append(ev)
    assert got == ["A", "B"][: len(got)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_drop_failed_elements_midstream_when_resume_supervision_is_in_place(fmat, seed):
    calls = Calls()
    elements = Source.range(0, 6).map_async_partitioned(5, lambda x: x % 7, calls) \
        .with_attributes(RESUME).map(lambda n: chr(ord("A") + n)).run_with(Sink.seq(), fmat)
    calls.wait_for(0, 1, 2, 3, 4)
    order = list(range(5))
    random.Random(seed).shuffle(order)
    for n in order:
        if n == 2:
            calls.fail(n, TE("BOOM TWEE!"))
        else:
            calls.complete(n)
    calls.wait_for(5)
    calls.complete(5)
    assert "".join(elements.result(3)) == "ABDEF"


@pytest.mark.parametrize("kind", KINDS)
def test_signal_error_when_constructing_future(fmat, kind):
    calls = Calls()

    def fn(elem, _p):
        if elem == 3:
            raise TE("BOOM TRE!")
        return calls(elem)

    c = _part(Source.range(1, 6), kind, 4, lambda x: x, fn).run_with(TestSink.probe(), fmat)
    c.request(10)
    assert c.expect_error() == TE("BOOM TRE!")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("already", [False, True], ids=["failed future", "already failed future"])
def test_resume_after_failed_future(fmat, kind, already):
    async def fn(elem, _p):
        if elem == 3:
            raise TE("BOOM TRZY!")
        return elem

    def fn_done(elem, _p):
        return failed(TE("BOOM TRI!")) if elem == 3 else done(elem)

    out = _part(Source.range(1, 6), kind, 4, lambda x: x % 2, fn_done if already else fn) \
        .with_attributes(RESUME).run_with(Sink.seq(), fmat).result(3)
    assert (out if kind == "ordered" else sorted(out)) == [1, 2, 4, 5]


@pytest.mark.parametrize("kind", KINDS)
def test_resume_after_multiple_failures(fmat, kind):
    async def fn(elem, _p):
        if elem % 4 < 3:
            raise TE("BOOM!")
        return elem

    out = _part(Source.range(1, 11), kind, 4, lambda x: x % 3, fn).with_attributes(RESUME).run_with(Sink.seq(), fmat)
    got = out.result(3)
    assert (got if kind == "ordered" else sorted(got)) == [n for n in range(1, 11) if n % 4 == 3]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", [1, 2])
def test_ignore_none_completed_futures(fmat, kind, seed):
    rng = random.Random(seed)
    should_be_none = {rng.randint(1, 10) for _ in range(rng.randint(1, 10))}
    out = _part(Source.range(1, 11), kind, 5, lambda x: x % 2,
                lambda e, _p: done(None if e in should_be_none else str(e))).run_with(Sink.seq(), fmat).result(3)
    expected = [str(n) for n in range(1, 11) if n not in should_be_none]
    assert (out if kind == "ordered" else sorted(out, key=int)) == expected


@pytest.mark.parametrize("kind", KINDS)
def test_handle_cancel_properly(fmat, kind):
    src, sink = _part(TestSource.probe(), kind, 4, lambda x: x % 2, lambda e, _p: done(e)) \
        .to_mat(TestSink.probe(), Keep.both).run(fmat)
    src.expect_request()
    sink.cancel()
    src.expect_cancellation()


@pytest.mark.parametrize("kind", KINDS)
def test_not_run_more_futures_than_allowed(fmat, kind):
    max_parallelism = 8
    num_partitions = max_parallelism + 1
    lock = threading.Lock()
    state = {"global": 0, "max": 0, "parts": [0] * num_partitions}

    def fn(elem, part):
        with lock:
            state["global"] += 1
            state["parts"][part] += 1
            state["max"] = max(state["max"], state["global"])
            if state["global"] > max_parallelism:
                return failed(TE("global parallelism exceeded"))
            if state["parts"][part] > 1:
                return failed(TE(f"partition parallelism for partition {part} exceeded"))

        async def deferred():
            await asyncio.sleep(0)
            with lock:
                state["global"] -= 1
                state["parts"][part] -= 1
            return elem

        return deferred()

    n = 2000
    out = _part(Source.range(0, n), kind, max_parallelism, lambda x: x % num_partitions, fn) \
        .run_fold(0, lambda c, _: c + 1, fmat)
    assert out.result(10) == n
    assert state["max"] <= max_parallelism


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("already", [False, True], ids=["failed future", "pre-failed future"])
def test_not_invoke_the_decider_twice(fmat, kind, already):
    count = []

    def decider(exc):
        count.append(exc)
        return Supervision.RESUME

    async def boom():
        raise TE("this has gone too far")

    def fn(elem, _p):
        if not elem:
            return done(elem)
        return failed(TE("this has gone too far")) if already else boom()

    out = _part(Source.from_iterable([True, False]), kind, 1, lambda x: 0, fn) \
        .add_attributes(Attributes.supervision_strategy(decider)).run_with(Sink.seq(), fmat)
    assert out.result(3) == [False]
    assert len(count) == 1


@pytest.mark.parametrize("kind", KINDS)
def test_log_error_when_future_fails_with_resume_supervision(fmat, kind, caplog):
    with caplog.at_level(logging.ERROR, logger="atoll.async"):
        out = _part(Source.range(1, 6), kind, 4, lambda x: x % 2, lambda e, _p: failed(TE("err")) if e == 3 else done(e)) \
            .with_attributes(RESUME).run_with(Sink.seq(), fmat).result(3)
    assert sorted(out) == [1, 2, 4, 5]
    op = "map_async_partitioned" if kind == "ordered" else "map_async_partitioned_unordered"
    assert [r.getMessage() for r in caplog.records if r.name == "atoll.async"] == [
        f"Supervision strategy resumed after exception in {op}: TE('err')"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_raising_partitioner_is_supervised(fmat, kind):
    def partitioner(x):
        if x == 2:
            raise TE("no partition")
        return x % 2

    flow = _part(Source.range(1, 5), kind, 2, partitioner, lambda e, _p: done(e))
    assert sorted(flow.with_attributes(RESUME).run_with(Sink.seq(), fmat).result(3)) == [1, 3, 4]
    with pytest.raises(TE, match="no partition"):
        flow.run_with(Sink.seq(), fmat).result(3)


def test_validation():
    with pytest.raises(ValueError, match="map_async_partitioned: argument 'parallelism' must be >= 1, got 0"):
        Flow().map_async_partitioned(0, lambda x: x, lambda e, p: done(e))
    with pytest.raises(TypeError, match="map_async_partitioned_unordered: argument 'partitioner' must be callable"):
        Flow().map_async_partitioned_unordered(1, None, lambda e, p: done(e))
    with pytest.raises(TypeError, match="map_async_partitioned: argument 'fn' must be callable"):
        Flow().map_async_partitioned(1, lambda x: x, 1)


@pytest.mark.parametrize("kind", KINDS)
def test_signals_stay_behind_the_elements_before_them(fmat, kind):
    calls = Calls()
    src, sink = _part(TestSource.probe(), kind, 4, lambda x: x, calls) \
        .to_mat(TestSink.probe(signals=True), Keep.both).run(fmat)
    sink.request(10)
    src.send_next(1)
    src.send_next(2)
    calls.wait_for(1, 2)
    src.send_watermark(5)
    src.send_next(3)
    calls.wait_for(3)
    calls.complete(3)
    sink.expect_no_message(0.1)
    calls.complete(2)
    if kind == "unordered":
        sink.expect_next(2)
    calls.complete(1)
    sink.expect_next(1)
    if kind == "ordered":
        sink.expect_next(2)
    sink.expect_watermark(5)
    sink.expect_next(3)
    src.send_complete()
    sink.expect_complete()
