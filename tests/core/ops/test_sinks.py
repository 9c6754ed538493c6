"""Sinks: ported from Pekko's SeqSinkSpec, HeadSinkSpec, LastSinkSpec, FlowForeachSpec,
FlowOnCompleteSpec and the fold/reduce/seq/foreach/ignore/contramap parts of SinkSpec.

``Sink.head_option``/``Sink.last_option`` complete with ``None`` where Pekko's give ``None: Option``;
``Sink.on_complete(fn)`` calls ``fn(None)`` on success where Pekko passes ``Success(Done)``.
Pekko's spec waits for the callbacks with a ``TestProbe``; here they put what they get into a queue.

On abrupt termination (the materializer shut down under a running stream) Pekko's specs expect
``AbruptTerminationException`` from some sinks and ``AbruptStageTerminationException`` from others;
Atoll's futures fail with either of its two counterparts, as the tests accept.

Added beyond the Pekko specs: Sink.fold, Sink.reduce over empty and failing streams, Sink.cancelled,
Sink.on_complete with a callback that raises, sinks torn down by a kill switch, reusable sink
blueprints, and the build-time validation of the sinks' functions.
"""
from __future__ import annotations

import logging
import queue

import pytest
from ops_kit import TE

from atoll import Attributes, Done, Keep, KillSwitches, Materializer, NotUsed, Sink, Source
from atoll.errors import AbruptStageTerminationError, AbruptTerminationError, NoSuchElementError
from atoll.testkit import TestSink, TestSource

ABRUPT = (AbruptTerminationError, AbruptStageTerminationError)
TWO = Attributes.input_buffer(2, 2)  # the Pekko specs' initial-input-buffer-size = 2


class Recorder:
    """What a callback received, in order (Pekko's TestProbe)."""

    def __init__(self):
        self.q: "queue.Queue" = queue.Queue()

    def __call__(self, msg):
        self.q.put(msg)

    def expect(self, timeout=3.0):
        try:
            return self.q.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("Recorder: nothing received") from None

    def expect_no_message(self, seconds=0.05):
        try:
            msg = self.q.get(timeout=seconds)
        except queue.Empty:
            return
        raise AssertionError(f"Recorder: expected nothing, got {msg!r}")


# =========================================================================== Sink.seq (SeqSinkSpec)
def test_seq_returns_a_list_from_a_source(mat):
    assert Source.range(1, 7).run_with(Sink.seq(), mat).result(3) == [1, 2, 3, 4, 5, 6]


def test_seq_returns_an_empty_list_from_an_empty_source(mat):
    assert Source.from_iterator(lambda: iter([])).run_with(Sink.seq(), mat).result(3) == []


def test_seq_fails_the_future_on_abrupt_termination():
    m = Materializer.local()
    try:
        src, fut = TestSource.probe().to_mat(Sink.seq(), Keep.both).run(m)
        src.send_next(1)
        m.shutdown()
        assert isinstance(fut.exception(3), ABRUPT)
    finally:
        m.shutdown()


def test_seq_fails_with_the_stream_failure(mat):
    ex = TE("seq")
    assert Source.failed(ex).run_with(Sink.seq(), mat).exception(3) is ex


def test_seq_collects_the_streamed_elements_into_a_list(mat):
    # SinkSpec "The seq sink"
    assert Source.range(1, 4).run_with(Sink.seq(), mat).result(3) == [1, 2, 3]


def test_seq_gives_a_new_list_per_materialization(mat):
    sink = Sink.seq()
    a = Source.range(0, 3).run_with(sink, mat).result(3)
    b = Source.range(0, 3).run_with(sink, mat).result(3)
    assert a == b == [0, 1, 2] and a is not b


# =========================================================================== Sink.head / head_option (HeadSinkSpec)
def test_head_yields_the_first_value_for_simple_source(mat):
    assert Source.range(1, 11).run_with(Sink.head(), mat).result(3) == 1


@pytest.mark.parametrize("optional", [False, True], ids=["head", "head_option"])
def test_head_yields_the_first_value_and_cancels_upstream(mat, optional):
    sink = Sink.head_option() if optional else Sink.head()
    src, fut = TestSource.probe().map(lambda x: x).to_mat(sink, Keep.both).add_attributes(TWO).run(mat)
    assert src.expect_request() == 2
    src.send_next(42)
    assert fut.result(3) == 42
    src.expect_cancellation()


