"""Async callbacks: thread-safe entry into a running stage (Pekko's AsyncCallbackSpec).

The first part drives the bare interpreter (buffering before start, dropping after stop, feedback
futures), the second runs real streams where callbacks come from other threads.
"""
from __future__ import annotations

import queue
import threading
from concurrent.futures import wait

import pytest

from atoll import Done, FlowShape, GraphStage, GraphStageLogic, InHandler, Inlet, Keep, OutHandler, Outlet, Sink, Source, SourceShape
from atoll.errors import StreamDetachedError
from atoll.testkit import TestSink, TestSource

from interpreter_kit import Kit, linear
from stage_helpers import Boom

STARTED, STOPPED = "Started", "Stopped"


class AsyncCallbackStage(GraphStage):
    """A pass-through flow whose materialized value is an async callback: an exception argument is
    raised by the handler, ``"fail-the-stage"`` fails the stage, anything else goes to ``probe``.
    ``early(callback)`` is called from the logic's constructor."""

    def __init__(self, probe, early=None):
        self.in_ = Inlet("in")
        self.out = Outlet("out")
        self.shape = FlowShape(self.in_, self.out)
        self.probe = probe
        self.early = early

    def create_logic_and_materialized_value(self, attributes):
        stage = self

        class Logic(GraphStageLogic, InHandler, OutHandler):
            def __init__(self):
                super().__init__(stage.shape)
                self.callback = self.get_async_callback(self.on_callback)
                if stage.early is not None:
                    stage.early(self.callback)
                self.set_handlers(stage.in_, stage.out, self)

            def on_callback(self, msg):
                if isinstance(msg, BaseException):
                    raise msg
                if msg == "fail-the-stage":
                    self.fail_stage(RuntimeError("failing the stage"))
                else:
                    stage.probe(msg)

            def pre_start(self):
                stage.probe(STARTED)

            def post_stop(self):
                stage.probe(STOPPED)

            def on_push(self):
                elem = self.grab(stage.in_)
                stage.probe(("elem", elem))
                self.push(stage.out, elem)

            def on_pull(self):
                self.pull(stage.in_)

        logic = Logic()
        return logic, logic.callback


# ------------------------------------------------------------------------------ bare interpreter
def _kit(early=None):
    msgs = []
    kit = Kit()
    up, (logic,), down = linear(kit, [AsyncCallbackStage(msgs.append, early)])
    return kit, up, logic, down, kit.mat_values[0], msgs


def test_invoke_before_start_is_buffered_and_delivered_in_order():
    kit, up, logic, down, callback, msgs = _kit(early=lambda cb: cb.invoke("early"))
    callback.invoke("before-init")
    assert msgs == [] and kit.host.posted == []
    kit.init()
    assert msgs == [STARTED]  # buffered invocations run after every pre_start, not during init
    kit.run()
    assert msgs == [STARTED, "early", "before-init"]
    callback.invoke("later")
    kit.run()
    assert msgs[-1] == "later"


def test_invoke_with_feedback_before_start_completes_after_start():
    fb = []
    kit, up, logic, down, callback, msgs = _kit(early=lambda cb: fb.append(cb.invoke_with_feedback("early")))
    later = callback.invoke_with_feedback("later")
    assert not fb[0].done() and not later.done()
    kit.init()
    kit.run()
    assert fb[0].result(0) is Done and later.result(0) is Done
    assert msgs == [STARTED, "early", "later"]


def test_invoke_after_stop_is_dropped():
    kit, up, logic, down, callback, msgs = _kit()
    kit.init()
    kit.run()
    up.on_complete()
    assert msgs == [STARTED, STOPPED]
    callback.invoke("too late")
    assert kit.host.posted == []  # not even posted
    kit.run()
    assert msgs == [STARTED, STOPPED]


def test_invoke_with_feedback_after_stop_fails_with_stream_detached():
    kit, up, logic, down, callback, msgs = _kit()
    kit.init()
    up.on_complete()
    f = callback.invoke_with_feedback("too late")
    assert f.done()
    with pytest.raises(StreamDetachedError):
        f.result(0)


