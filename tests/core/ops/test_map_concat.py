"""map_concat: ported from Pekko's FlowMapConcatSpec, plus the iteration contract (lazy, one element
ahead, failures while iterating under supervision).

Tests taking ``fmat`` run fused and unfused. A fused map_concat (one next to other fusible stages;
a lone one between probes stays a stage of its own) draws its iterables lazily too, one element
ahead of the one handed on, as far as demand reaches: the section "lazy iteration (fused)" checks
that with a ``map`` in front.
"""
from __future__ import annotations

import itertools

import pytest
from ops_kit import RANDOM_TEST_RANGE, TE, fmat, run_script  # noqa: F401

from atoll import Attributes, Flow, Keep, Sink, Source, Supervision
from atoll.errors import PortStateError
from atoll.testkit import TestSink, TestSource

RESUME = Attributes.supervision_strategy(Supervision.resuming_decider)
SCRIPT = [([0], []), ([1], [1]), ([2], [2, 2]), ([3], [3, 3, 3]), ([2], [2, 2]), ([1], [1])]


@pytest.mark.parametrize("seed", RANDOM_TEST_RANGE)
def test_map_and_concat_script(fmat, seed):
    run_script(fmat, lambda f: f.map_concat(lambda x: [x] * x), SCRIPT, seed=seed)


@pytest.mark.parametrize("seed", RANDOM_TEST_RANGE)
def test_map_and_concat_iterator_script(fmat, seed):
    run_script(fmat, lambda f: f.map_concat(lambda x: (x for _ in range(x))), SCRIPT, seed=seed)


def test_map_and_concat_grouping_with_slow_downstream(fmat):
    groups = [list(range(i, i + 5)) for i in range(1, 21, 5)]
    probe = Source.from_iterable(groups).map_concat(lambda g: g).map(lambda x: x).run_with(TestSink.probe(), fmat)
    for i in range(1, 21):  # a downstream that asks for one element at a time
        probe.request_next(i)
    probe.request(1)
    probe.expect_complete()


def test_map_concat_grouping_with_bulk_demand(fmat):
    groups = [list(range(i, i + 5)) for i in range(1, 21, 5)]
    probe = Source.from_iterable(groups).map_concat(lambda g: g).map(lambda x: x).run_with(TestSink.probe(), fmat)
    probe.request(100)
    probe.expect_next_n(list(range(1, 21)))
    probe.expect_complete()


def _raise_on_3(make):
    def fn(x):
        if x == 3:
            raise TE("TEST")
        return make(x)

    return fn


@pytest.mark.parametrize("make", [lambda x: [x], lambda x: iter([x])], ids=["list", "iterator"])
def test_map_concat_is_able_to_resume(fmat, make):
    probe = (
        Source.range(1, 6)
        .via(Flow().map_concat(_raise_on_3(make)).with_attributes(RESUME))
        .run_with(TestSink.probe(), fmat)
    )
    probe.request(4)
    probe.expect_next(1, 2, 4, 5)
    probe.expect_complete()


def test_map_concat_fails_with_the_exception_of_fn_by_default(fmat):
    probe = Source.range(1, 6).map_concat(_raise_on_3(lambda x: [x])).run_with(TestSink.probe(), fmat)
    probe.request(5)
    probe.expect_next(1, 2)
    probe.expect_error(TE("TEST"))


def test_map_concat_completes_with_its_last_element_once_upstream_finished(fmat):
    src, sink = TestSource.probe().map_concat(lambda x: [x] * x).to_mat(TestSink.probe(), Keep.both).run(fmat)
    sink.request(1)
    src.send_next(3)
    sink.expect_next(3)
    src.send_complete()
    sink.expect_no_message(0.05)
    sink.request(2)  # exactly the elements left: completion needs no further demand
    sink.expect_next(3, 3)
    sink.expect_complete()


def test_map_concat_completes_on_upstream_finish_when_nothing_is_left(fmat):
    src, sink = TestSource.probe().map_concat(lambda x: [x] * x).to_mat(TestSink.probe(), Keep.both).run(fmat)
    sink.request(2)
    src.send_next(1)
    sink.expect_next(1)
    src.send_next(0)
    src.send_complete()
    sink.expect_complete()


def test_map_concat_cancels_upstream_when_downstream_cancels(fmat):
    src, sink = TestSource.probe().map_concat(lambda x: [x] * x).to_mat(TestSink.probe(), Keep.both).run(fmat)
    sink.request(1)
    src.send_next(3)
    sink.expect_next(3)
    sink.cancel()
    src.expect_cancellation()


