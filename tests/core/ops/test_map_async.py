"""map_async and map_async_unordered: ported from Pekko's FlowMapAsyncSpec and FlowMapAsyncUnorderedSpec.

Pekko's futures complete on a dispatcher after sleeps or latches; here the test completes
``concurrent.futures.Future``\\ s itself (``Calls``), or coroutines wait on an asyncio gate the test opens,
so every completion order is chosen by the test. Cases whose upstream blocks a thread ("signal future
failure asap": a ``map`` awaiting a latch) use a publisher probe that simply sends nothing more.

Added beyond the Pekko specs: ``async def`` functions, a result that is not awaitable, the loop thread
being gone once the graphs ended, a cancelled stream cancelling its running coroutines, and the
build-time validation.
"""
from __future__ import annotations

import asyncio
import logging
import random
import threading

import pytest
from ops_kit import TE, fmat  # noqa: F401
from test_map_async_kit import Calls, Gate, done, failed

from atoll import Attributes, Flow, Keep, Materializer, Sink, Source, Supervision
from atoll._impl.ops.async_loop import NotAsyncResultError, loop_thread_running
from atoll.testkit import TestSink, TestSource, assert_all_stages_stopped

RESUME = Attributes.supervision_strategy(Supervision.resuming_decider)
ORDERED = ["ordered", "unordered"]


def _op(kind, parallelism, fn):
    return (lambda f: f.map_async(parallelism, fn)) if kind == "ordered" else (lambda f: f.map_async_unordered(parallelism, fn))


def _via(src, kind, parallelism, fn):
    return _op(kind, parallelism, fn)(src)


# --------------------------------------------------------------------------- FlowMapAsyncSpec
def test_produce_future_elements(fmat):
    sink = Source.range(1, 4).map_async(4, done).run_with(TestSink.probe(), fmat)
    sink.request(2)
    sink.expect_next(1)
    sink.expect_next(2)
    sink.expect_no_message(0.2)
    sink.request(2)
    sink.expect_next(3)
    sink.expect_complete()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_produce_future_elements_in_order(fmat, seed):
    """Every third future is already completed; the others are completed by the test in a random order."""
    rng = random.Random(seed)
    calls = Calls()

    def fn(n):
        return done(n) if n % 3 == 0 else calls(n)

    sink = Source.range(1, 51).map_async(4, fn).run_with(TestSink.probe(), fmat)
    sink.request(1000)
    pending = [n for n in range(1, 51) if n % 3]
    completed = set()
    while len(completed) < len(pending):
        # everything before the oldest uncompleted element was emitted, so the stage holds (and has
        # called fn for) that element and the three after it
        head = min(n for n in pending if n not in completed)
        window = [n for n in range(head, min(head + 4, 51)) if n % 3 and n not in completed]
        calls.wait_for(*window)
        n = rng.choice(window)
        calls.complete(n)
        completed.add(n)
    for n in range(1, 51):
        sink.expect_next(n)
    sink.expect_complete()


@pytest.mark.parametrize("kind", ORDERED)
def test_not_run_more_futures_than_requested_parallelism(fmat, kind):
    seen = Calls()

    def fn(n):
        seen(n)
        return done(n)

    sink = _via(Source.range(1, 21), kind, 8, fn).run_with(TestSink.probe(), fmat)
    sink.ensure_subscription()
    seen.expect_no_call(0.2)
    sink.request(1)
    assert sorted(seen.wait_for(*range(1, 10))) == list(range(1, 10))
    seen.expect_no_call(0.2)
    sink.request(2)
    assert sorted(seen.wait_for(10, 11)) == list(range(1, 12))
    seen.expect_no_call(0.2)
    sink.request(10)
    assert sorted(seen.wait_for(*range(12, 21))) == list(range(1, 21))
    for n in range(1, 14):
        sink.expect_next(n)
    sink.expect_no_message(0.2)
    sink.cancel()


@pytest.mark.parametrize("kind", ORDERED)
def test_signal_future_already_failed(fmat, kind):
    calls = Calls()

    def fn(n):
        return failed(TE("err1")) if n == 3 else calls(n)

    sink = _via(Source.range(1, 6), kind, 4, fn).run_with(TestSink.probe(), fmat)
    sink.request(10)
    assert sink.expect_error() == TE("err1")
    for n in calls.wait_for(1, 2):
        calls.complete(n)  # late completions go nowhere


