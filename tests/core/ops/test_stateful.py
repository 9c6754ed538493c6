"""stateful_map and stateful_map_concat: ported from Pekko's FlowStatefulMapSpec and
FlowStatefulMapConcatSpec.

Atoll's ``stateful_map(create, fn, on_complete)``: ``fn(state, elem)`` returns ``(state, out)`` and an
``out`` of None emits nothing (Pekko's collect-on-Option idiom needs no extra operator);
``on_complete(state)`` returns a last element or None.
"""
from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest
from ops_kit import RANDOM_TEST_RANGE, TE, run_script

from atoll import Attributes, Flow, Keep, Materializer, Sink, Source, Supervision
from atoll.errors import AbruptStageTerminationError, AbruptTerminationError
from atoll.testkit import TestSink, TestSource

EX = TE("TEST")
RESUME = Attributes.supervision_strategy(Supervision.resuming_decider)
RESTART = Attributes.supervision_strategy(Supervision.restarting_decider)
STOP = Attributes.supervision_strategy(Supervision.stopping_decider)


class Gate:
    """Pekko's BeenCalledTimesGate: ``mark()`` may be called ``n`` times, ``ensure()`` checks it was."""

    def __init__(self, n: int = 1):
        self.n = n
        self.calls = 0
        self.lock = threading.Lock()

    def mark(self):
        with self.lock:
            if self.calls == self.n:
                raise AssertionError(f"called more than {self.n} times")
            self.calls += 1

    def ensure(self):
        assert self.calls == self.n, f"expected {self.n} calls, got {self.calls}"


def _sum_pairs(agg, elem):
    return agg + elem, (agg, elem)


def _closer(gate, result=None, done: Future = None):
    def on_complete(state):
        gate.mark()
        if done is not None and not done.done():
            done.set_result(state)
        return result(state) if callable(result) else result

    return on_complete


# =========================================================================== stateful_map
def test_stateful_map_works_in_the_happy_case(mat):
    gate = Gate()
    probe = Source.from_iterable([1, 2, 3, 4, 5]).stateful_map(lambda: 0, _sum_pairs, _closer(gate)).run_with(TestSink.probe(), mat)
    probe.ensure_subscription().request(6)
    probe.expect_next((0, 1), (1, 2), (3, 3), (6, 4), (10, 5))
    probe.expect_complete()
    gate.ensure()


def test_stateful_map_can_remember_the_state_when_complete(mat):
    gate = Gate()

    def group3(state, elem):
        state = state + [elem]
        return ([], state) if len(state) == 3 else (state, [])

    probe = (
        Source.range(1, 11)
        .stateful_map(lambda: [], group3, _closer(gate, lambda s: s))
        .map_concat(lambda xs: xs)
        .run_with(TestSink.probe(), mat)
    )
    probe.ensure_subscription().request(10)
    probe.expect_next_n(list(range(1, 11)))
    probe.expect_complete()
    gate.ensure()


def _fail_on(pred):
    def fn(agg, elem):
        if pred(elem):
            raise EX
        return agg + elem, (agg, elem)

    return fn


def test_stateful_map_is_able_to_resume(mat):
    gate = Gate()
    probe = (
        Source.from_iterable([1, 2, 3, 4, 5])
        .via(Flow().stateful_map(lambda: 0, _fail_on(lambda e: e % 2 == 0), _closer(gate)).with_attributes(RESUME))
        .run_with(TestSink.probe(), mat)
    )
    probe.request(5)
    probe.expect_next((0, 1), (1, 3), (4, 5))
    probe.expect_complete()
    gate.ensure()


def test_stateful_map_is_able_to_restart(mat):
    gate = Gate(2)  # once for the restart, once at completion
    probe = (
        Source.from_iterable([1, 2, 3, 4, 5])
        .via(Flow().stateful_map(lambda: 0, _fail_on(lambda e: e % 3 == 0), _closer(gate)).with_attributes(RESTART))
        .run_with(TestSink.probe(), mat)
    )
    probe.request(5)
    probe.expect_next((0, 1), (1, 2), (0, 4), (4, 5))
    probe.expect_complete()
    gate.ensure()


def test_stateful_map_is_able_to_stop(mat):
    gate = Gate()
    probe = (
        Source.from_iterable([1, 2, 3, 4, 5])
        .via(Flow().stateful_map(lambda: 0, _fail_on(lambda e: e % 3 == 0), _closer(gate)).with_attributes(STOP))
        .run_with(TestSink.probe(), mat)
    )
    probe.request(5)
    probe.expect_next((0, 1), (1, 2))
    probe.expect_error(EX)
    gate.ensure()


