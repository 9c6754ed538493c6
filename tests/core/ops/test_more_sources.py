"""Source.cycle, Source.iterate, Source.maybe: ported from Pekko's SourceSpec ("Cycle Source", "Iteratee
Source") and MaybeSourceSpec (every case but those needing ``Sink.asPublisher``, replaced by probes);
plus supervision of the iterator sources, a failing factory, and build-time validation."""
from __future__ import annotations

from concurrent.futures import InvalidStateError

import pytest
from ops_kit import TE, fmat  # noqa: F401 - fmat is a fixture

from atoll import Attributes, Keep, KillSwitches, Materializer, Sink, Source, Supervision
from atoll.errors import AbruptStageTerminationError
from atoll._impl.ops.more_sources import MaybePromise
from atoll.testkit import TestSink


# ---------------------------------------------------------------------------------------------- cycle
def test_cycle_continuously_generates_the_same_sequence(fmat):
    got = Source.cycle(lambda: iter([1, 2, 3])).grouped(9).run_with(Sink.head(), fmat).result(3)
    assert got == [1, 2, 3, 1, 2, 3, 1, 2, 3]


def test_cycle_throws_in_case_of_empty_iterator(fmat):
    with pytest.raises(ValueError, match="empty iterator"):
        Source.cycle(lambda: iter([])).run_with(Sink.head(), fmat).result(3)


def test_cycle_fails_when_a_later_cycle_is_empty(fmat):
    rounds = iter([[1, 2], [3], []])
    p = Source.cycle(lambda: next(rounds)).run_with(TestSink.probe(), fmat)
    p.request(10).expect_next(1, 2, 3)
    assert isinstance(p.expect_error(), ValueError)


def test_cycle_calls_the_factory_again_per_cycle(fmat):
    calls = []

    def factory():
        calls.append(1)
        return [len(calls)]

    assert Source.cycle(factory).take(3).run_with(Sink.seq(), fmat).result(3) == [1, 2, 3]


def test_cycle_factory_failure_fails_the_stream(fmat):
    def factory():
        raise TE("factory")

    with pytest.raises(TE):
        Source.cycle(factory).run_with(Sink.seq(), fmat).result(3)


# ---------------------------------------------------------------------------------------------- iterate
def test_iterate_properly(fmat):
    got = Source.iterate(0, lambda x: x + 1).take(10).run_with(Sink.seq(), fmat).result(3)
    assert got == list(range(10))


def test_iterate_with_has_next(fmat):
    got = Source.iterate(0, lambda x: x + 1, has_next=lambda x: x < 4).run_with(Sink.seq(), fmat).result(3)
    assert got == [0, 1, 2, 3]


def test_iterate_can_generate_an_empty_sequence(fmat):
    assert Source.iterate(0, lambda x: x + 1, lambda x: False).run_with(Sink.seq(), fmat).result(3) == []


def test_iterate_properly_like_iterator_iterate(fmat):
    got = Source.iterate(False, lambda b: not b).grouped(10).run_with(Sink.head(), fmat).result(3)
    assert got == [False, True] * 5


def test_iterate_function_failure_fails_the_stream(fmat):
    def fn(x):
        if x == 2:
            raise TE("fn")
        return x + 1

    p = Source.iterate(0, fn).run_with(TestSink.probe(), fmat)
    p.request(10).expect_next(0, 1, 2)
    assert p.expect_error() == TE("fn")


def test_iterate_restart_starts_over_from_the_seed(fmat):
    def fn(x):
        if x == 2:
            raise TE("fn")
        return x + 1

    p = (Source.iterate(0, fn).with_attributes(Attributes.supervision_strategy(Supervision.restarting_decider))
         .run_with(TestSink.probe(), fmat))
    p.request(6).expect_next(0, 1, 2, 0, 1, 2)
    p.cancel()


