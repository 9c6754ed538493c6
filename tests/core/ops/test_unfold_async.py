"""Source.unfold_async and Source.unfold_resource_async: ported from Pekko's UnfoldResourceAsyncSourceSpec and
the ``unfoldAsync`` cases of Pekko's SourceSpec ("generate a finite fibonacci sequence asynchronously",
"terminate with a failure if there is an exception thrown") and FlowUnfoldAsyncTest.

The resource's create/read/close are controlled through futures the test completes (``Calls``), as
Pekko's ``ResourceDummy`` controls them through promises.
Not applicable: "use dedicated blocking-io-dispatcher by default" (no dispatchers).
"""
from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest
from ops_kit import TE, fmat  # noqa: F401
from test_map_async_kit import Calls, Gate, done, failed

from atoll import Attributes, Keep, Materializer, Sink, Source, Supervision
from atoll.testkit import TestSink, assert_all_stages_stopped

RESUME = Attributes.supervision_strategy(Supervision.resuming_decider)
RESTART = Attributes.supervision_strategy(Supervision.restarting_decider)


# =========================================================================== unfold_async
def test_unfold_async_generates_a_finite_fibonacci_sequence(fmat):
    async def fib(state):
        a, b = state
        if a > 10_000_000:
            return None
        return (b, a + b), a

    out = Source.unfold_async((0, 1), fib).run_fold([], lambda acc, x: [x] + acc, fmat).result(3)
    assert out[:4] == [9227465, 5702887, 3524578, 2178309]
    assert out[-4:] == [2, 1, 1, 0]


def test_unfold_async_terminates_with_a_failure_if_fn_raises(fmat):
    def fn(state):
        a, b = state
        if a > 10_000_000:
            raise TE("expected")
        return done(((b, a + b), a))

    fut = Source.unfold_async((0, 1), fn).run_fold([], lambda acc, x: [x] + acc, fmat)
    with pytest.raises(TE, match="expected"):
        fut.result(3)


def test_unfold_async_fails_when_the_future_fails(fmat):
    fut = Source.unfold_async(0, lambda s: failed(TE("bad")) if s == 2 else done((s + 1, s))).run_with(Sink.seq(), fmat)
    with pytest.raises(TE, match="bad"):
        fut.result(3)


def test_unfold_async_calls_fn_once_per_pull(fmat):
    calls = Calls()
    probe = Source.unfold_async(0, calls).run_with(TestSink.probe(), fmat)
    calls.expect_no_call(0.05)
    probe.request(1)
    calls.wait_for(0)
    calls.expect_no_call(0.05)
    calls.complete(0, (1, "a"))
    probe.expect_next("a")
    calls.expect_no_call(0.05)
    probe.request(2)
    calls.wait_for(1)
    calls.complete(1, (2, "b"))
    probe.expect_next("b")
    calls.wait_for(2)
    calls.complete(2, None)
    probe.expect_complete()


def test_unfold_async_rejects_a_result_that_is_not_a_pair(fmat):
    fut = Source.unfold_async(0, lambda s: done(42)).run_with(Sink.seq(), fmat)
    with pytest.raises(TypeError, match=r"Source.unfold_async: fn must give \(next_state, element\) or None, got 42"):
        fut.result(3)


# =========================================================================== unfold_resource_async
class Resource:
    """Pekko's ResourceDummy: ``create``/``read``/``close`` return futures; ``create_gate``,
    ``first_read_gate`` and ``close_gate`` (Futures the test completes) hold them back."""

    def __init__(self, values, create_gate=None, first_read_gate=None, close_gate=None):
        self.it = iter(values)
        self.create_gate = create_gate or done(None)
        self.first_read_gate = first_read_gate or done(None)
        self.close_gate = close_gate or done(None)
        self.created = threading.Event()
        self.first_read = threading.Event()
        self.closed = threading.Event()
        self.close_count = 0

    def _after(self, gate: Future, value_fn) -> Future:
        out: Future = Future()

        def go(_):
            try:
                out.set_result(value_fn())
            except BaseException as e:  # noqa: BLE001
                out.set_exception(e)

        gate.add_done_callback(go)
        return out

    def create(self):
        self.created.set()
        return self._after(self.create_gate, lambda: self)

    def read(self, _r):
        self.first_read.set()
        return self._after(self.first_read_gate, lambda: next(self.it, None))

    def close(self, _r):
        self.close_count += 1
        self.closed.set()
        return self.close_gate


