"""Sources: ported from Pekko's SourceSpec (single, empty, failed, repeat, range, unfold, iterator
sources with supervision, run, future).

Atoll specifics: ``Source.range(start, stop, step)`` has Python semantics (``stop`` exclusive), so
Pekko's ``1 to 4`` is ``range(1, 5)``. ``from_iterable``/``from_iterator`` are lazy: one element is
taken from the iterator per pull, and a Python iterator has no ``hasNext``, so a stream over a
plain iterator completes at the pull that finds it exhausted (sized sequences complete with their
last element). Resuming after a failing ``next()`` needs an iterator that survives its own
exception (``map(f, it)`` does; a generator is finished once it raised). Every case that concerns
the iterator source runs fused and unfused (``fmat``).

Added beyond the Pekko spec: laziness and a fresh iterator per materialization, a one-shot
iterator, cancelled futures, ``unfold`` returning a malformed value, and the build-time validation
of every factory.
"""
from __future__ import annotations

import itertools
from concurrent.futures import Future

import pytest
from ops_kit import TE, fmat  # noqa: F401

from atoll import Attributes, Done, Keep, Sink, Source, Supervision
from atoll.errors import PortStateError, StreamDetachedError
from atoll.testkit import TestSink

STOP = Attributes.supervision_strategy(Supervision.stopping_decider)
RESUME = Attributes.supervision_strategy(Supervision.resuming_decider)
RESTART = Attributes.supervision_strategy(Supervision.restarting_decider)


# =========================================================================== single
def test_single_produces_exactly_one_element(mat):
    assert Source.single(1).run_with(Sink.seq(), mat).result(3) == [1]


def test_single_produces_element(mat):
    probe = Source.single(1).run_with(TestSink.probe(), mat)
    probe.request(1)
    probe.expect_next(1)
    probe.expect_complete()


def test_single_waits_for_demand(mat):
    probe = Source.single("x").run_with(TestSink.probe(), mat)
    probe.expect_no_message(0.05)
    probe.request(5)
    probe.expect_next("x")
    probe.expect_complete()


def test_source_of_a_sequence_produces_its_elements(mat):
    # Pekko's "product elements with Array"
    probe = Source.from_iterable((1, 2, 3)).run_with(TestSink.probe(), mat)
    probe.request(3)
    probe.expect_next(1)
    probe.expect_next(2)
    probe.expect_next(3)
    probe.expect_complete()


# =========================================================================== empty / failed
def test_empty_completes_immediately(mat):
    Source.empty().run_with(TestSink.probe(), mat).expect_subscription_and_complete()


def test_failed_fails_immediately(mat):
    ex = TE("failed")
    probe = Source.failed(ex).run_with(TestSink.probe(), mat)
    assert probe.expect_subscription_and_error(ex) is ex


def test_failed_source_fails_every_materialization_with_its_exception(mat):
    ex = TE("again")
    src = Source.failed(ex)
    for _ in range(2):
        assert src.run_with(Sink.seq(), mat).exception(3) is ex


# =========================================================================== repeat
def test_repeat_as_long_as_it_takes(mat):
    out = Source.repeat(42).grouped(1000).run_with(Sink.head(), mat).result(3)
    assert len(out) == 1000 and set(out) == {42}


def test_repeat_rejects_none_at_construction_time():
    with pytest.raises(ValueError, match="Source.repeat.*None"):
        Source.repeat(None)


def test_repeat_example(mat):
    seen = []
    assert Source.repeat(42).take(4).run_with(Sink.foreach(seen.append), mat).result(3) is Done
    assert seen == [42, 42, 42, 42]


def test_repeat_works_when_recovered_through_recover_with_retries(mat):
    out = Source.failed(TE("boom")).recover_with_retries(1, lambda e: Source.repeat(42)).take(3)
    assert out.run_with(Sink.seq(), mat).result(3) == [42, 42, 42]


# =========================================================================== range
def test_range_emits_exclusive_ranges(mat):
    assert Source.range(1, 5).run_with(Sink.seq(), mat).result(3) == [1, 2, 3, 4]
    assert Source.range(1, 4).run_with(Sink.seq(), mat).result(3) == [1, 2, 3]


def test_range_emits_stepped_and_empty_ranges(mat):
    assert Source.range(5, 0, -2).run_with(Sink.seq(), mat).result(3) == [5, 3, 1]
    assert Source.range(1, 6, -1).run_with(Sink.seq(), mat).result(3) == []
    assert Source.range(3, 3).run_with(Sink.seq(), mat).result(3) == []