def test_map_concat_rejects_none_elements(fmat):
    probe = Source.range(1, 3).map_concat(lambda x: [x, None]).run_with(TestSink.probe(), fmat)
    probe.request(5)
    probe.expect_next(1)
    probe.expect_error(PortStateError)


def test_map_concat_fails_when_fn_returns_no_iterable(fmat):
    probe = Source.range(1, 3).map_concat(lambda x: x).run_with(TestSink.probe(), fmat)
    probe.request(5)
    probe.expect_error(TypeError)


def test_map_concat_strings_are_iterables_of_characters(fmat):
    assert Source.from_iterable(["ab", "", "c"]).map_concat(lambda s: s).run_with(Sink.seq(), fmat).result(3) == ["a", "b", "c"]


# ------------------------------------------------------------------------- failures while iterating
def _failing_gen(x):
    yield x
    yield x * 10
    if x == 2:
        raise TE("iteration")
    yield x * 100


def test_map_concat_failure_while_iterating_fails_after_the_elements_before_it(fmat):
    probe = Source.range(1, 4).map_concat(_failing_gen).run_with(TestSink.probe(), fmat)
    probe.request(10)
    probe.expect_next(1, 10, 100, 2, 20)
    probe.expect_error(TE("iteration"))


def test_map_concat_resume_drops_the_rest_of_a_failing_iterable(fmat):
    probe = (
        Source.range(1, 4)
        .via(Flow().map_concat(_failing_gen).with_attributes(RESUME))
        .run_with(TestSink.probe(), fmat)
    )
    probe.request(10)
    probe.expect_next(1, 10, 100, 2, 20, 3, 30, 300)
    probe.expect_complete()


def test_map_concat_resume_after_failure_in_the_last_iterable_completes(fmat):
    src, sink = (
        TestSource.probe()
        .via(Flow().map_concat(_failing_gen).with_attributes(RESUME))
        .to_mat(TestSink.probe(), Keep.both)
        .run(fmat)
    )
    sink.request(10)
    src.send_next(2)
    sink.expect_next(2, 20)
    src.send_complete()
    sink.expect_complete()


# ------------------------------------------------------------------------- lazy iteration
def test_map_concat_iterates_lazily_one_element_ahead(fmat):
    produced = []

    def gen(x):
        for i in itertools.count():
            produced.append(i)
            yield i

    src, sink = TestSource.probe().map_concat(gen).to_mat(TestSink.probe(), Keep.both).run(fmat)
    sink.request(2)
    src.send_next(1)
    sink.expect_next(0, 1)
    sink.expect_no_message(0.05)
    assert produced == [0, 1, 2]  # the element after the last one pushed is fetched ahead
    sink.request(1)
    sink.expect_next(2)
    sink.cancel()
    src.expect_cancellation()
    assert produced == [0, 1, 2, 3]


def test_map_concat_failure_while_iterating_comes_with_the_demand_for_that_element(fmat):
    src, sink = TestSource.probe().map_concat(_failing_gen).to_mat(TestSink.probe(), Keep.both).run(fmat)
    sink.request(1)
    src.send_next(2)
    sink.expect_next(2)
    sink.expect_no_message(0.05)
    sink.request(1)
    sink.expect_next(20)
    sink.expect_no_message(0.05)
    sink.request(1)  # asks for the element whose production fails
    sink.expect_error(TE("iteration"))
    assert src.expect_cancellation() == TE("iteration")


def test_map_concat_of_unbounded_iterables_with_take(fmat):
    out = Source.from_iterable([1, 2]).map_concat(lambda x: itertools.count(x)).take(3).run_with(Sink.seq(), fmat).result(3)
    assert out == [1, 2, 3]


def test_map_concat_of_an_endless_iterable_between_fusible_stages(fmat):
    out = (Source.single(1).map(lambda x: x + 1).map_concat(lambda x: itertools.count(x)).map(lambda x: -x)
           .take(4).run_with(Sink.seq(), fmat).result(3))
    assert out == [-2, -3, -4, -5]


# ------------------------------------------------------------------------- lazy iteration (fused)
def _identity(x):
    return x


def _guarded_count(limit, produced):
    """``fn`` for map_concat: ``itertools.count(x)``, failing once more than ``limit`` elements were drawn."""

    def fn(x):
        def gen():
            for i in itertools.count(x):
                if len(produced) >= limit:
                    raise RuntimeError("map_concat iterated far ahead of demand")
                produced.append(i)
                yield i

        return gen()

    return fn


