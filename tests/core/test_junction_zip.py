"""Zipping junctions on the bare interpreter: Zip, ZipWith, ZipLatest and ZipLatestWith (Pekko's
GraphZipSpec, FlowZipSpec, GraphZipWithSpec, FlowZipWithSpec, GraphZipNSpec/GraphZipWithNSpec for the
n-ary cases, GraphZipLatestSpec, GraphZipLatestWithSpec)."""
from __future__ import annotations

import pytest

from atoll.errors import STAGE_WAS_COMPLETED, PortStateError
from atoll._impl.ops.fan_in import Zip, ZipLatest, ZipLatestWith, ZipWith
from atoll.stage.supervision import Supervision

from interpreter_kit import Cancel, JunctionSetup, OnComplete, OnError, OnNext, RequestOne
from stage_helpers import Boom


def errors_of(s):
    return [e.payload for e in s.kit.log if isinstance(e, OnError)]


def scala_div(a, b):
    """Integer division truncating towards zero, as the JVM's ``/`` (the specs' expected values)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


# ---------------------------------------------------------------------------------------------- Zip


def test_zip_happy_case():
    s = JunctionSetup(Zip())
    (out,) = s.feed([[1, 2, 3, 4], ["A", "B", "C", "D", "E", "F"]])
    assert out == [(1, "A"), (2, "B"), (3, "C"), (4, "D")]
    assert OnComplete(s.down) in s.kit.log
    assert Cancel(STAGE_WAS_COMPLETED, s.ups[1]) in s.kit.log  # the longer input is cut off
    assert s.interpreter.is_completed


def test_zip_completes_if_one_side_is_available_but_the_other_already_completed():
    s = JunctionSetup(Zip())
    up0, up1 = s.ups
    s.last_events()
    s.down.request_one()
    up0.on_next(1)
    up1.on_next("A")
    assert s.last_events() == {OnNext((1, "A"), s.down), RequestOne(up0), RequestOne(up1)}
    up0.on_next(2)  # waits for its partner
    up1.on_complete()  # ... which never comes
    assert s.last_events() == {OnComplete(s.down), Cancel(STAGE_WAS_COMPLETED, up0)}


def test_zip_completes_even_if_no_pending_demand():
    s = JunctionSetup(Zip())
    up0, up1 = s.ups
    s.down.request_one()
    up0.on_next(1)
    up1.on_next("A")
    assert OnNext((1, "A"), s.down) in s.last_events()
    up1.on_complete()
    assert s.last_events() == {OnComplete(s.down), Cancel(STAGE_WAS_COMPLETED, up0)}


def test_zip_completes_if_both_sides_complete_before_requested_with_elements_pending():
    s = JunctionSetup(Zip())
    up0, up1 = s.ups
    up0.on_next(1)
    up1.on_next("A")
    up0.on_complete()
    up1.on_complete()
    s.last_events()
    s.down.request_one()
    assert s.last_events() == {OnNext((1, "A"), s.down), OnComplete(s.down)}


def test_zip_completes_if_one_side_completes_before_requested_with_elements_pending():
    s = JunctionSetup(Zip())
    up0, up1 = s.ups
    up0.on_next(1)
    up1.on_next("A")
    up0.on_complete()
    s.last_events()
    s.down.request_one()
    assert s.last_events() == {OnNext((1, "A"), s.down), OnComplete(s.down), Cancel(STAGE_WAS_COMPLETED, up1)}


def test_zip_completes_if_one_side_completes_before_requested_with_elements_pending_2():
    s = JunctionSetup(Zip())
    up0, up1 = s.ups
    up0.on_next_and_complete(1)
    assert s.last_events() == {RequestOne(up0), RequestOne(up1)}  # 1 waits for a partner
    up1.on_next_and_complete("A")
    assert s.last_events() == set()
    s.down.request_one()
    assert s.last_events() == {OnNext((1, "A"), s.down), OnComplete(s.down)}


def test_zip_emits_only_when_both_inputs_have_an_element():
    s = JunctionSetup(Zip())
    up0, up1 = s.ups
    s.last_events()
    s.down.request_one()
    up1.on_next("x")
    assert s.last_events() == set()
    s.last_events()
    up0.on_next(0)
    assert s.last_events() == {OnNext((0, "x"), s.down), RequestOne(up0), RequestOne(up1)}


# ---------------------------------------------------------------------------------------------- ZipWith


def test_zip_with_happy_case():
    s = JunctionSetup(ZipWith(lambda a, b: a + b))
    assert s.feed([[1, 2, 3, 4], [10, 20, 30, 40]]) == [[11, 22, 33, 44]]
    assert OnComplete(s.down) in s.kit.log


def test_zip_with_sad_case():
    s = JunctionSetup(ZipWith(scala_div))
    (out,) = s.feed([[1, 2, 3, 4], [-2, -1, 0, 1, 2]])
    assert out == [scala_div(1, -2), scala_div(2, -1)]
    (exc,) = errors_of(s)
    assert isinstance(exc, ZeroDivisionError)
    assert s.interpreter.is_completed


def raise_at_three(a, b):
    if a == 3:
        raise Boom("boom")
    return a + b


@pytest.mark.parametrize("decider", [None, Supervision.stopping_decider], ids=["default", "stop"])
def test_zip_with_fails_the_stream_when_fn_raises_and_supervision_stops(decider):
    s = JunctionSetup(ZipWith(raise_at_three), decider=decider)
    (out,) = s.feed([[1, 2, 3, 4], [1, 2, 3, 4]])
    assert out == [2, 4]
    (exc,) = errors_of(s)
    assert isinstance(exc, Boom)


@pytest.mark.parametrize("decider", [Supervision.resuming_decider, Supervision.restarting_decider], ids=["resume", "restart"])
def test_zip_with_drops_the_failed_combination_when_supervision_resumes_or_restarts(decider):
    s = JunctionSetup(ZipWith(raise_at_three), decider=decider)
    assert s.feed([[1, 2, 3, 4], [1, 2, 3, 4]]) == [[2, 4, 8]]
    assert OnComplete(s.down) in s.kit.log


def test_zip_with_resume_on_the_last_combination_still_completes():
    s = JunctionSetup(ZipWith(raise_at_three), decider=Supervision.resuming_decider)
    assert s.feed([[1, 2, 3], [1, 2, 3, 4]]) == [[2, 4]]
    assert OnComplete(s.down) in s.kit.log and s.interpreter.is_completed


def test_zip_with_three_inputs():
    s = JunctionSetup(ZipWith(lambda name, surname, n: f"{name} {surname} {n}", 3))
    assert s.feed([["Caplin"], ["Capybara"], [3]]) == [["Caplin Capybara 3"]]
    assert OnComplete(s.down) in s.kit.log


@pytest.mark.parametrize("n", [22, 30])
def test_zip_with_many_inputs(n):
    s = JunctionSetup(ZipWith(lambda *xs: "".join(map(str, xs)), n))
    sources = [[i] if i % 2 else [str(i)] for i in range(1, n + 1)]
    assert s.feed(sources) == [["".join(str(i) for i in range(1, n + 1))]]


def test_zip_with_result_none_is_rejected_like_an_exception():
    s = JunctionSetup(ZipWith(lambda a, b: None))
    s.feed([[1], [2]])
    (exc,) = errors_of(s)
    assert isinstance(exc, PortStateError) and "None" in str(exc)
    s = JunctionSetup(ZipWith(lambda a, b: None if a == 1 else a + b), decider=Supervision.resuming_decider)
    assert s.feed([[1, 2], [1, 2]]) == [[4]]


# ---------------------------------------------------------------------------------------------- ZipLatest


def test_zip_latest_only_emits_when_at_least_one_pair_is_available():
    s = JunctionSetup(ZipLatest())
    bools, ints = s.ups
    s.last_events()
    s.down.request_one()
    bools.on_next(True)
    assert s.last_events() == set()
    ints.on_next(1)
    assert s.last_events() == {OnNext((True, 1), s.down), RequestOne(bools), RequestOne(ints)}


def test_zip_latest_emits_as_soon_as_one_source_is_available():
    s = JunctionSetup(ZipLatest())
    bools, ints = s.ups
    s.down.request_one()
    bools.on_next(True)
    ints.on_next(1)
    s.last_events()
    for _ in range(2):
        s.down.request_one()
        ints.on_next(1)
        assert s.last_events() == {OnNext((True, 1), s.down), RequestOne(ints)}  # bools is still pulled


def test_zip_latest_does_not_emit_the_same_pair_upon_two_pulls():
    s = JunctionSetup(ZipLatest())
    bools, ints = s.ups
    s.down.request_one()
    bools.on_next(True)
    ints.on_next(1)
    assert OnNext((True, 1), s.down) in s.last_events()
    s.down.request_one()
    assert s.last_events() == set()
    bools.on_complete()
    assert s.last_events() == {OnComplete(s.down), Cancel(STAGE_WAS_COMPLETED, ints)}


def test_zip_latest_does_not_deduplicate_by_value():
    a1, a2, a3 = "someString", "some" + "String".lower().capitalize(), "someString"
    s = JunctionSetup(ZipLatest())
    as_, bs = s.ups
    s.down.request_one()
    as_.on_next(a1)
    bs.on_next(1)
    s.down.request_one()
    as_.on_next(a2)
    s.down.request_one()
    as_.on_next(a3)
    s.down.request_one()
    bs.on_next(1)
    assert s.received(s.down) == [(a1, 1), (a2, 1), (a3, 1), (a3, 1)]


@pytest.mark.parametrize("which", [0, 1])
def test_zip_latest_completes_when_either_source_completes(which):
    s = JunctionSetup(ZipLatest())
    s.last_events()
    s.ups[which].on_complete()
    assert s.last_events() == {OnComplete(s.down), Cancel(STAGE_WAS_COMPLETED, s.ups[1 - which])}


@pytest.mark.parametrize("which", [0, 1])
def test_zip_latest_completes_when_either_source_completes_and_requesting_element(which):
    s = JunctionSetup(ZipLatest())
    s.ups[which].on_complete()
    assert s.down.closed
    assert OnComplete(s.down) in s.kit.log


@pytest.mark.parametrize("which", [0, 1])
def test_zip_latest_completes_when_either_source_completes_with_some_pending_element(which):
    s = JunctionSetup(ZipLatest())
    bools, ints = s.ups
    bools.on_next(True)
    ints.on_next(1)
    s.ups[which].on_complete()
    s.last_events()
    s.down.request_one()
    assert s.last_events() == {OnNext((True, 1), s.down), OnComplete(s.down), Cancel(STAGE_WAS_COMPLETED, s.ups[1 - which])}


def test_zip_latest_completes_when_one_quickly_completes_without_any_elements():
    s = JunctionSetup(ZipLatest())
    assert s.feed([[3], []]) == [[]]
    assert OnComplete(s.down) in s.kit.log


def test_zip_latest_completes_when_one_source_completes_and_the_other_continues_pushing():
    s = JunctionSetup(ZipLatest())
    bools, ints = s.ups
    bools.on_next(True)
    ints.on_next(1)
    bools.on_complete()
    assert ints.closed is False
    s.last_events()
    s.down.request_one()
    assert s.last_events() == {OnNext((True, 1), s.down), OnComplete(s.down), Cancel(STAGE_WAS_COMPLETED, ints)}


@pytest.mark.parametrize("which", [0, 1])
def test_zip_latest_completes_if_no_pending_demand(which):
    s = JunctionSetup(ZipLatest())
    bools, ints = s.ups
    s.down.request_one()
    bools.on_next(True)
    ints.on_next(1)
    assert OnNext((True, 1), s.down) in s.last_events()
    s.ups[which].on_complete()
    assert OnComplete(s.down) in s.last_events()


@pytest.mark.parametrize("which", [0, 1])
def test_zip_latest_fails_when_either_source_has_error(which):
    exc = Boom("up")
    s = JunctionSetup(ZipLatest())
    s.last_events()
    s.ups[which].on_error(exc)
    assert s.last_events() == {OnError(exc, s.down), Cancel(exc, s.ups[1 - which])}


def test_zip_latest_emits_even_if_the_pair_is_the_same():
    s = JunctionSetup(ZipLatest())
    bools, ints = s.ups
    s.down.request_one()
    bools.on_next(True)
    ints.on_next(1)
    ints.on_next_and_complete(1)
    bools.on_complete()
    s.down.request_one()
    assert s.received(s.down) == [(True, 1), (True, 1)]
    assert OnComplete(s.down) in s.kit.log


def test_zip_latest_emits_combined_elements_in_proper_order():
    s = JunctionSetup(ZipLatest())
    first, second = s.ups
    expected = []
    for d1 in range(10):
        first.on_next(d1)
        for d2 in range(10):
            second.on_next(d2)
            s.down.request_one()
            expected.append((d1, d2))
    assert s.received(s.down) == expected
    s.down.cancel_and_run()
    assert s.interpreter.is_completed


# ---------------------------------------------------------------------------------------------- ZipLatestWith


def test_zip_latest_with_happy_case():
    s = JunctionSetup(ZipLatestWith(lambda a, b: a + b))
    left, right = s.ups
    left.on_next(1)
    right.on_next(10)
    s.down.request_one()
    left.on_next(2)
    s.down.request_one()
    assert s.received(s.down) == [11, 12]
    right.on_next(20)
    s.down.request_one()
    right.on_next(30)
    s.down.request_one()
    assert s.received(s.down) == [11, 12, 22, 32]
    s.last_events()
    right.on_complete()
    assert s.last_events() == {OnComplete(s.down), Cancel(STAGE_WAS_COMPLETED, left)}


def test_zip_latest_with_sad_case():
    s = JunctionSetup(ZipLatestWith(scala_div))
    left, right = s.ups
    left.on_next(1)
    for b in (-2, -1):
        right.on_next(b)
        s.down.request_one()
    assert s.received(s.down) == [scala_div(1, -2), scala_div(1, -1)]
    right.on_next(0)
    s.down.request_one()
    (exc,) = errors_of(s)
    assert isinstance(exc, ZeroDivisionError)  # no supervision: fn's exception fails the stage
    assert s.interpreter.is_completed


def test_zip_latest_with_ignores_supervision():
    s = JunctionSetup(ZipLatestWith(scala_div), decider=Supervision.resuming_decider)
    s.ups[0].on_next(1)
    s.ups[1].on_next(0)
    s.down.request_one()
    assert isinstance(errors_of(s)[0], ZeroDivisionError)


def test_zip_latest_with_non_eager_version():
    s = JunctionSetup(ZipLatestWith(lambda a, b: a + b, eager_complete=False))
    left, right = s.ups
    left.on_next(10)
    right.on_next(1)
    s.down.request_one()
    right.on_next(2)
    s.down.request_one()
    assert s.received(s.down) == [11, 12]
    right.on_complete()
    assert not s.down.closed  # waits for the other input
    left.on_next(20)
    s.down.request_one()
    left.on_next(30)
    s.down.request_one()
    assert s.received(s.down) == [11, 12, 22, 32]
    s.last_events()
    left.on_complete()
    assert s.last_events() == {OnComplete(s.down)}


def test_zip_latest_with_non_eager_version_emits_the_pending_combination_before_completing():
    s = JunctionSetup(ZipLatestWith(lambda a, b: a + b, eager_complete=False))
    left, right = s.ups
    left.on_next_and_complete(1)
    right.on_next(10)
    right.on_complete()
    s.last_events()
    s.down.request_one()
    assert s.last_events() == {OnNext(11, s.down), OnComplete(s.down)}


def test_zip_latest_with_eager_version():
    s = JunctionSetup(ZipLatestWith(lambda a, b: a + b, eager_complete=True))
    left, right = s.ups
    right.on_next(10)
    left.on_next(1)
    s.down.request_one()
    assert s.received(s.down) == [11]
    s.last_events()
    s.down.request_one()
    left.on_next_and_complete(2)  # its last element still makes a combination, then the stage completes
    assert s.last_events() == {OnNext(12, s.down), OnComplete(s.down), Cancel(STAGE_WAS_COMPLETED, right)}


def test_zip_latest_with_three_inputs():
    s = JunctionSetup(ZipLatestWith(lambda name, surname, n: (name, surname, n), 3))
    for up, elem in zip(s.ups, ["Caplin", "Capybara", 3]):
        up.on_next(elem)
    s.down.request_one()
    assert s.received(s.down) == [("Caplin", "Capybara", 3)]


def test_zip_latest_with_twenty_two_inputs():
    s = JunctionSetup(ZipLatestWith(lambda *xs: "".join(map(str, xs)), 22))
    for i, up in enumerate(s.ups, start=1):
        up.on_next(i)
    s.down.request_one()
    assert s.received(s.down) == ["".join(str(i) for i in range(1, 23))]


def test_zip_latest_with_result_none_fails_the_stage():
    s = JunctionSetup(ZipLatestWith(lambda a, b: None))
    s.ups[0].on_next(1)
    s.ups[1].on_next(2)
    s.down.request_one()
    (exc,) = errors_of(s)
    assert isinstance(exc, PortStateError)