def test_range_defaults_to_step_one_and_completes_with_its_last_element(mat):
    probe = Source.range(0, 3).run_with(TestSink.probe(), mat)
    probe.request(3)
    probe.expect_next(0, 1, 2)
    probe.expect_complete()


def test_empty_range_completes_without_demand(mat):
    Source.range(0, 0).run_with(TestSink.probe(), mat).expect_subscription_and_complete()


def test_range_works_when_recovered_through_recover_with_retries(mat):
    out = Source.failed(TE("boom")).recover_with_retries(1, lambda e: Source.range(1, 4))
    assert out.run_with(Sink.seq(), mat).result(3) == [1, 2, 3]


# =========================================================================== unfold
FIB = [
    9227465, 5702887, 3524578, 2178309, 1346269, 832040, 514229, 317811, 196418, 121393, 75025,
    46368, 28657, 17711, 10946, 6765, 4181, 2584, 1597, 987, 610, 377, 233, 144, 89, 55, 34, 21, 13,
    8, 5, 3, 2, 1, 1, 0,
]  # fmt: skip


def _prepend(xs, x):
    return [x] + xs


def test_unfold_generates_a_finite_fibonacci_sequence(mat):
    def step(s):
        a, b = s
        return None if a > 10_000_000 else ((b, a + b), a)

    assert Source.unfold((0, 1), step).run_fold([], _prepend, mat).result(3) == FIB


def test_unfold_terminates_with_a_failure_if_there_is_an_exception_thrown(mat):
    t = RuntimeError("expected")

    def step(s):
        a, b = s
        if a > 10_000_000:
            raise t
        return (b, a + b), a

    assert Source.unfold((0, 1), step).run_fold([], _prepend, mat).exception(3) is t


def test_unfold_generates_an_unbounded_fibonacci_sequence(mat):
    def step(s):
        a, b = s
        return (b, a + b), a

    assert Source.unfold((0, 1), step).take(36).run_fold([], _prepend, mat).result(3) == FIB


def test_unfold_calls_its_function_once_per_pull(mat):
    calls = []

    def step(n):
        calls.append(n)
        return n + 1, n

    probe = Source.unfold(0, step).run_with(TestSink.probe(), mat)
    probe.expect_no_message(0.05)
    assert calls == []
    probe.request(2)
    probe.expect_next(0, 1)
    probe.expect_no_message(0.05)
    assert calls == [0, 1]
    probe.cancel()


def test_unfold_starts_from_its_initial_state_in_every_materialization(mat):
    src = Source.unfold(3, lambda n: None if n == 0 else (n - 1, n))
    for _ in range(2):
        assert src.run_with(Sink.seq(), mat).result(3) == [3, 2, 1]


def test_unfold_returning_a_malformed_value_fails_with_type_error(mat):
    fut = Source.unfold(0, lambda n: 42).run_with(Sink.seq(), mat)
    with pytest.raises(TypeError, match="Source.unfold"):
        fut.result(3)


# =========================================================================== iterator sources
def test_iterator_source_properly_iterates(fmat):
    src = Source.from_iterator(lambda: itertools.cycle([False, True]))
    out = src.grouped(10).run_with(Sink.head(), fmat).result(3)
    assert out == [False, True] * 5


def test_iterator_source_works_when_recovered_through_recover_with_retries(fmat):
    out = Source.failed(TE("boom")).recover_with_retries(1, lambda e: Source.from_iterator(lambda: iter([1, 2, 3])))
    assert out.run_with(Sink.seq(), fmat).result(3) == [1, 2, 3]


def _raising_at(fail, n=5):
    """A factory of iterators over 1..n whose ``next`` raises TE for the elements ``fail`` selects;
    ``map`` keeps going after its function raised, like a Scala iterator."""

    def fn(k):
        if fail(k):
            raise TE("a")
        return k

    return lambda: map(fn, range(1, n + 1))


def test_iterator_source_fails_stream_when_iterator_throws(fmat):
    fut = Source.from_iterator(_raising_at(lambda k: k >= 10, 1000)).run_with(Sink.ignore(), fmat)
    assert isinstance(fut.exception(3), TE)
    fut = Source.from_iterator(_raising_at(lambda k: True, 1000)).run_with(Sink.ignore(), fmat)
    assert isinstance(fut.exception(3), TE)