def test_validation():
    with pytest.raises(TypeError, match="Source.cycle: argument 'factory' must be callable"):
        Source.cycle([1, 2])
    with pytest.raises(TypeError, match="Source.iterate: argument 'fn' must be callable"):
        Source.iterate(0, None)
    with pytest.raises(TypeError, match="Source.iterate: argument 'has_next' must be callable"):
        Source.iterate(0, abs, 3)
    with pytest.raises(ValueError, match="Source.iterate: argument 'seed' must not be None"):
        Source.iterate(None, abs)


# ---------------------------------------------------------------------------------------------- maybe
def test_maybe_completes_promise_with_none_when_stream_cancels(fmat):
    promise, p = Source.maybe().to_mat(TestSink.probe(), Keep.both).run(fmat)
    assert isinstance(promise, MaybePromise)
    p.request(1000)
    p.expect_no_message(0.05)
    p.cancel()
    assert promise.result(3) is None


def test_maybe_completes_promise_with_none_when_stream_cancels_with_a_failure_cause(fmat):
    (promise, switch), done = (Source.maybe().via_mat(KillSwitches.single(), Keep.both)
                               .to_mat(Sink.ignore(), Keep.both).run(fmat))
    switch.abort(TE("Boom"))
    assert promise.result(3) is None
    with pytest.raises(TE):
        done.result(3)


def test_maybe_allows_external_triggering_of_empty_completion(fmat):
    promise, count = (Source.maybe().filter(lambda x: False).to_mat(Sink.fold(0, lambda a, x: a + 1), Keep.both)
                      .run(fmat))
    assert promise.try_complete(None) is True
    assert count.result(3) == 0


def test_maybe_allows_external_triggering_of_empty_completion_when_there_was_no_demand(fmat):
    promise, p = Source.maybe().to_mat(TestSink.probe(), Keep.both).run(fmat)
    p.ensure_subscription()
    assert promise.try_complete(None) is True
    p.expect_complete()


def test_maybe_allows_external_triggering_of_non_empty_completion(fmat):
    promise, head = Source.maybe().to_mat(Sink.head(), Keep.both).run(fmat)
    assert promise.try_complete(6) is True
    assert head.result(3) == 6
    assert promise.try_complete(7) is False
    with pytest.raises(InvalidStateError):
        promise.set_result(7)


def test_maybe_value_arriving_before_demand_waits_for_it(fmat):
    promise, p = Source.maybe().to_mat(TestSink.probe(), Keep.both).run(fmat)
    promise.set_result(6)
    p.expect_no_message(0.05)
    p.request(1).expect_next(6)
    p.expect_complete()


def test_maybe_allows_external_triggering_of_on_error(fmat):
    promise, count = Source.maybe().to_mat(Sink.fold(0, lambda a, x: a + 1), Keep.both).run(fmat)
    assert promise.try_fail(TE("Boom")) is True
    with pytest.raises(TE, match="Boom"):
        count.result(3)
    assert promise.done() and promise.exception() == TE("Boom")


def test_maybe_each_materialization_has_its_own_promise(fmat):
    src = Source.maybe()
    for _ in range(2):  # each materialization has its own promise
        promise, head = src.to_mat(Sink.head_option(), Keep.both).run(fmat)
        promise.set_result("x")
        assert head.result(3) == "x"


def test_maybe_promise_fails_when_materializer_is_shut_down():
    m = Materializer.local()
    promise, p = Source.maybe().to_mat(TestSink.probe(), Keep.both).run(m)
    p.ensure_subscription()
    m.shutdown()
    with pytest.raises(AbruptStageTerminationError):
        promise.result(3)


def test_maybe_promise_copy_keeps_the_outcome():
    import pickle

    p = MaybePromise()
    p.set_result(3)
    q = pickle.loads(pickle.dumps(p))
    assert q.result(0) == 3 and q.try_complete(4) is False
    assert pickle.loads(pickle.dumps(MaybePromise())).done() is False