@pytest.mark.parametrize("kind", ORDERED)
def test_signal_future_failure(fmat, kind):
    calls = Calls()
    sink = _via(Source.range(1, 6), kind, 4, calls).run_with(TestSink.probe(), fmat)
    sink.request(10)
    calls.wait_for(1, 2, 3, 4)
    calls.fail(3, TE("err1"))  # 1 and 2 are still running: the failure does not wait for them
    assert sink.expect_error() == TE("err1")
    calls.complete(1)


@pytest.mark.parametrize("kind", ORDERED)
def test_signal_future_failure_asap(fmat, kind):
    """Upstream sends nothing after the failing element: the failure must not wait for it."""
    src, fut = _via(TestSource.probe(), kind, 4, lambda n: failed(TE("err1")) if n == 1 else done(n)) \
        .to_mat(Sink.ignore(), Keep.both).run(fmat)
    src.send_next(1)
    with pytest.raises(TE, match="err1"):
        fut.result(3)
    src.expect_cancellation()


def test_a_failure_mid_stream_must_cause_a_failure_asap_stopping_strategy(fmat):
    calls = Calls()
    sink = Source.from_iterable("abcdef").map_async(5, calls).map(str.upper).run_with(TestSink.probe(), fmat)
    sink.request(100)
    calls.wait_for(*"abcde")
    boom = TE("Boom at C")
    calls.complete("a")
    calls.complete("b")
    calls.fail("c", boom)
    calls.complete("d")
    calls.complete("e")
    # A and B may or may not come out before the failure; nothing after C ever does
    got = []
    while True:
        ev = sink.expect_next_or_error()
        if isinstance(ev, BaseException):
            assert ev == boom
            break
        got.append(ev)
    assert got == ["A", "B"][: len(got)]


@pytest.mark.parametrize("kind", ORDERED)
def test_a_failure_mid_stream_must_skip_element_with_resume_strategy(fmat, kind):
    calls = Calls()
    fut = _via(Source.from_iterable("abcdef"), kind, 5, calls).with_attributes(RESUME).run_with(Sink.seq(), fmat)
    calls.wait_for(*"abcde")
    for x in "abde":
        calls.complete(x)
    calls.wait_for("f")
    calls.complete("f")
    calls.fail("c", TE("Booom!"))
    out = fut.result(3)
    assert (out if kind == "ordered" else sorted(out)) == ["a", "b", "d", "e", "f"]


@pytest.mark.parametrize("kind", ORDERED)
def test_signal_error_from_map_async(fmat, kind):
    calls = Calls()

    def fn(n):
        if n == 3:
            raise TE("err2")
        return calls(n)

    sink = _via(Source.range(1, 6), kind, 4, fn).run_with(TestSink.probe(), fmat)
    sink.request(10)
    assert sink.expect_error() == TE("err2")


@pytest.mark.parametrize("kind", ORDERED)
def test_resume_after_future_failure(fmat, kind):
    async def fn(n):
        if n == 3:
            raise TE("err3")
        return n

    sink = _via(Source.range(1, 6), kind, 4, fn).with_attributes(RESUME).run_with(TestSink.probe(), fmat)
    sink.request(10)
    if kind == "ordered":
        sink.expect_next(1, 2, 4, 5)
    else:
        sink.expect_next_unordered(1, 2, 4, 5)
    sink.expect_complete()


@pytest.mark.parametrize("kind", ORDERED)
def test_resume_after_already_failed_future(fmat, kind):
    fn = lambda n: failed(TE("err3")) if n == 3 else done(n)  # noqa: E731
    sink = _via(Source.range(1, 6), kind, 4, fn).with_attributes(RESUME).run_with(TestSink.probe(), fmat)
    sink.request(10)
    sink.expect_next(1, 2, 4, 5)
    sink.expect_complete()


@pytest.mark.parametrize("kind", ORDERED)
def test_resume_after_multiple_failures(fmat, kind):
    futures = [failed(TE(f"failure{i}")) for i in range(1, 6)] + [done("happy!")]
    fut = _via(Source.from_iterable(futures), kind, 2, lambda f: f).with_attributes(RESUME).run_with(Sink.head(), fmat)
    assert fut.result(3) == "happy!"


@pytest.mark.parametrize("kind", ORDERED)
@pytest.mark.parametrize("parallelism", [1, 2])
def test_complete_without_requiring_further_demand(fmat, kind, parallelism):
    async def fn(v):
        await asyncio.sleep(0)
        return v

    sink = _via(Source.from_iterable([1, 2][:parallelism]), kind, parallelism, fn).run_with(TestSink.probe(), fmat)
    sink.request(parallelism)
    got = sink.expect_next_n(parallelism)
    assert sorted(got) == [1, 2][:parallelism]
    sink.expect_complete()