def test_iterator_source_uses_the_stopping_decider(fmat):
    src = Source.from_iterator(_raising_at(lambda k: k == 3)).with_attributes(STOP)
    assert isinstance(src.grouped(10).run_with(Sink.head(), fmat).exception(3), TE)
    # with recover
    out = src.recover_with_retries(1, lambda e: Source.empty()).grouped(10).run_with(Sink.head(), fmat)
    assert out.result(3) == [1, 2]


def test_iterator_source_uses_the_stopping_decider_when_every_element_fails(fmat):
    src = Source.from_iterator(_raising_at(lambda k: True)).with_attributes(STOP)
    assert isinstance(src.grouped(10).run_with(Sink.head_option(), fmat).exception(3), TE)
    out = src.recover_with_retries(1, lambda e: Source.empty()).grouped(10).run_with(Sink.head_option(), fmat)
    assert out.result(3) is None


def test_iterator_source_uses_the_resuming_decider(fmat):
    src = Source.from_iterator(_raising_at(lambda k: k == 3)).with_attributes(RESUME)
    assert src.grouped(10).run_with(Sink.head(), fmat).result(3) == [1, 2, 4, 5]


def test_iterator_source_uses_the_restarting_decider(fmat):
    src = Source.from_iterator(_raising_at(lambda k: k == 3)).with_attributes(RESTART)
    assert src.grouped(10).run_with(Sink.head(), fmat).result(3) == [1, 2] * 5


def test_iterator_source_supervision_applies_when_it_feeds_a_sink_directly(fmat):
    # source -> sink is the shape the fused closed loop replaces
    src = Source.from_iterator(_raising_at(lambda k: k == 3)).with_attributes(RESUME)
    assert src.run_with(Sink.seq(), fmat).result(3) == [1, 2, 4, 5]
    iterators = []

    def factory():  # the first iterator fails at 3, the next ones do not
        iterators.append(1)
        return _raising_at(lambda k: k == 3 and len(iterators) == 1)()

    src = Source.from_iterator(factory).with_attributes(RESTART)
    assert src.run_with(Sink.seq(), fmat).result(3) == [1, 2, 1, 2, 3, 4, 5]


def test_iterator_source_fails_with_the_restarting_decider_when_every_element_fails(fmat):
    src = Source.from_iterator(_raising_at(lambda k: True)).with_attributes(RESTART)
    assert isinstance(src.grouped(10).run_with(Sink.head_option(), fmat).exception(3), TE)


def test_iterator_source_completes_when_the_factory_throws_and_the_decider_resumes(fmat):
    def factory():
        raise TE("factory")

    src = Source.from_iterator(factory).with_attributes(RESUME)
    assert src.run_with(Sink.seq(), fmat).result(3) == []


def test_iterator_source_restarts_the_factory_when_it_throws_and_the_decider_restarts(fmat):
    attempts = []

    def factory():
        attempts.append(1)
        if len(attempts) == 1:
            raise TE("factory")
        return iter([1, 2, 3])

    src = Source.from_iterator(factory).with_attributes(RESTART)
    assert src.run_with(Sink.seq(), fmat).result(3) == [1, 2, 3]
    assert len(attempts) == 2


def test_iterator_source_fails_when_the_restarted_factory_throws_again(fmat):
    attempts = []

    def factory():
        attempts.append(1)
        raise TE(f"factory-{len(attempts)}")

    src = Source.from_iterator(factory).with_attributes(RESTART)
    assert isinstance(src.run_with(Sink.seq(), fmat).exception(3), TE)
    assert len(attempts) == 2


def test_iterator_source_fails_when_the_factory_throws(fmat):
    def factory():
        raise TE("factory")

    assert Source.from_iterator(factory).run_with(Sink.seq(), fmat).exception(3) == TE("factory")


def test_iterator_source_takes_no_element_ahead_of_demand(fmat):
    taken = []

    def gen():
        for i in itertools.count(1):
            taken.append(i)
            yield i

    probe = Source.from_iterator(gen).run_with(TestSink.probe(), fmat)
    probe.expect_no_message(0.05)
    assert taken == []
    probe.request(2)
    probe.expect_next(1, 2)
    probe.expect_no_message(0.05)
    assert taken == [1, 2]
    probe.cancel()