def _source(r: Resource):
    return Source.unfold_resource_async(r.create, r.read, r.close)


def test_unfold_data_from_a_resource(fmat):
    create_gate, close_gate = Future(), Future()
    values = list(range(0, 1001))
    r = Resource(values, create_gate=create_gate, close_gate=close_gate)
    probe = _source(r).run_with(TestSink.probe(), fmat)
    probe.request(1)
    assert r.created.wait(3)
    probe.expect_no_message(0.1)
    create_gate.set_result(None)
    for n in values:
        assert probe.expect_next() == n
        probe.request(1)
    assert r.closed.wait(3)
    probe.expect_no_message(0.05)  # completion waits for close to finish
    close_gate.set_result(None)
    probe.expect_complete()
    assert r.close_count == 1


def test_close_resource_successfully_right_after_open(fmat):
    first_read = Future()
    r = Resource([1], first_read_gate=first_read)
    probe = _source(r).run_with(TestSink.probe(), fmat)
    probe.request(1)
    assert r.first_read.wait(3)
    probe.cancel()  # before the first read completed
    first_read.set_result(None)
    assert r.closed.wait(3)
    assert_all_stages_stopped(fmat)
    assert r.close_count == 1


def test_wait_for_pending_read_before_closing_resource_when_stream_is_cancelled(fmat):
    read_completed = Calls()
    closed_when = []
    close_called = threading.Event()

    def close(_r):
        closed_when.append(read_completed.futures[0].done())
        close_called.set()
        return done(None)

    src = Source.unfold_resource_async(lambda: done(0), read_completed, close)
    fut, probe = src.watch_termination().to_mat(TestSink.probe(), Keep.both).run(fmat)
    probe.request(1)
    read_completed.wait_for(0)
    probe.cancel()
    fut.result(3)
    assert not close_called.wait(0.2)
    read_completed.complete(0, 1)
    assert close_called.wait(3)
    assert closed_when == [True]


@pytest.mark.parametrize("how", ["throws", "returns failed future"])
def test_fail_when_create_fails(fmat, how):
    def create():
        if how == "throws":
            raise TE("create failed")
        return failed(TE("create failed"))

    probe = Source.unfold_resource_async(create, lambda r: done(None), lambda r: done(None)).run_with(TestSink.probe(), fmat)
    probe.ensure_subscription()
    assert probe.expect_error() == TE("create failed")


@pytest.mark.parametrize("how", ["throws", "returns failed future"])
def test_fail_when_close_fails(fmat, how):
    def close(_r):
        if how == "throws":
            raise TE("")
        return failed(TE(""))

    probe = Source.unfold_resource_async(lambda: done("r"), lambda r: done(None), close).run_with(TestSink.probe(), fmat)
    probe.ensure_subscription()
    probe.request(1)
    assert probe.expect_error() == TE("")


@pytest.mark.parametrize("how", ["throws", "returns failed future"])
def test_continue_when_strategy_is_resume_and_read_fails(fmat, how):
    def read(it):
        x = next(it, None)
        if isinstance(x, TE):
            if how == "throws":
                raise x
            return failed(x)
        return done(x)

    src = Source.unfold_resource_async(lambda: done(iter([1, 2, TE("read-error"), 3])), read, lambda r: done(None))
    assert src.with_attributes(RESUME).run_with(Sink.seq(), fmat).result(3) == [1, 2, 3]


@pytest.mark.parametrize("how", ["throws", "returns failed future"])
def test_close_and_open_again_when_strategy_is_restart_and_read_fails(fmat, how):
    state = {"failed": False, "starts": 0, "closes": 0}

    def create():
        state["starts"] += 1
        return done(iter([1, 2, 3]))

    def read(it):
        if not state["failed"]:
            state["failed"] = True
            if how == "throws":
                raise TE("read-error")
            return failed(TE("read-error"))
        return done(next(it, None))

    def close(_r):
        state["closes"] += 1
        return done(None)

    src = Source.unfold_resource_async(create, read, close)
    assert src.with_attributes(RESTART).run_with(Sink.seq(), fmat).result(3) == [1, 2, 3]
    assert state["starts"] == 2
    assert state["closes"] == 2