def test_feedback_pending_when_the_stage_stops_fails_with_stream_detached():
    kit, up, logic, down, callback, msgs = _kit()
    kit.init()
    kit.run()
    f = callback.invoke_with_feedback("in flight")  # posted, not yet run by the host
    assert not f.done()
    up.complete_out()
    kit.step_all()  # the stage stops before the host gets to the posted callback
    assert logic._finalized
    assert f.done()  # failed at stop, even if the host never runs the posted callback
    with pytest.raises(StreamDetachedError):
        f.result(0)
    kit.run()
    assert "in flight" not in msgs


def test_feedback_completes_after_the_handler_ran():
    kit, up, logic, down, callback, msgs = _kit()
    kit.init()
    kit.run()
    f = callback.invoke_with_feedback("hello")
    assert not f.done()
    kit.run()
    assert f.result(0) is Done and msgs[-1] == "hello"


def test_feedback_fails_with_the_handlers_exception_and_the_stage_fails():
    kit, up, logic, down, callback, msgs = _kit()
    kit.init()
    kit.run()
    exc = Boom("oh my gosh, whale of a wash!")
    f = callback.invoke_with_feedback(exc)
    kit.run()
    assert f.exception(0) is exc
    assert logic._finalized
    from interpreter_kit import Cancel, OnError

    assert kit.last_events() == {Cancel(exc, up), OnError(exc, down)}


def test_feedback_is_done_when_the_handler_fails_the_stage_itself():
    kit, up, logic, down, callback, msgs = _kit()
    kit.init()
    kit.run()
    f = callback.invoke_with_feedback("fail-the-stage")
    kit.run()
    assert f.result(0) is Done  # the handler returned normally
    assert logic._finalized


# ------------------------------------------------------------------------------ running streams
def _run_flow(mat, probe, early=None):
    return (
        TestSource.probe()
        .via_mat(AsyncCallbackStage(probe, early), Keep.both)
        .to_mat(TestSink.probe(), Keep.both)
        .run(mat)
    )


def _expect(q: "queue.Queue", *msgs):
    for m in msgs:
        assert q.get(timeout=3) == m


def test_invoke_without_feedback_happy_path(mat):
    q: "queue.Queue" = queue.Queue()
    (src, callback), sink = _run_flow(mat, q.put)
    _expect(q, STARTED)
    sink.request(1)
    src.expect_request()
    for n in range(11):
        callback.invoke(f"whatever{n}")
        _expect(q, f"whatever{n}")
    src.send_complete()
    sink.expect_complete()
    _expect(q, STOPPED)


def test_invoke_with_feedback_happy_path(mat):
    q: "queue.Queue" = queue.Queue()
    (src, callback), sink = _run_flow(mat, q.put)
    _expect(q, STARTED)
    sink.request(1)
    src.expect_request()
    for n in range(11):
        f = callback.invoke_with_feedback(f"whatever{n}")
        _expect(q, f"whatever{n}")
        assert f.result(timeout=3) is Done
    src.send_complete()
    sink.expect_complete()
    _expect(q, STOPPED)


def test_fail_the_feedback_future_if_stage_is_stopped(mat):
    q: "queue.Queue" = queue.Queue()
    callback = Source.empty().via_mat(AsyncCallbackStage(q.put), Keep.right).to(Sink.ignore()).run(mat)
    _expect(q, STARTED, STOPPED)
    f = callback.invoke_with_feedback("whatever")
    with pytest.raises(StreamDetachedError):
        f.result(timeout=3)


def test_invoke_early(mat):
    q: "queue.Queue" = queue.Queue()
    src, callback = (
        TestSource.probe().via_mat(AsyncCallbackStage(q.put, lambda cb: cb.invoke("early")), Keep.both).to(Sink.ignore()).run(mat)
    )
    callback.invoke("later")
    _expect(q, STARTED, "early", "later")
    src.send_complete()
    _expect(q, STOPPED)


def test_invoke_with_feedback_early(mat):
    q: "queue.Queue" = queue.Queue()
    early_feedback = []
    src, callback = (
        TestSource.probe()
        .via_mat(AsyncCallbackStage(q.put, lambda cb: early_feedback.append(cb.invoke_with_feedback("early"))), Keep.both)
        .to(Sink.ignore())
        .run(mat)
    )
    later = callback.invoke_with_feedback("later")
    _expect(q, STARTED, "early")
    assert early_feedback[0].result(timeout=3) is Done
    _expect(q, "later")
    assert later.result(timeout=3) is Done
    src.send_complete()
    _expect(q, STOPPED)