def test_iterator_source_completes_at_the_pull_that_finds_the_iterator_exhausted(fmat):
    probe = Source.from_iterator(lambda: iter([1, 2])).run_with(TestSink.probe(), fmat)
    probe.request(2)
    probe.expect_next(1, 2)
    probe.request(1)
    probe.expect_complete()


class _Countable:
    """A re-iterable that counts how often it was iterated."""

    def __init__(self, items):
        self.items = items
        self.iterations = 0

    def __iter__(self):
        self.iterations += 1
        return iter(self.items)


def test_from_iterable_iterates_afresh_per_materialization(fmat):
    data = _Countable(["a", "b", "c"])
    src = Source.from_iterable(data)
    assert data.iterations == 0  # building the blueprint does not iterate
    for n in (1, 2):
        assert src.run_with(Sink.seq(), fmat).result(3) == ["a", "b", "c"]
        assert data.iterations == n


def test_from_iterator_calls_its_factory_per_materialization(fmat):
    calls = []

    def factory():
        calls.append(1)
        return iter(range(3))

    src = Source.from_iterator(factory)
    assert calls == []
    for n in (1, 2):
        assert src.run_with(Sink.seq(), fmat).result(3) == [0, 1, 2]
        assert len(calls) == n


def test_from_iterable_of_a_one_shot_iterator_is_used_up_by_its_first_materialization(fmat):
    src = Source.from_iterable(iter([1, 2]))
    assert src.run_with(Sink.seq(), fmat).result(3) == [1, 2]
    assert src.run_with(Sink.seq(), fmat).result(3) == []


def test_from_iterable_of_a_string_emits_its_characters(fmat):
    assert Source.from_iterable("abc").run_with(Sink.seq(), fmat).result(3) == ["a", "b", "c"]


def test_from_iterable_of_an_empty_list_completes_without_demand(fmat):
    Source.from_iterable([]).run_with(TestSink.probe(), fmat).expect_subscription_and_complete()


def test_from_iterable_fails_on_a_none_element(fmat):
    fut = Source.from_iterable([1, None, 3]).run_with(Sink.seq(), fmat)
    assert isinstance(fut.exception(3), PortStateError)


# ---------------------------------------------------------------- the same behind fusible operators
# (source -> map ... -> sink is fused into a closed loop, source -> map ... -> probe into a source run)
@pytest.mark.parametrize(
    "flow",
    [lambda s: s.filter(lambda x: True), lambda s: s.map_concat(lambda x: [] if x is None else [x])],
    ids=["filter", "map_concat"],
)
def test_from_iterable_fails_on_a_none_element_behind_operators(fmat, flow):
    fut = flow(Source.from_iterable([1, None, 3])).run_with(Sink.seq(), fmat)
    assert isinstance(fut.exception(3), PortStateError)
    probe = flow(Source.from_iterable(iter([1, None, 3]))).run_with(TestSink.probe(), fmat)
    probe.request(5)
    probe.expect_next(1)
    probe.expect_error(PortStateError)


@pytest.mark.parametrize("flow", [lambda s: s.map(lambda x: x), lambda s: s.map_concat(lambda x: [x])], ids=["map", "map_concat"])
def test_iterator_source_behind_operators_fails_when_the_factory_throws(fmat, flow):
    def factory():
        raise TE("factory")

    assert flow(Source.from_iterator(factory)).run_with(Sink.seq(), fmat).exception(3) == TE("factory")
    probe = flow(Source.from_iterator(factory)).run_with(TestSink.probe(), fmat)
    probe.request(1)
    probe.expect_error(TE("factory"))


def test_iterator_source_behind_operators_calls_its_factory_at_the_first_demand(fmat):
    calls = []

    def factory():
        calls.append(1)
        return iter([1, 2])

    probe = Source.from_iterator(factory).map(lambda x: x * 10).run_with(TestSink.probe(), fmat)
    probe.expect_subscription()
    probe.expect_no_message(0.05)
    assert calls == []
    probe.request(1)
    probe.expect_next(10)
    assert calls == [1]
    probe.cancel()