def test_stateful_map_fails_on_upstream_failure(mat):
    gate = Gate()
    src, sink = TestSource.probe().stateful_map(lambda: 0, _sum_pairs, _closer(gate)).to_mat(TestSink.probe(), Keep.both).run(mat)
    sink.request(5)
    for elem, out in [(1, (0, 1)), (2, (1, 2)), (3, (3, 3)), (4, (6, 4))]:
        src.send_next(elem)
        sink.expect_next(out)
    src.send_error(EX)
    sink.expect_error(EX)
    gate.ensure()


def test_stateful_map_defers_upstream_failure_and_remembers_state(mat):
    gate = Gate()
    src, sink = (
        TestSource.probe()
        .stateful_map(lambda: 0, _sum_pairs, _closer(gate, lambda s: (s, -1)))
        .to_mat(TestSink.probe(), Keep.both)
        .run(mat)
    )
    sink.request(5)
    for elem, out in [(1, (0, 1)), (2, (1, 2)), (3, (3, 3)), (4, (6, 4))]:
        src.send_next(elem)
        sink.expect_next(out)
    src.send_error(EX)
    sink.expect_next((10, -1))
    sink.expect_error(EX)
    gate.ensure()


def test_stateful_map_cancels_upstream_when_downstream_cancels(mat):
    gate = Gate()
    done = Future()
    src = (
        TestSource.probe()
        .stateful_map(lambda: 100, _sum_pairs, _closer(gate, lambda s: (s, -1), done))
        .to_mat(Sink.cancelled(), Keep.left)
        .run(mat)
    )
    src.expect_cancellation()
    assert done.result(3) == 100
    gate.ensure()


def test_stateful_map_cancels_upstream_with_the_cause_when_downstream_fails(mat):
    gate = Gate()
    done = Future()
    src, sink = (
        TestSource.probe()
        .stateful_map(lambda: 100, _sum_pairs, _closer(gate, lambda s: (s, -1), done))
        .to_mat(TestSink.probe(), Keep.both)
        .run(mat)
    )
    sink.cancel(EX)
    assert src.expect_cancellation() == EX
    assert done.result(3) == 100
    gate.ensure()


def test_stateful_map_calls_on_complete_on_abrupt_materializer_termination():
    gate = Gate()
    done = Future()
    m = Materializer.local()
    try:
        fut = (
            Source.never()
            .stateful_map(lambda: -1, lambda s, e: (e, e), _closer(gate, None, done))
            .run_with(Sink.seq(), m)
        )
        m.shutdown()
        with pytest.raises((AbruptStageTerminationError, AbruptTerminationError)):
            fut.result(3)
        assert done.result(3) == -1
    finally:
        m.shutdown()
    gate.ensure()


def test_stateful_map_calls_on_complete_when_fn_stops_the_stage(mat):
    gate = Gate()
    done = Future()

    def fn(state, elem):
        raise EX

    fut = Source.single(1).stateful_map(lambda: -1, fn, _closer(gate, None, done)).run_with(Sink.ignore(), mat)
    assert done.result(3) == -1
    with pytest.raises(TE):
        fut.result(3)
    gate.ensure()


def test_stateful_map_is_able_to_be_used_as_zip_with_index(mat):
    gate = Gate()
    probe = (
        Source.from_iterable(["A", "B", "C", "D"])
        .stateful_map(lambda: 0, lambda i, e: (i + 1, (e, i)), _closer(gate))
        .run_with(TestSink.probe(), mat)
    )
    probe.request(4)
    probe.expect_next(("A", 0), ("B", 1), ("C", 2), ("D", 3))
    probe.expect_complete()
    gate.ensure()


def test_stateful_map_is_able_to_be_used_as_buffer_until_changed(mat):
    gate = Gate()

    def fn(buffer, elem):
        if buffer and buffer[0] != elem:
            return [elem], buffer
        return buffer + [elem], []

    probe = (
        Source.from_iterable(["A", "B", "B", "C", "C", "C", "D"])
        .stateful_map(lambda: [], fn, _closer(gate, lambda b: b))
        .filter(lambda b: len(b) > 0)
        .run_with(TestSink.probe(), mat)
    )
    probe.request(4)
    probe.expect_next(["A"], ["B", "B"], ["C", "C", "C"], ["D"])
    probe.expect_complete()
    gate.ensure()


def test_stateful_map_is_able_to_be_used_as_distinct_until_changed(mat):
    gate = Gate()
    probe = (
        Source.from_iterable(["A", "B", "B", "C", "C", "C", "D"])
        .stateful_map(lambda: None, lambda last, e: (e, None if last == e else e), _closer(gate))
        .run_with(TestSink.probe(), mat)
    )
    probe.request(4)
    probe.expect_next("A", "B", "C", "D")
    probe.expect_complete()
    gate.ensure()


