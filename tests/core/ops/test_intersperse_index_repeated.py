"""intersperse, zip_with_index and drop_repeated: ported from Pekko's FlowIntersperseSpec,
FlowZipWithIndexSpec and FlowDropRepeatedSpec."""
from __future__ import annotations

import pytest
from ops_kit import TE

from atoll import Attributes, Flow, Keep, Sink, Source, Supervision
from atoll.testkit import TestSink, TestSource

RESUME = Attributes.supervision_strategy(Supervision.resuming_decider)
RESTART = Attributes.supervision_strategy(Supervision.restarting_decider)


def _digits():
    return Source.from_iterable([1, 2, 3]).map(str)


# =========================================================================== intersperse
def test_intersperse_injects_an_element_between_existing_elements(mat):
    probe = _digits().intersperse(",").run_with(TestSink.probe(), mat)
    probe.expect_subscription()
    assert "".join(probe.to_strict(1)) == "1,2,3"


def test_intersperse_injects_between_existing_elements_when_downstream_is_fold(mat):
    assert _digits().intersperse(",").run_fold("", lambda a, b: a + b, mat).result(3) == "1,2,3"


def test_intersperse_injects_between_existing_elements_and_surrounds_with_brackets(mat):
    probe = _digits().intersperse("[", ",", "]").run_with(TestSink.probe(), mat)
    assert "".join(probe.to_strict(1)) == "[1,2,3]"


def test_intersperse_can_prepend_only(mat):
    # Pekko demonstrates this with Source.single(">> ") ++ ...intersperse(","); Atoll's
    # intersperse(start, inject, end) takes None for a missing start or end
    probe = _digits().intersperse(">> ", ",", None).run_with(TestSink.probe(), mat)
    assert probe.to_strict(1) == [">> ", "1", ",", "2", ",", "3"]


def test_intersperse_can_append_only(mat):
    probe = _digits().intersperse(None, ",", " <<").run_with(TestSink.probe(), mat)
    assert probe.to_strict(1) == ["1", ",", "2", ",", "3", " <<"]


def test_intersperse_surrounds_an_empty_stream_with_brackets(mat):
    probe = Source.from_iterable([]).intersperse("[", ",", "]").run_with(TestSink.probe(), mat)
    probe.expect_subscription()
    assert "".join(probe.to_strict(1)) == "[]"


def test_intersperse_surrounds_a_single_element_stream_with_brackets(mat):
    probe = Source.from_iterable([1]).map(str).intersperse("[", ",", "]").run_with(TestSink.probe(), mat)
    probe.expect_subscription()
    assert "".join(probe.to_strict(1)) == "[1]"


def test_intersperse_of_an_empty_stream_without_start_and_end_emits_nothing(mat):
    assert Source.empty().intersperse(",").run_with(Sink.seq(), mat).result(3) == []


def test_intersperse_completes_the_stage_when_the_source_has_been_completed(mat):
    src, sink = TestSource.probe().intersperse(",").to_mat(TestSink.probe(), Keep.both).run(mat)
    sink.request(10)
    src.send_next("a").send_next("b").send_complete()
    sink.expect_next("a", ",", "b")
    sink.expect_complete()


def test_intersperse_completes_the_stage_when_the_sink_has_been_cancelled(mat):
    src, sink = TestSource.probe().intersperse(",").to_mat(TestSink.probe(), Keep.both).run(mat)
    sink.request(10)
    src.send_next("a").send_next("b")
    sink.expect_next("a", ",")
    sink.cancel()
    src.expect_cancellation()


def test_intersperse_emits_one_element_per_demand(mat):
    src, sink = TestSource.probe().intersperse("[", ",", "]").to_mat(TestSink.probe(), Keep.both).run(mat)
    sink.request(1)
    src.send_next("a")
    sink.expect_next("[")
    sink.expect_no_message(0.05)
    sink.request(1)
    sink.expect_next("a")
    src.send_next("b")
    src.send_complete()
    sink.request(1)
    sink.expect_next(",")
    sink.request(2)
    sink.expect_next("b", "]")
    sink.expect_complete()