@pytest.mark.parametrize("kind", ORDERED)
@pytest.mark.parametrize("parallelism", [1, 2])
def test_complete_without_requiring_further_demand_with_already_completed_future(fmat, kind, parallelism):
    sink = _via(Source.from_iterable([1, 2][:parallelism]), kind, parallelism, done).run_with(TestSink.probe(), fmat)
    sink.request(parallelism)
    sink.expect_next_n(list([1, 2][:parallelism]))
    sink.expect_complete()


@pytest.mark.parametrize("kind", ORDERED)
def test_finish_after_future_failure(fmat, kind):
    async def fn(n):
        if n == 3:
            raise TE("err3b")
        return n

    fut = _via(Source.range(1, 4), kind, 1, fn).with_attributes(RESUME).grouped(10).run_with(Sink.head(), fmat)
    assert fut.result(3) == [1, 2]


@pytest.mark.parametrize("kind", ORDERED)
def test_resume_when_map_async_throws(fmat, kind):
    def fn(n):
        if n == 3:
            raise TE("err4")
        return done(n)

    sink = _via(Source.range(1, 6), kind, 4, fn).with_attributes(RESUME).run_with(TestSink.probe(), fmat)
    sink.request(10)
    sink.expect_next(1, 2, 4, 5)
    sink.expect_complete()


@pytest.mark.parametrize("kind", ORDERED)
def test_ignore_element_when_future_is_completed_with_none(fmat, kind):
    flow = _op(kind, 2, lambda x: done(None if x == 2 else str(x)))(Flow())
    assert Source.from_iterable([1, 2, 3]).via(flow).run_with(Sink.seq(), fmat).result(3) == ["1", "3"]


@pytest.mark.parametrize("kind", ORDERED)
def test_continue_emitting_after_a_sequence_of_nones(fmat, kind):
    async def fn(v):
        return str(v) if v == 0 or v >= 100 else None

    out = _via(Source.range(0, 103), kind, 3, fn).run_with(Sink.seq(), fmat).result(3)
    assert (out if kind == "ordered" else sorted(out)) == ["0", "100", "101", "102"]


@pytest.mark.parametrize("kind", ORDERED)
def test_complete_without_emitting_any_element_after_a_sequence_of_nones_only(fmat, kind):
    assert _via(Source.range(0, 201), kind, 3, lambda _: done(None)).run_with(Sink.seq(), fmat).result(3) == []


@pytest.mark.parametrize("kind", ORDERED)
def test_complete_stage_if_future_with_none_result_is_completed_last(fmat, kind):
    calls = Calls()

    def fn(x):
        return calls(x) if x == 2 else done(str(x))

    fut = _via(Source.from_iterable([1, 2, 3]), kind, 2, fn).run_with(Sink.seq(), fmat)
    calls.wait_for(2)
    assert fut.done() is False  # 1 and 3 are in, the None for 2 is the last completion
    calls.complete(2, None)
    assert fut.result(3) == ["1", "3"]


@pytest.mark.parametrize("kind", ORDERED)
def test_handle_cancel_properly(fmat, kind):
    src, sink = _via(TestSource.probe(), kind, 4, done).to_mat(TestSink.probe(), Keep.both).run(fmat)
    src.expect_request()
    sink.cancel()
    src.expect_cancellation()


@pytest.mark.parametrize("kind", ORDERED)
def test_not_run_more_futures_than_configured(fmat, kind):
    parallelism = 8
    lock = threading.Lock()
    state = {"in_flight": 0, "max": 0}

    def fn(_):
        with lock:
            state["in_flight"] += 1
            state["max"] = max(state["max"], state["in_flight"])
            if state["in_flight"] > parallelism:
                return failed(TE("parallelism exceeded"))

        async def deferred():
            await asyncio.sleep(0)
            with lock:
                state["in_flight"] -= 1
            return 1

        return deferred()

    n = 2000
    assert _via(Source.range(0, n), kind, parallelism, fn).run_fold(0, lambda c, _: c + 1, fmat).result(10) == n
    assert state["max"] <= parallelism


def _counting_decider(counter):
    def decider(exc):
        if exc == TE("this has gone too far"):
            counter.append(exc)
            return Supervision.RESUME
        return Supervision.STOP

    return decider