def test_stateful_map_does_not_call_on_complete_twice_if_fn_fails(mat):
    closed = []

    def fn(state, elem):
        raise TE("failing read")

    probe = Source.repeat(1).stateful_map(lambda: "opening resource", fn, lambda s: closed.append(s)).run_with(TestSink.probe(), mat)
    probe.request(1)
    probe.expect_error(TE("failing read"))
    assert closed == ["opening resource"]


def test_stateful_map_does_not_call_on_complete_twice_if_fn_and_on_complete_fail(mat):
    closed = []

    def fn(state, elem):
        raise TE("failing read")

    def on_complete(state):
        closed.append(state)
        if len(closed) == 1:
            raise TE("boom")
        return None

    probe = Source.repeat(1).stateful_map(lambda: "opening resource", fn, on_complete).run_with(TestSink.probe(), mat)
    probe.request(1)
    probe.expect_error(TE("boom"))
    assert closed == ["opening resource"]


def test_stateful_map_does_not_call_on_complete_twice_on_cancel_when_on_complete_fails(mat):
    closed = []

    def on_complete(state):
        closed.append(state)
        raise TE("boom")

    src, sink = (
        TestSource.probe()
        .via_mat(Flow().stateful_map(lambda: 23, lambda s, e: (s, e), on_complete), Keep.left)
        .to_mat(TestSink.probe(), Keep.both)
        .run(mat)
    )
    sink.request(1)
    src.send_next(1)
    sink.expect_next(1)
    sink.cancel()
    src.expect_cancellation()
    assert closed == [23]


def test_stateful_map_does_not_call_on_complete_twice_if_it_fails_on_upstream_complete(mat):
    closed = []

    def on_complete(state):
        closed.append(state)
        raise TE("boom")

    src, sink = (
        TestSource.probe()
        .stateful_map(lambda: "opening resource", lambda s, v: (s, v), on_complete)
        .to_mat(TestSink.probe(), Keep.both)
        .run(mat)
    )
    sink.request(1)
    src.send_next(1)
    sink.expect_next(1)
    sink.request(1)
    src.send_complete()
    sink.expect_error(TE("boom"))
    assert closed == ["opening resource"]


def test_stateful_map_emits_the_on_complete_value_before_restarting(mat):
    counter = [0]

    def create():
        counter[0] += 1
        return counter[0]

    def fn(s, elem):
        if elem == "boom":
            raise TE("boom")
        return s, f"{elem}{s}"

    src, sink = (
        TestSource.probe()
        .via_mat(Flow().stateful_map(create, fn, lambda s: "onClose"), Keep.left)
        .with_attributes(RESTART)
        .to_mat(TestSink.probe(), Keep.both)
        .run(mat)
    )
    sink.request(1)
    src.send_next("one")
    sink.expect_next("one1")
    sink.request(1)
    src.send_next("boom")
    sink.expect_next("onClose")
    sink.request(1)
    src.send_next("two")
    sink.expect_next("two2")
    sink.cancel()
    src.expect_cancellation()


def test_stateful_map_allows_none_state(mat):
    fut = Source.single("one").stateful_map(lambda: None, lambda s, t: (s, t), lambda s: None).run_with(Sink.head(), mat)
    assert fut.result(3) == "one"


def test_stateful_map_allows_none_next_state(mat):
    fut = Source.single("one").stateful_map(lambda: "state", lambda s, t: (None, t), lambda s: None).run_with(Sink.head(), mat)
    assert fut.result(3) == "one"


def test_stateful_map_allows_none_state_on_restart(mat):
    counter = [0]

    def create():
        counter[0] += 1
        return "state" if counter[0] == 1 else None

    def fn(s, t):
        raise TE("boom")

    fut = (
        Source.single("one")
        .via(Flow().stateful_map(create, fn, lambda s: None).with_attributes(RESTART))
        .run_with(Sink.seq(), mat)
    )
    assert fut.result(3) == []
    assert counter[0] == 2


def test_stateful_map_without_on_complete(mat):
    out = Source.range(1, 5).stateful_map(lambda: 0, lambda s, e: (s + e, s + e)).run_with(Sink.seq(), mat).result(3)
    assert out == [1, 3, 6, 10]


def test_stateful_map_creates_fresh_state_per_materialization(mat):
    flow = Flow().stateful_map(lambda: [], lambda s, e: (s + [e], len(s) + 1))
    for _ in range(2):
        assert Source.range(0, 3).via(flow).run_with(Sink.seq(), mat).result(3) == [1, 2, 3]


def test_stateful_map_fails_when_fn_returns_no_pair(mat):
    probe = Source.single(1).stateful_map(lambda: 0, lambda s, e: e).run_with(TestSink.probe(), mat)
    probe.request(1)
    exc = probe.expect_error(TypeError)
    assert "stateful_map: fn must return (new_state, element)" in str(exc)