def test_intersperse_rejects_bad_arguments_at_build_time():
    with pytest.raises(ValueError, match=r"intersperse: argument 'inject' must not be None"):
        Flow().intersperse(None)
    with pytest.raises(ValueError, match=r"intersperse: argument 'inject' must not be None"):
        Flow().intersperse("[", None, "]")
    with pytest.raises(TypeError, match=r"intersperse takes \(inject\) or \(start, inject, end\), got 2 arguments"):
        Flow().intersperse("[", ",")


# =========================================================================== zip_with_index
def test_zip_with_index_works_in_the_happy_case(mat):
    probe = Source.range(7, 11).zip_with_index().run_with(TestSink.probe(), mat)
    probe.request(2)
    probe.expect_next((7, 0))
    probe.expect_next((8, 1))
    probe.request(1)
    probe.expect_next((9, 2))
    probe.request(1)
    probe.expect_next((10, 3))
    probe.expect_complete()


def test_zip_with_index_works_in_the_fruit_example(mat):
    seen = []
    Source.from_iterable(["apple", "orange", "banana"]).zip_with_index().run_with(Sink.foreach(seen.append), mat).result(3)
    assert seen == [("apple", 0), ("orange", 1), ("banana", 2)]


def test_zip_with_index_starts_at_zero_for_every_materialization(mat):
    flow = Flow().zip_with_index()
    for _ in range(2):
        assert Source.from_iterable("ab").via(flow).run_with(Sink.seq(), mat).result(3) == [("a", 0), ("b", 1)]


# =========================================================================== drop_repeated
def test_drop_repeated_removes_duplicated_elements(mat):
    probe = Source.from_iterable([1, 2, 2, 3, 3, 1, 4]).drop_repeated().run_with(TestSink.probe(), mat)
    probe.request(7)
    probe.expect_next(1, 2, 3, 1, 4)
    probe.expect_complete()


def test_drop_repeated_is_only_distinct_with_the_previous_element(mat):
    probe = Source.from_iterable([1, 2, 2, 3, 2, 3]).drop_repeated(lambda a, b: a == b).run_with(TestSink.probe(), mat)
    probe.request(6)
    probe.expect_next(1, 2, 3, 2, 3)
    probe.expect_complete()


def _eq_failing_on_2(a, b):
    if b == 2:
        raise TE("TE")
    return a == b


def test_drop_repeated_continues_if_error(mat):
    probe = (
        Source.from_iterable([1, 2, 2, 3, 3, 1, 4])
        .via(Flow().drop_repeated(_eq_failing_on_2).with_attributes(RESUME))
        .run_with(TestSink.probe(), mat)
    )
    probe.request(7)
    probe.expect_next(1, 3, 1, 4)
    probe.expect_complete()


def test_drop_repeated_restarts_if_error(mat):
    probe = (
        Source.from_iterable([1, 2, 2, 3, 3, 1, 4])
        .via(Flow().drop_repeated(_eq_failing_on_2).with_attributes(RESTART))
        .run_with(TestSink.probe(), mat)
    )
    probe.request(6)
    probe.expect_next(1, 2, 3, 1, 4)
    probe.expect_complete()


def test_drop_repeated_fails_with_the_exception_of_eq_by_default(mat):
    probe = Source.from_iterable([1, 2, 2]).drop_repeated(_eq_failing_on_2).run_with(TestSink.probe(), mat)
    probe.request(3)
    probe.expect_next(1)
    probe.expect_error(TE("TE"))


def test_drop_repeated_compares_with_the_previous_element_even_when_it_was_dropped(mat):
    # as Pekko's: each element is compared with the one received just before it
    near = lambda a, b: abs(a - b) <= 1  # noqa: E731
    out = Source.from_iterable([1, 2, 3, 4, 10, 11, 20]).drop_repeated(near).run_with(Sink.seq(), mat).result(3)
    assert out == [1, 10, 20]


def test_drop_repeated_does_not_call_eq_for_the_first_element(mat):
    calls = []
    out = Source.from_iterable([5, 5, 6]).drop_repeated(lambda a, b: calls.append((a, b)) or a == b).run_with(Sink.seq(), mat).result(3)
    assert out == [5, 6]
    assert calls == [(5, 5), (5, 6)]


def test_drop_repeated_rejects_a_non_callable_at_build_time():
    with pytest.raises(TypeError, match=r"drop_repeated: argument 'eq' must be callable"):
        Flow().drop_repeated(1)