def test_accept_concurrent_input(mat):
    q: "queue.Queue" = queue.Queue()
    src, callback = TestSource.probe().via_mat(AsyncCallbackStage(q.put), Keep.both).to(Sink.ignore()).run(mat)
    feedbacks = [None] * 100
    start = threading.Barrier(10)

    def invoker(k):
        start.wait(timeout=3)
        for n in range(k, 100, 10):
            feedbacks[n] = callback.invoke_with_feedback(str(n))

    threads = [threading.Thread(target=invoker, args=(k,)) for k in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=3)
    _expect(q, STARTED)
    assert all(f.result(timeout=3) is Done for f in feedbacks)
    assert {q.get(timeout=3) for _ in range(100)} == {str(n) for n in range(100)}
    src.send_complete()
    _expect(q, STOPPED)


def test_fail_the_feedback_if_the_handler_throws(mat):
    q: "queue.Queue" = queue.Queue()
    src, callback = TestSource.probe().via_mat(AsyncCallbackStage(q.put), Keep.both).to(Sink.ignore()).run(mat)
    _expect(q, STARTED)
    assert callback.invoke_with_feedback("happy-case").result(timeout=3) is Done
    _expect(q, "happy-case")
    exc = Boom("oh my gosh, whale of a wash!")
    f = callback.invoke_with_feedback(exc)
    assert f.exception(timeout=3) is exc
    assert src.expect_cancellation() is exc


def test_fail_the_feedback_if_the_stage_was_failed_and_stopped(mat):
    q: "queue.Queue" = queue.Queue()
    callback = Source.empty().via_mat(AsyncCallbackStage(q.put), Keep.right).to(Sink.ignore()).run(mat)
    _expect(q, STARTED, STOPPED)
    with pytest.raises(StreamDetachedError):
        callback.invoke_with_feedback("fail-the-stage").result(timeout=3)


class ManyCallbacksSource(GraphStage):
    def __init__(self, probe, n=11):
        self.out = Outlet("out")
        self.shape = SourceShape(self.out)
        self.probe = probe
        self.n = n

    def create_logic_and_materialized_value(self, attributes):
        stage = self

        class Logic(GraphStageLogic):
            def __init__(self):
                super().__init__(stage.shape)
                self.callbacks = [self.get_async_callback(stage.probe) for _ in range(stage.n)]
                self.set_handler(stage.out, OutHandler(on_pull=lambda: None))

        logic = Logic()
        return logic, logic.callbacks


def test_behave_with_multiple_async_callbacks(mat):
    q: "queue.Queue" = queue.Queue()
    callbacks, sink = Source.from_graph(ManyCallbacksSource(q.put)).to_mat(TestSink.probe(), Keep.both).run(mat)
    happy = [callback.invoke_with_feedback("bö") for callback in callbacks]
    assert all(f.result(timeout=3) is Done for f in happy)
    assert [q.get(timeout=3) for _ in callbacks] == ["bö"] * len(callbacks)

    first_half = [cb.invoke_with_feedback("ba") for cb in callbacks[:4]]
    sink.cancel()  # cancel in the middle
    other_half = [cb.invoke_with_feedback("ba") for cb in callbacks[4:]]
    done, not_done = wait(first_half + other_half, timeout=3)
    assert not not_done
    for f in done:
        exc = f.exception()
        assert exc is None or isinstance(exc, StreamDetachedError)
        if exc is None:
            assert f.result() is Done


def test_invocations_racing_with_the_start_stay_behind_the_buffered_ones():
    """An invoke from another thread while the stage is being attached must not overtake the
    invocations buffered before the start."""
    kit, up, logic, down, callback, msgs = _kit(early=lambda cb: cb.invoke("early"))
    original_post = kit.host.post
    racer = []

    def post(fn, *args):
        if not racer:
            # just as the buffered invocation is handed over, another thread invokes
            t = threading.Thread(target=callback.invoke, args=("later",))
            racer.append(t)
            t.start()
            t.join(timeout=0.05)  # it must not get through before the hand-over is complete
        original_post(fn, *args)

    kit.host.post = post
    kit.init()
    racer[0].join(timeout=3)
    kit.run()
    assert msgs == [STARTED, "early", "later"]