@pytest.mark.parametrize("sink", [Sink.head, Sink.head_option], ids=["head", "head_option"])
def test_head_yields_the_first_error(mat, sink):
    ex = RuntimeError("ex")
    assert Source.failed(ex).run_with(sink(), mat).exception(3) is ex


def test_head_yields_no_such_element_error_for_empty_stream(mat):
    exc = Source.empty().run_with(Sink.head(), mat).exception(3)
    assert isinstance(exc, NoSuchElementError) and str(exc) == "head of empty stream"


def test_head_option_yields_none_for_empty_stream(mat):
    assert Source.empty().run_with(Sink.head_option(), mat).result(3) is None


def test_head_option_fails_on_abrupt_termination():
    m = Materializer.local()
    try:
        src, fut = TestSource.probe().to_mat(Sink.head_option(), Keep.both).run(m)
        src.expect_request()
        m.shutdown()
        assert isinstance(fut.exception(3), ABRUPT)
    finally:
        m.shutdown()


def test_head_fails_with_no_such_element_when_a_kill_switch_completes_the_stream_first(mat):
    # the kill switch completes the sink's upstream: head has no element to give
    switch, fut = Source.never().via_mat(KillSwitches.single(), Keep.right).to_mat(Sink.head(), Keep.both).run(mat)
    switch.shutdown()
    assert isinstance(fut.exception(3), NoSuchElementError)


def test_head_takes_the_first_of_an_infinite_stream(mat):
    assert Source.repeat(7).run_with(Sink.head(), mat).result(3) == 7


# =========================================================================== Sink.last / last_option (LastSinkSpec)
def test_last_yields_the_last_value(mat):
    assert Source.range(1, 11).run_with(Sink.last(), mat).result(3) == 10


@pytest.mark.parametrize("sink", [Sink.last, Sink.last_option], ids=["last", "last_option"])
def test_last_yields_the_first_error(mat, sink):
    ex = RuntimeError("ex")
    assert Source.failed(ex).run_with(sink(), mat).exception(3) is ex


def test_last_yields_no_such_element_error_for_empty_stream(mat):
    exc = Source.empty().run_with(Sink.last(), mat).exception(3)
    assert isinstance(exc, NoSuchElementError) and str(exc) == "last of empty stream"


def test_last_option_yields_the_last_value(mat):
    assert Source.range(1, 43).map(lambda x: x).run_with(Sink.last_option(), mat).result(3) == 42


def test_last_option_yields_none_for_empty_stream(mat):
    assert Source.empty().run_with(Sink.last_option(), mat).result(3) is None


def test_last_fails_with_a_failure_after_elements(mat):
    src, fut = TestSource.probe().to_mat(Sink.last(), Keep.both).run(mat)
    src.send_next_many(1, 2)
    src.send_error(TE("late"))
    assert fut.exception(3) == TE("late")


def test_last_option_fails_on_abrupt_termination():
    m = Materializer.local()
    try:
        src, fut = TestSource.probe().to_mat(Sink.last_option(), Keep.both).run(m)
        src.send_next(1)
        m.shutdown()
        assert isinstance(fut.exception(3), ABRUPT)
    finally:
        m.shutdown()


# =========================================================================== foreach (FlowForeachSpec, SinkSpec)
def test_run_foreach_calls_the_procedure_for_each_element(mat):
    rec = Recorder()
    fut = Source.range(1, 4).run_foreach(rec, mat)
    fut.add_done_callback(lambda f: rec("done"))
    assert [rec.expect() for _ in range(4)] == [1, 2, 3, "done"]
    assert fut.result(3) is Done


def test_run_foreach_completes_the_future_for_an_empty_stream(mat):
    rec = Recorder()
    assert Source.empty().run_foreach(rec, mat).result(3) is Done
    rec.expect_no_message()


def test_run_foreach_yields_the_first_error(mat):
    rec = Recorder()
    src, fut = TestSource.probe().to_mat(Sink.foreach(rec), Keep.both).run(mat)
    src.expect_request()
    rte = RuntimeError("ex")
    src.send_error(rte)
    assert fut.exception(3) is rte
    rec.expect_no_message()


def test_run_foreach_completes_future_with_failure_when_function_throws(mat):
    error = TE("Boom!")

    def boom(_):
        raise error

    assert Source.single(1).run_foreach(boom, mat).exception(3) is error