@pytest.mark.parametrize("kind", ORDERED)
@pytest.mark.parametrize("how", ["failed future", "already failed future", "failure to produce a future"])
def test_not_invoke_the_decider_twice(fmat, kind, how):
    count = []

    def fn(elem):
        if not elem:
            return done(elem)
        if how == "failure to produce a future":
            raise TE("this has gone too far")
        if how == "already failed future":
            return failed(TE("this has gone too far"))

        async def boom():
            raise TE("this has gone too far")

        return boom()

    flow = _via(Source.from_iterable([True, False]), kind, 1, fn)
    out = flow.add_attributes(Attributes.supervision_strategy(_counting_decider(count))).run_with(Sink.seq(), fmat)
    assert out.result(3) == [False]
    assert len(count) == 1


@pytest.mark.parametrize("kind", ORDERED)
@pytest.mark.parametrize("throws", [False, True])
def test_log_error_when_resumed(fmat, kind, throws, caplog):
    def fn(n):
        if n == 3:
            if throws:
                raise TE("err")
            return failed(TE("err"))
        return done(n)

    with caplog.at_level(logging.ERROR, logger="atoll.async"):
        out = _via(Source.range(1, 6), kind, 4, fn).with_attributes(RESUME).run_with(Sink.seq(), fmat).result(3)
    assert sorted(out) == [1, 2, 4, 5]
    msgs = [r.getMessage() for r in caplog.records if r.name == "atoll.async"]
    op = "map_async" if kind == "ordered" else "map_async_unordered"
    assert msgs == [f"Supervision strategy resumed after exception in {op}: TE('err')"]


@pytest.mark.parametrize("kind", ORDERED)
def test_not_log_when_log_level_is_off(fmat, kind, caplog):
    attrs = RESUME.and_(Attributes.log_levels(on_failure=0))
    with caplog.at_level(logging.DEBUG, logger="atoll.async"):
        out = _via(Source.range(1, 6), kind, 4, lambda n: failed(TE("err")) if n == 3 else done(n)) \
            .with_attributes(attrs).run_with(Sink.seq(), fmat).result(3)
    assert sorted(out) == [1, 2, 4, 5]
    assert [r for r in caplog.records if r.name == "atoll.async"] == []


# --------------------------------------------------------------------------- FlowMapAsyncUnorderedSpec
def test_unordered_produce_future_elements_in_the_order_they_are_ready(fmat):
    calls = Calls()
    sink = Source.range(1, 5).map_async_unordered(4, calls).run_with(TestSink.probe(), fmat)
    sink.request(5)
    calls.wait_for(1, 2, 3, 4)
    for n in (2, 4, 3, 1):
        calls.complete(n)
        sink.expect_next(n)
    sink.expect_complete()


def test_unordered_emits_a_result_held_while_downstream_was_not_ready(fmat):
    calls = Calls()
    src, sink = TestSource.probe().map_async_unordered(2, calls).to_mat(TestSink.probe(), Keep.both).run(fmat)
    sink.request(1)
    src.send_next(1)
    src.send_next(2)
    calls.wait_for(1, 2)
    calls.complete(2)
    sink.expect_next(2)
    calls.complete(1)  # no demand: held in the stage
    sink.expect_no_message(0.1)
    src.send_complete()
    sink.request(1)
    sink.expect_next(1)
    sink.expect_complete()


# --------------------------------------------------------------------------- beyond the specs
@pytest.mark.parametrize("kind", ORDERED)
def test_async_def_functions(fmat, kind):
    gate = Gate()

    async def fn(n):
        await gate.wait(n)
        return n * 10

    sink = _via(Source.range(1, 4), kind, 3, fn).run_with(TestSink.probe(), fmat)
    sink.request(3)
    gate.open(3)
    if kind == "unordered":
        sink.expect_next(30)
    gate.open(2)
    gate.open(1)
    if kind == "ordered":
        sink.expect_next(10, 20, 30)
    else:
        sink.expect_next_unordered(10, 20)
    sink.expect_complete()


@pytest.mark.parametrize("kind", ORDERED)
def test_a_result_that_is_not_awaitable_is_a_failure_of_fn(fmat, kind):
    fut = _via(Source.range(1, 4), kind, 2, lambda n: n).run_with(Sink.seq(), fmat)
    with pytest.raises(NotAsyncResultError, match="must return an awaitable, a concurrent.futures.Future or a ray.ObjectRef, got 1"):
        fut.result(3)
    out = _via(Source.range(1, 4), kind, 2, lambda n: n if n == 2 else done(n)).with_attributes(RESUME)
    assert sorted(out.run_with(Sink.seq(), fmat).result(3)) == [1, 3]