def test_fused_map_concat_of_an_unbounded_iterable_draws_only_what_take_needs(fmat):
    produced = []
    src = Source.from_iterable([1, 2]).map(_identity).map_concat(_guarded_count(100, produced))
    assert src.take(3).run_with(Sink.seq(), fmat).result(3) == [1, 2, 3]
    assert produced == [1, 2, 3, 4]  # one element ahead of the last one taken
    out = Source.single(1).map_concat(lambda x: itertools.count()).take(5).run_with(Sink.seq(), fmat).result(3)
    assert out == [0, 1, 2, 3, 4]


def test_fused_map_concat_of_an_unbounded_iterable_before_an_island_boundary(fmat):
    produced = []
    src = Source.from_iterable([1, 2]).map(_identity).map_concat(_guarded_count(100, produced)).island()
    # the channel's buffer set to 16 (without it a channel between local islands asks for 4096 ahead)
    took = src.take(3).with_attributes(Attributes.input_buffer(16, 16))
    assert took.run_with(Sink.seq(), fmat).result(3) == [1, 2, 3]
    assert len(produced) <= 40  # no further than the channel's demand (its buffer) reaches


def test_fused_map_concat_of_an_unbounded_iterable_into_a_sink_can_be_stopped(fmat):
    # a closed source -> map_concat -> sink loop over an endless iterable must still let its island
    # serve other signals between turns (here: the materializer shutting the graph down)
    fut = (
        Source.from_iterable([1])
        .map_concat(lambda x: itertools.count())
        .filter(lambda x: x < 0)
        .run_with(Sink.ignore(), fmat)
    )
    assert not fut.done()
    fmat.shutdown()
    assert fut.exception(30) is not None


def test_fused_map_concat_iterates_lazily_one_element_ahead(fmat):
    produced = []

    def gen(x):
        for i in itertools.count():
            produced.append(i)
            yield i

    src, sink = TestSource.probe().map(_identity).map_concat(gen).to_mat(TestSink.probe(), Keep.both).run(fmat)
    sink.request(2)
    src.send_next(1)
    sink.expect_next(0, 1)
    sink.expect_no_message(0.05)
    assert produced == [0, 1, 2]  # the element after the last one pushed is fetched ahead
    sink.request(1)
    sink.expect_next(2)
    sink.cancel()
    src.expect_cancellation()
    assert produced == [0, 1, 2, 3]


def test_fused_map_concat_calls_the_operators_after_it_only_for_demanded_elements(fmat):
    calls = []
    src, sink = (
        TestSource.probe()
        .map(_identity)
        .map_concat(lambda x: [x] * 4)
        .map(lambda x: calls.append(x) or x)
        .to_mat(TestSink.probe(), Keep.both)
        .run(fmat)
    )
    sink.request(1)
    src.send_next(5)
    sink.expect_next(5)
    sink.expect_no_message(0.05)
    assert calls == [5]
    sink.request(3)
    sink.expect_next(5, 5, 5)
    src.send_complete()
    sink.expect_complete()
    assert calls == [5, 5, 5, 5]


def test_fused_map_concat_failure_while_iterating_comes_with_the_demand_for_that_element(fmat):
    src, sink = TestSource.probe().map(_identity).map_concat(_failing_gen).to_mat(TestSink.probe(), Keep.both).run(fmat)
    sink.request(1)
    src.send_next(2)
    sink.expect_next(2)
    sink.expect_no_message(0.05)
    sink.request(1)
    sink.expect_next(20)
    sink.expect_no_message(0.05)
    sink.request(1)  # asks for the element whose production fails
    sink.expect_error(TE("iteration"))
    assert src.expect_cancellation() == TE("iteration")


@pytest.mark.parametrize("make", [lambda x: [x] * x, lambda x: iter([x] * x)], ids=["list", "iterator"])
def test_fused_map_concat_completes_with_its_last_element_once_upstream_finished(fmat, make):
    src, sink = TestSource.probe().map(_identity).map_concat(make).to_mat(TestSink.probe(), Keep.both).run(fmat)
    sink.request(1)
    src.send_next(3)
    sink.expect_next(3)
    src.send_complete()
    sink.expect_no_message(0.05)
    sink.request(2)  # exactly the elements left: completion needs no further demand
    sink.expect_next(3, 3)
    sink.expect_complete()


def test_fused_map_concat_over_a_sequence_completes_with_its_last_element(fmat):
    probe = Source.from_iterable([1, 2]).map_concat(lambda x: iter([x, x])).run_with(TestSink.probe(), fmat)
    probe.request(4)
    probe.expect_next(1, 1, 2, 2)
    probe.expect_complete()


# ------------------------------------------------------------------------- build time
def test_map_concat_rejects_a_non_callable_at_build_time():
    with pytest.raises(TypeError, match=r"map_concat: argument 'fn' must be callable"):
        Flow().map_concat([1, 2])