def test_foreach_function_failure_cancels_upstream(mat):
    def boom(x):
        if x == 2:
            raise TE("two")

    src, fut = TestSource.probe().to_mat(Sink.foreach(boom), Keep.both).run(mat)
    src.send_next_many(1, 2)
    assert src.expect_cancellation() == TE("two")
    assert fut.exception(3) == TE("two")


def test_foreach_sink_completes_with_done(mat):
    # SinkSpec "The foreach sink must illustrate println"
    seen = []
    assert Source.range(1, 5).run_with(Sink.foreach(seen.append), mat).result(3) is Done
    assert seen == [1, 2, 3, 4]


def test_foreach_resumes_with_the_resuming_decider(mat):
    from atoll import Supervision

    seen = []

    def maybe_boom(x):
        if x == 2:
            raise TE("two")
        seen.append(x)

    sink = Sink.foreach(maybe_boom).with_attributes(Attributes.supervision_strategy(Supervision.resuming_decider))
    assert Source.range(1, 5).run_with(sink, mat).result(3) is Done
    assert seen == [1, 3, 4]


# =========================================================================== on_complete (FlowOnCompleteSpec)
def test_on_complete_invokes_callback_on_normal_completion(mat):
    rec = Recorder()
    src = TestSource.probe().to(Sink.on_complete(rec)).add_attributes(TWO).run(mat)
    src.expect_request()
    src.send_next(42)
    rec.expect_no_message()
    src.send_complete()
    assert rec.expect() is None
    rec.expect_no_message()


def test_on_complete_yields_the_first_error(mat):
    rec = Recorder()
    src = TestSource.probe().to(Sink.on_complete(rec)).add_attributes(TWO).run(mat)
    src.expect_request()
    ex = RuntimeError("ex")
    src.send_error(ex)
    assert rec.expect() is ex
    rec.expect_no_message()


def test_on_complete_invokes_callback_for_an_empty_stream(mat):
    rec = Recorder()
    src = TestSource.probe().to(Sink.on_complete(rec)).add_attributes(TWO).run(mat)
    src.expect_request()
    src.send_complete()
    assert rec.expect() is None
    rec.expect_no_message()


def test_on_complete_invokes_callback_after_transform_and_foreach_steps(mat):
    rec = Recorder()

    def tap(x):
        rec(f"map-{x}")
        return x

    src, fut = (
        TestSource.probe().map(tap).to_mat(Sink.foreach(lambda x: rec(f"foreach-{x}")), Keep.both).add_attributes(TWO).run(mat)
    )
    fut.add_done_callback(lambda f: rec(("done", f.result())))
    src.expect_request()
    src.send_next(42)
    src.send_complete()
    assert rec.expect() == "map-42"
    assert rec.expect() == "foreach-42"
    assert rec.expect() == ("done", Done)


def test_on_complete_yields_error_on_abrupt_termination():
    rec = Recorder()
    m = Materializer.local()
    try:
        src = TestSource.probe().to(Sink.on_complete(rec)).run(m)
        src.expect_request()
        m.shutdown()
        assert isinstance(rec.expect(), ABRUPT)
        rec.expect_no_message()
    finally:
        m.shutdown()


def test_on_complete_materializes_not_used(mat):
    rec = Recorder()
    assert Source.single(1).to_mat(Sink.on_complete(rec), Keep.right).run(mat) is NotUsed
    assert rec.expect() is None


def test_on_complete_callback_that_raises_is_logged_and_does_not_break_the_stream(mat, caplog):
    rec = Recorder()

    def bad(arg):
        rec(arg)
        raise TE("callback")

    with caplog.at_level(logging.ERROR, logger="atoll"):
        Source.range(0, 3).to(Sink.on_complete(bad)).run(mat)
        assert rec.expect() is None
        # the other graphs of the materializer keep working
        assert Source.single(1).run_with(Sink.seq(), mat).result(3) == [1]
    rec.expect_no_message()


def test_on_complete_sees_a_kill_switch_abort(mat):
    rec = Recorder()
    switch = Source.never().via_mat(KillSwitches.single(), Keep.right).to(Sink.on_complete(rec)).run(mat)
    switch.abort(TE("killed"))
    assert rec.expect() == TE("killed")


# =========================================================================== fold / reduce (SinkSpec and more)
def test_fold_folds_every_element(mat):
    assert Source.range(1, 11).run_with(Sink.fold(0, lambda a, b: a + b), mat).result(3) == 55


def test_fold_of_an_empty_stream_is_its_zero(mat):
    assert Source.empty().run_with(Sink.fold("z", lambda a, b: a + b), mat).result(3) == "z"