@pytest.mark.parametrize("how", ["throws", "returns failed future"])
def test_fail_stream_when_restarting_and_close_fails(fmat, how):
    def close(_r):
        if how == "throws":
            raise TE("close-error")
        return failed(TE("close-error"))

    def read(_r):
        raise TE("read-error")

    src = Source.unfold_resource_async(lambda: done(iter([1, 2, 3])), read, close)
    probe = src.with_attributes(RESTART).run_with(TestSink.probe(), fmat)
    probe.request(1)
    assert probe.expect_error() == TE("close-error")


@pytest.mark.parametrize("how", ["throws", "returns failed future"])
def test_fail_stream_when_restarting_and_start_fails(fmat, how):
    starts = []

    def create():
        starts.append(1)
        if len(starts) < 2:
            return done(iter([1, 2, 3]))
        if how == "throws":
            raise TE("start-error")
        return failed(TE("start-error"))

    def read(_r):
        raise TE("read-error")

    src = Source.unfold_resource_async(create, read, lambda r: done(None))
    probe = src.with_attributes(RESTART).run_with(TestSink.probe(), fmat)
    probe.request(1)
    assert probe.expect_error() == TE("start-error")


def test_close_resource_when_stream_is_abruptly_terminated():
    r = Resource(range(100))
    m = Materializer.local()
    probe = _source(r).run_with(TestSink.probe(), m)
    probe.request(1)
    probe.expect_next(0)
    m.shutdown()
    assert r.closed.wait(3)
    assert r.close_count == 1


def test_close_resource_when_stream_is_quickly_cancelled(fmat):
    r = Resource(range(100))
    probe = _source(r).run_with(TestSink.probe(), fmat)
    probe.cancel()
    assert r.closed.wait(3)
    assert_all_stages_stopped(fmat)
    assert r.close_count == 1


def test_close_resource_created_after_the_stream_was_cancelled(fmat):
    create_gate = Future()
    r = Resource(range(100), create_gate=create_gate)
    probe = _source(r).run_with(TestSink.probe(), fmat)
    assert r.created.wait(3)
    probe.cancel()
    assert_all_stages_stopped(fmat)
    assert not r.closed.is_set()
    create_gate.set_result(None)  # the resource arrives after the stage stopped: closed at once
    assert r.closed.wait(3)
    assert r.close_count == 1


@pytest.mark.parametrize("how", ["throws", "returns failed future"])
def test_close_the_resource_when_reading_an_element_fails(fmat, how):
    r = Resource(range(100))

    def read(_r):
        if how == "throws":
            raise TE("read failed")
        return failed(TE("read failed"))

    fut = Source.unfold_resource_async(r.create, read, r.close).run_with(Sink.seq(), fmat)
    with pytest.raises(TE, match="read failed"):
        fut.result(3)
    assert r.closed.wait(3)
    assert r.close_count == 1


def test_async_def_resource_functions_and_a_coroutine_close_after_cancel():
    """Coroutines all the way; a ``close`` coroutine started after the stage stopped still runs to its end,
    and the loop thread goes away after it."""
    from atoll._impl.ops.async_loop import loop_thread_running

    gate = Gate()
    log = []

    async def create():
        return [1, 2, 3]

    async def read(res):
        return res.pop(0) if res else None

    async def close(_res):
        await gate.wait("close")
        log.append("closed")

    m = Materializer.local()
    try:
        probe = Source.unfold_resource_async(create, read, close).run_with(TestSink.probe(), m)
        probe.request(2)
        probe.expect_next(1, 2)
        probe.cancel()
        assert_all_stages_stopped(m)
        assert log == []
        gate.open("close")
        deadline_ok = _wait(lambda: log == ["closed"] and not loop_thread_running())
        assert deadline_ok, (log, loop_thread_running())
    finally:
        m.shutdown()


def _wait(cond, timeout=3.0):
    """Poll ``cond`` until it holds (the close coroutine ends on the loop thread, not on the test's)."""
    ev = threading.Event()
    for _ in range(int(timeout / 0.01)):
        if cond():
            return True
        ev.wait(0.01)
    return cond()


def test_validation():
    with pytest.raises(TypeError, match="Source.unfold_resource_async: argument 'read' must be callable"):
        Source.unfold_resource_async(lambda: done(1), None, lambda r: done(None))
    with pytest.raises(TypeError, match="Source.unfold_async: argument 'fn' must be callable"):
        Source.unfold_async(0, 3)
