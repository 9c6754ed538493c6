"""Sink.foreach_async: ported from Pekko's SinkForeachAsyncSpec.

Latches become futures (``Calls``) or asyncio gates (``Gate``) the test opens; "back-pressure upstream
elements when downstream is slow" keeps Pekko's check (the element thunks are not evaluated before the
call for the one before them finished) without its two-second sleeps.
"""
from __future__ import annotations

import pytest
from ops_kit import TE, fmat  # noqa: F401
from test_map_async_kit import Calls, Gate, done

from atoll import Attributes, Sink, Source, Supervision
from atoll.markers import Done


def test_handle_empty_source(fmat):
    async def fn(_):
        return None

    assert Source.empty().run_with(Sink.foreach_async(3, fn), fmat).result(3) is Done


def test_be_able_to_run_elements_in_parallel(fmat):
    gate = Gate()
    seen = []

    async def fn(n):
        await gate.wait(n)
        seen.append(n)

    fut = Source.range(1, 5).run_with(Sink.foreach_async(4, fn), fmat)
    for n in (1, 2, 3, 4):
        gate.open(n)
    assert fut.result(3) is Done
    assert sorted(seen) == [1, 2, 3, 4]


def test_back_pressure_upstream_elements_when_downstream_is_slow(fmat):
    calls = Calls()
    called = []

    def thunk(n):
        def f():
            called.append(n)
            return n
        return f

    fut = Source.from_iterable([thunk(1), thunk(2), thunk(3), thunk(4)]).run_with(
        Sink.foreach_async(1, lambda t: calls(t())), fmat)
    for n in (1, 2, 3, 4):
        calls.wait_for(n)
        assert called == list(range(1, n + 1))  # the next thunk is not evaluated before this call ends
        calls.expect_no_call(0.05)
        calls.complete(n)
    assert fut.result(3) is Done


def test_produce_elements_in_the_order_they_are_ready(fmat):
    calls = Calls()
    fut = Source.range(1, 5).run_with(Sink.foreach_async(4, calls), fmat)
    calls.wait_for(1, 2, 3, 4)
    for n in (2, 4, 3):
        calls.complete(n)
    assert not fut.done()
    calls.complete(1)
    assert fut.result(3) is Done


def test_not_run_more_functions_in_parallel_than_specified(fmat):
    calls = Calls()
    fut = Source.range(1, 6).run_with(Sink.foreach_async(4, calls), fmat)
    assert sorted(calls.wait_for(1, 2, 3, 4)) == [1, 2, 3, 4]
    calls.expect_no_call(0.2)
    assert not fut.done()
    for n in (1, 2, 3, 4):
        calls.complete(n)
    calls.wait_for(5)
    calls.complete(5)
    assert fut.result(3) is Done


def test_resume_after_failed_future(fmat):
    seen = []

    async def fn(n):
        if n == 3:
            raise TE("err1")
        seen.append(n)

    sink = Sink.foreach_async(4, fn).with_attributes(Attributes.supervision_strategy(Supervision.resuming_decider))
    assert Source.range(1, 6).run_with(sink, fmat).result(3) is Done
    assert sorted(seen) == [1, 2, 4, 5]


def test_finish_after_failed_future(fmat):
    calls = Calls()
    fut = Source.from_iterator(lambda: iter(range(1, 1_000_000))).run_with(Sink.foreach_async(3, calls), fmat)
    calls.wait_for(1, 2, 3)
    calls.complete(1, None)
    calls.complete(2, None)
    calls.fail(3, TE("err2"))
    with pytest.raises(TE, match="err2"):
        fut.result(3)


def test_upstream_failure_fails_the_future(fmat):
    fut = Source.failed(TE("up")).run_with(Sink.foreach_async(2, done), fmat)
    with pytest.raises(TE, match="up"):
        fut.result(3)


def test_validation():
    with pytest.raises(ValueError, match="Sink.foreach_async: argument 'parallelism' must be >= 1, got 0"):
        Sink.foreach_async(0, done)
    with pytest.raises(TypeError, match="Sink.foreach_async: argument 'fn' must be callable"):
        Sink.foreach_async(1, None)