def test_running_coroutines_are_cancelled_when_the_stream_is_cancelled():
    gate = Gate()
    m = Materializer.local()
    try:
        sink = Source.range(1, 10).map_async(3, gate.wait).run_with(TestSink.probe(), m)
        sink.request(1)
        sink.expect_no_message(0.05)
        sink.cancel()
        cancelled = {gate.cancelled.get(timeout=3) for _ in range(3)}
        assert cancelled == {1, 2, 3}
        assert_all_stages_stopped(m, timeout=5.0)
        assert not loop_thread_running()
    finally:
        m.shutdown()


def test_the_loop_thread_stops_once_the_graphs_using_it_ended():
    m = Materializer.local()
    try:
        async def fn(x):
            return x

        a = Source.range(0, 5).map_async(2, fn).run_with(Sink.seq(), m)
        b = Source.range(0, 5).map_async_unordered(2, fn).run_with(Sink.seq(), m)
        assert a.result(3) == [0, 1, 2, 3, 4]
        assert sorted(b.result(3)) == [0, 1, 2, 3, 4]
        assert_all_stages_stopped(m, timeout=5.0)
        assert not loop_thread_running()
        assert not [t for t in threading.enumerate() if t.name == "atoll-async-loop"]
    finally:
        m.shutdown()


@pytest.mark.parametrize("method", ["map_async", "map_async_unordered"])
def test_validation(method):
    with pytest.raises(ValueError, match=f"{method}: argument 'parallelism' must be >= 1, got 0"):
        getattr(Flow(), method)(0, done)
    with pytest.raises(TypeError, match=f"{method}: argument 'parallelism' must be an int"):
        getattr(Flow(), method)(1.5, done)
    with pytest.raises(TypeError, match=f"{method}: argument 'fn' must be callable"):
        getattr(Flow(), method)(2, 42)


# --------------------------------------------------------------------------- control signals and event time
def test_ordered_signals_stay_behind_the_elements_before_them(fmat):
    calls = Calls()
    src, sink = TestSource.probe().map_async(4, calls).to_mat(TestSink.probe(signals=True), Keep.both).run(fmat)
    sink.request(10)
    src.send_next(1)
    src.send_next(2)
    calls.wait_for(1, 2)
    src.send_watermark(5)
    src.send_next(3)
    calls.wait_for(3)
    for n in (3, 2, 1):
        calls.complete(n)
    sink.expect_next(1)
    sink.expect_next(2)
    sink.expect_watermark(5)
    sink.expect_next(3)
    src.send_complete()
    sink.expect_complete()


def test_unordered_elements_do_not_cross_a_signal(fmat):
    calls = Calls()
    src, sink = TestSource.probe().map_async_unordered(4, calls).to_mat(TestSink.probe(signals=True), Keep.both).run(fmat)
    sink.request(10)
    src.send_next(1)
    src.send_next(2)
    calls.wait_for(1, 2)
    src.send_watermark(5)
    src.send_next(3)
    calls.wait_for(3)
    calls.complete(3)  # arrived after the watermark: waits for it
    sink.expect_no_message(0.1)
    calls.complete(2)
    sink.expect_next(2)
    calls.complete(1)
    sink.expect_next(1)
    sink.expect_watermark(5)
    sink.expect_next(3)
    src.send_complete()
    sink.expect_complete()


@pytest.mark.parametrize("kind", ORDERED)
def test_a_signal_with_nothing_held_goes_on_at_once(fmat, kind):
    src, sink = _via(TestSource.probe(), kind, 2, done).to_mat(TestSink.probe(signals=True), Keep.both).run(fmat)
    src.send_watermark(7)
    sink.expect_watermark(7)
    sink.request(1)
    src.send_next(1)
    sink.expect_next(1)
    src.send_complete()
    sink.expect_complete()


@pytest.mark.parametrize("kind", ORDERED)
def test_results_keep_their_elements_timestamps(fmat, kind):
    calls = Calls()
    src, sink = _via(TestSource.probe(event_time=True), kind, 3, calls) \
        .to_mat(TestSink.probe(event_time=True), Keep.both).run(fmat)
    sink.request(3)
    for n, ts in ((1, 100), (2, 200), (3, 300)):
        src.send_next(n, ts=ts)
    calls.wait_for(1, 2, 3)
    order = (1, 2, 3) if kind == "ordered" else (3, 1, 2)
    for n in (3, 1, 2):
        calls.complete(n)
    for n in order:
        sink.expect_next_with_timestamp(n, n * 100)
    src.send_complete()
    sink.expect_complete()