def test_fold_fails_with_the_stream_failure(mat):
    ex = TE("fold")
    assert Source.failed(ex).run_with(Sink.fold(0, lambda a, b: a + b), mat).exception(3) is ex


def test_fold_function_failure_fails_the_future_and_cancels_upstream(mat):
    def add(a, b):
        if b == 3:
            raise TE("three")
        return a + b

    src, fut = TestSource.probe().to_mat(Sink.fold(0, add), Keep.both).run(mat)
    src.send_next_many(1, 2, 3)
    assert src.expect_cancellation() == TE("three")
    assert fut.exception(3) == TE("three")


def test_run_fold_is_sink_fold(mat):
    assert Source.range(1, 4).run_fold("", lambda acc, x: acc + str(x), mat).result(3) == "123"


def test_reduce_sums_up_1_to_10_correctly(mat):
    assert Source.range(1, 11).run_with(Sink.reduce(lambda a, b: a + b), mat).result(3) == 55


def test_reduce_of_a_single_element_is_that_element(mat):
    assert Source.single("x").run_with(Sink.reduce(lambda a, b: a + b), mat).result(3) == "x"


def test_reduce_of_an_empty_stream_fails_with_no_such_element_error(mat):
    exc = Source.empty().run_with(Sink.reduce(lambda a, b: a + b), mat).exception(3)
    assert isinstance(exc, NoSuchElementError) and str(exc) == "reduce over empty stream"


def test_reduce_fails_with_the_stream_failure(mat):
    ex = TE("reduce")
    assert Source.failed(ex).run_with(Sink.reduce(lambda a, b: a + b), mat).exception(3) is ex


# =========================================================================== ignore / cancelled
def test_ignore_completes_with_done(mat):
    assert Source.range(0, 100).run_with(Sink.ignore(), mat).result(3) is Done


def test_ignore_fails_its_materialized_value_on_abrupt_materializer_termination():
    m = Materializer.local()
    try:
        fut = Source.never().run_with(Sink.ignore(), m)
        m.shutdown()
        assert isinstance(fut.exception(3), ABRUPT)
    finally:
        m.shutdown()


def test_cancelled_cancels_upstream_at_once(mat):
    src = TestSource.probe().to(Sink.cancelled()).run(mat)
    src.expect_cancellation()


def test_cancelled_materializes_not_used_and_stops_an_infinite_source(mat):
    fut = Source.repeat(1).watch_termination().to_mat(Sink.cancelled(), Keep.both).run(mat)
    done, not_used = fut
    assert not_used is NotUsed
    assert done.result(3) is Done


# =========================================================================== contramap, reuse
def test_sink_supports_contramap(mat):
    out = Source.range(0, 10).to_mat(Sink.seq().contramap(lambda x: x + 1), Keep.right).run(mat).result(3)
    assert out == list(range(1, 11))


@pytest.mark.parametrize(
    "sink, expected",
    [
        (Sink.seq(), [0, 1, 2]),
        (Sink.head(), 0),
        (Sink.last(), 2),
        (Sink.fold(0, lambda a, b: a + b), 3),
        (Sink.reduce(lambda a, b: a * 10 + b), 12),
        (Sink.ignore(), Done),
    ],
    ids=["seq", "head", "last", "fold", "reduce", "ignore"],
)
def test_sink_blueprints_are_reusable(mat, sink, expected):
    for _ in range(2):
        assert Source.range(0, 3).run_with(sink, mat).result(3) == expected


def test_sinks_obey_backpressure(mat):
    # a probe publisher only ever gets the demand the sink signals through its input buffer
    src, fut = TestSource.probe().to_mat(Sink.seq(), Keep.both).add_attributes(TWO).run(mat)
    assert src.expect_request() == 2
    src.send_next_many(1, 2)
    assert src.expect_request() == 1
    src.send_complete()
    assert fut.result(3) == [1, 2]


# =========================================================================== build-time validation
@pytest.mark.parametrize(
    "factory",
    [
        lambda: Sink.foreach(None),
        lambda: Sink.fold(0, "add"),
        lambda: Sink.reduce(3),
        lambda: Sink.on_complete(None),
    ],
    ids=["foreach", "fold", "reduce", "on_complete"],
)
def test_sinks_reject_a_non_callable(factory):
    with pytest.raises(TypeError, match="Sink\\.\\w+: argument '(fn)' must be callable"):
        factory()