@pytest.mark.parametrize("sink", ["seq", "probe"])
def test_iterator_source_failing_in_next_fails_after_the_elements_before_it_went_through(fmat, sink):
    seen = []

    def gen():
        yield 1
        yield 2
        raise TE("next")

    src = Source.from_iterator(gen).map(lambda x: seen.append(x) or x)
    if sink == "seq":
        assert src.run_with(Sink.seq(), fmat).exception(3) == TE("next")
    else:
        probe = src.run_with(TestSink.probe(), fmat)
        probe.request(10)
        probe.expect_next(1, 2)
        probe.expect_error(TE("next"))
    assert seen == [1, 2]


# =========================================================================== Source.run
def test_run_ignores_elements_and_only_signals_completion(mat):
    assert Source.from_iterator(lambda: iter(range(1, 6))).map(lambda x: x * 10).run(mat).result(3) is Done


# =========================================================================== from_future
def _completed(value=None, exc=None) -> Future:
    f: Future = Future()
    if exc is not None:
        f.set_exception(exc)
    else:
        f.set_result(value)
    return f


def test_from_future_works_as_empty_source_when_the_future_completes_with_none(mat):
    probe = Source.from_future(_completed(None)).run_with(TestSink.probe(), mat)
    probe.request(1)
    probe.expect_complete()


def test_from_future_works_with_a_successful_future(mat):
    probe = Source.from_future(_completed(42)).run_with(TestSink.probe(), mat)
    probe.request(1)
    probe.expect_next(42)
    probe.expect_complete()


def test_from_future_works_with_a_failed_future(mat):
    probe = Source.from_future(_completed(exc=RuntimeError("boom"))).run_with(TestSink.probe(), mat)
    probe.request(1)
    assert str(probe.expect_error(RuntimeError)) == "boom"


def test_from_future_works_with_a_delayed_future(mat):
    promise: Future = Future()
    probe = Source.from_future(promise).run_with(TestSink.probe(), mat)
    probe.request(1)
    probe.expect_no_message(0.05)
    promise.set_result(42)
    probe.expect_next(42)
    probe.expect_complete()


def test_from_future_waits_for_demand_with_a_completed_future(mat):
    probe = Source.from_future(_completed("v")).run_with(TestSink.probe(), mat)
    probe.expect_no_message(0.05)
    probe.request(1)
    probe.expect_next("v")
    probe.expect_complete()


def test_from_future_fails_when_the_future_is_cancelled(mat):
    promise: Future = Future()
    probe = Source.from_future(promise).run_with(TestSink.probe(), mat)
    probe.request(1)
    promise.cancel()
    probe.expect_error(StreamDetachedError)


def test_from_future_can_be_cancelled_from_downstream_before_the_future_completes(mat):
    promise: Future = Future()
    fut, probe = Source.from_future(promise).watch_termination().to_mat(TestSink.probe(), Keep.both).run(mat)
    probe.request(1)
    probe.cancel()
    assert fut.result(3) is Done
    promise.set_result(1)  # too late: nobody listens any more


# =========================================================================== build-time validation
@pytest.mark.parametrize(
    "make, exc, match",
    [
        (lambda: Source.single(None), ValueError, "Source.single"),
        (lambda: Source.repeat(None), ValueError, "Source.repeat"),
        (lambda: Source.failed("boom"), TypeError, "Source.failed"),
        (lambda: Source.failed(TE), TypeError, "Source.failed"),
        (lambda: Source.range(0, 10, 0), ValueError, "Source.range.*step"),
        (lambda: Source.range(0.5, 3), TypeError, "Source.range.*start"),
        (lambda: Source.range(0, "3"), TypeError, "Source.range.*stop"),
        (lambda: Source.range(0, 3, True), TypeError, "Source.range.*step"),
        (lambda: Source.from_iterable(5), TypeError, "Source.from_iterable"),
        (lambda: Source.from_iterable(None), TypeError, "Source.from_iterable"),
        (lambda: Source.from_iterator([1, 2]), TypeError, "Source.from_iterator.*factory"),
        (lambda: Source.unfold(0, None), TypeError, "Source.unfold.*fn"),
        (lambda: Source.from_future(42), TypeError, "Source.from_future"),
    ],
    ids=[
        "single-None",
        "repeat-None",
        "failed-str",
        "failed-class",
        "range-step0",
        "range-float",
        "range-str",
        "range-bool",
        "iterable-int",
        "iterable-None",
        "iterator-list",
        "unfold-None",
        "future-int",
    ],
)
def test_factories_reject_bad_arguments(make, exc, match):
    with pytest.raises(exc, match=match):
        make()