def test_stateful_map_rejects_bad_arguments_at_build_time():
    with pytest.raises(TypeError, match=r"stateful_map: argument 'create' must be callable"):
        Flow().stateful_map(0, lambda s, e: (s, e))
    with pytest.raises(TypeError, match=r"stateful_map: argument 'fn' must be callable"):
        Flow().stateful_map(lambda: 0, None)
    with pytest.raises(TypeError, match=r"stateful_map: argument 'on_complete' must be callable"):
        Flow().stateful_map(lambda: 0, lambda s, e: (s, e), "done")


# =========================================================================== stateful_map_concat
def _emit_prev_times():
    prev = [None]

    def fn(x):
        p, prev[0] = prev[0], x
        return [] if p is None else [x] * p

    return fn


@pytest.mark.parametrize("seed", RANDOM_TEST_RANGE)
def test_stateful_map_concat_works_in_the_happy_case(mat, seed):
    script = [([2], []), ([1], [1, 1]), ([3], [3]), ([6], [6, 6, 6])]
    run_script(mat, lambda f: f.stateful_map_concat(_emit_prev_times), script, seed=seed)


def _failing_on_multiple_of_3():
    inner = _emit_prev_times()

    def fn(x):
        if x % 3 == 0:
            raise EX
        return inner(x)

    return fn


def test_stateful_map_concat_is_able_to_restart(mat):
    probe = (
        Source.from_iterable([2, 1, 3, 4, 1])
        .via(Flow().stateful_map_concat(_failing_on_multiple_of_3).with_attributes(RESTART))
        .run_with(TestSink.probe(), mat)
    )
    probe.request(2)
    probe.expect_next(1, 1)
    probe.request(4)
    probe.expect_next(1, 1, 1, 1)
    probe.expect_complete()


def test_stateful_map_concat_is_able_to_resume(mat):
    probe = (
        Source.from_iterable([2, 1, 3, 4, 1])
        .via(Flow().stateful_map_concat(_failing_on_multiple_of_3).with_attributes(RESUME))
        .run_with(TestSink.probe(), mat)
    )
    probe.request(2)
    probe.expect_next(1, 1)
    probe.request_next(4)
    probe.request(4)
    probe.expect_next(1, 1, 1, 1)
    probe.expect_complete()


class Grouped2:
    """Pekko's StatefulMapConcatAccumulator: a callable with an ``on_complete`` for the rest."""

    def __init__(self):
        self.buffer = []

    def __call__(self, elem):
        self.buffer.append(elem)
        if len(self.buffer) < 2:
            return []
        out, self.buffer = self.buffer, []
        return out

    def on_complete(self):
        out, self.buffer = self.buffer, []
        return out


def test_stateful_map_concat_is_able_to_handle_the_on_complete_signal(mat):
    probe = Source.from_iterable([1, 2, 3, 4, 5]).stateful_map_concat(Grouped2).run_with(TestSink.probe(), mat)
    probe.request(5)
    probe.expect_next(1, 2, 3, 4, 5)
    probe.expect_complete()


def test_stateful_map_concat_emits_on_complete_elements_after_the_pending_ones(mat):
    class Accumulate:
        def __init__(self):
            self.seen = []

        def __call__(self, x):
            self.seen.append(x)
            return [x] * x

        def on_complete(self):
            return [sum(self.seen)]

    src, sink = TestSource.probe().stateful_map_concat(Accumulate).to_mat(TestSink.probe(), Keep.both).run(mat)
    sink.request(1)
    src.send_next(2)
    sink.expect_next(2)
    src.send_next(1)
    src.send_complete()
    sink.request(3)
    sink.expect_next(2, 1, 3)
    sink.expect_complete()


def test_stateful_map_concat_calls_the_factory_once_per_materialization(mat):
    calls = []

    def factory():
        calls.append(1)
        count = [0]

        def fn(x):
            count[0] += 1
            return [count[0]]

        return fn

    flow = Flow().stateful_map_concat(factory)
    for _ in range(2):
        assert Source.range(0, 3).via(flow).run_with(Sink.seq(), mat).result(3) == [1, 2, 3]
    assert len(calls) == 2


def test_stateful_map_concat_fails_when_the_factory_returns_a_non_callable(mat):
    probe = Source.single(1).stateful_map_concat(lambda: [1]).run_with(TestSink.probe(), mat)
    exc = probe.expect_subscription_and_error(TypeError)
    assert "factory must return a callable" in str(exc)


def test_stateful_map_concat_rejects_a_non_callable_factory_at_build_time():
    with pytest.raises(TypeError, match=r"stateful_map_concat: argument 'factory' must be callable"):
        Flow().stateful_map_concat([lambda x: [x]])
