"""Fan-in junctions built with GraphDSL (or the flow shortcuts that build such graphs) and run on both
materializers: Zip (Pekko's GraphZipSpec), MergePreferred (GraphMergePreferredSpec), ``interleave``
(FlowInterleaveSpec) and ``or_else`` (FlowOrElseSpec), with the two-input cases these specs share
(Pekko's BaseTwoStreamsSetup ``commonTests``).

Tests taking ``mat`` run on ``Materializer.local()`` and ``Materializer.ray()``; those taking
``local_mat`` only in-process.
"""
from __future__ import annotations

import pytest

from atoll import Broadcast, ClosedShape, Flow, Keep, MergePreferred, Sink, Source, Zip
from atoll.testkit import TestSink, TestSource

from dsl_helpers import (
    QUIET,
    TE,
    TEST_EXCEPTION,
    closed,
    completed_source,
    failed_source,
    nonempty_source,
    soon_to_complete_source,
    soon_to_fail_source,
)


# ============================================================================================== Zip


def _zip_into(sink_probe_or_sink, left, right):
    def build(b, l, r, out):
        z = b.add(Zip())
        l.out >> z.in0
        r.out >> z.in1
        z.out >> out.in_
        return ClosedShape

    return closed(build, left, right, sink_probe_or_sink, combine=lambda *v: v)


def test_zip_happy_case(mat):
    def build(b, out):
        z = b.add(Zip())
        Source.range(1, 5) >> z.in0
        Source.from_iterable(["A", "B", "C", "D", "E", "F"]) >> z.in1
        z.out >> out.in_
        return ClosedShape

    probe = closed(build, TestSink.probe()).run(mat)
    probe.request(2)
    probe.expect_next((1, "A"), (2, "B"))
    probe.request(1)
    probe.expect_next((3, "C"))
    probe.request(1)
    probe.expect_next((4, "D"))
    probe.expect_complete()


def test_zip_completes_if_one_side_is_available_but_the_other_already_completed(mat):
    up1, up2, completed = _zip_into(Sink.ignore(), TestSource.probe(), TestSource.probe()).run(mat)
    up1.send_next(1)
    up1.send_next(2)
    up2.send_next("A")
    up2.send_complete()
    assert repr(completed.result(10)) == "Done"
    up1.expect_cancellation()


def test_zip_completes_even_if_no_pending_demand(local_mat):
    up1, up2, down = _zip_into(TestSink.probe(), TestSource.probe(), TestSource.probe()).run(local_mat)
    down.request(1)
    up1.send_next(1)
    up2.send_next("A")
    down.expect_next((1, "A"))
    up2.send_complete()
    down.expect_complete()
    up1.expect_cancellation()


@pytest.mark.parametrize("left_extra", [False, True], ids=["same length", "left has one more"])
def test_zip_completes_if_sides_complete_before_requested_with_elements_pending(local_mat, left_extra):
    up1, up2, down = _zip_into(TestSink.probe(), TestSource.probe(), TestSource.probe()).run(local_mat)
    up1.send_next(1)
    if left_extra:
        up1.send_next(2)
    up2.send_next("A")
    up1.send_complete()
    up2.send_complete()
    down.request_next((1, "A"))
    down.expect_complete()


def test_zip_completes_if_one_side_completes_before_requested_with_elements_pending_2(local_mat):
    up1, up2, down = _zip_into(TestSink.probe(), TestSource.probe(), TestSource.probe()).run(local_mat)
    down.ensure_subscription()
    up1.send_next(1)
    up1.send_complete()
    down.expect_no_message(QUIET)
    up2.send_next("A")
    up2.send_complete()
    down.request_next((1, "A"))
    down.expect_complete()


def test_zip_of_broadcast_branches_in_their_own_islands(mat):
    """Broadcast -> (map in one island, map in another) -> Zip: the zip is added first, so both
    branch outputs are wired back to an earlier shape; the broadcast's outputs go forward."""

    def build(b, out):
        z = b.add(Zip())
        bc = b.add(Broadcast(2))
        Source.range(0, 200) >> bc.in_
        bc.out(0) >> Flow().map(lambda x: x + 1).island() >> z.in0
        bc.out(1) >> Flow().map(lambda x: x * 2).island() >> z.in1
        z.out >> out.in_
        return ClosedShape

    result = closed(build, Sink.seq()).run(mat).result(20)
    assert result == [(x + 1, x * 2) for x in range(200)]


# ---------------------------------------------------------------------------------------------- two-stream setups


def zip_setup(left, right):
    return _zip_into(TestSink.probe(), left, right).map_materialized_value(lambda values: values[-1])


def merge_preferred_setup(left, right):
    def build(b, l, r, out):
        m = b.add(MergePreferred(1))
        l.out >> m.preferred
        r.out >> m.in_(0)
        m.out >> out.in_
        return ClosedShape

    return closed(build, left, right, TestSink.probe(), combine=lambda *values: values[-1])


def interleave_setup(left, right):
    return left.interleave(right, 2).to_mat(TestSink.probe(), Keep.right)


SETUPS = {"zip": zip_setup, "merge_preferred": merge_preferred_setup, "interleave": interleave_setup}

COMMON = {
    "two immediately completed": (completed_source, completed_source, None),
    "two delayed completed": (soon_to_complete_source, soon_to_complete_source, None),
    "one immediately, one delayed completed": (completed_source, soon_to_complete_source, None),
    "two immediately failed": (failed_source, failed_source, TEST_EXCEPTION),
    "two delayed failed": (soon_to_fail_source, soon_to_fail_source, TEST_EXCEPTION),
    "delayed failed, immediately failed": (soon_to_fail_source, failed_source, TEST_EXCEPTION),
    "immediately failed, delayed failed": (failed_source, soon_to_fail_source, TEST_EXCEPTION),
}


@pytest.mark.parametrize("case", list(COMMON))
@pytest.mark.parametrize("junction", list(SETUPS))
def test_two_streams_common_cases(local_mat, junction, case):
    left, right, error = COMMON[case]
    probe = SETUPS[junction](left(), right()).run(local_mat)
    if error is None:
        probe.expect_subscription_and_complete()
    else:
        probe.expect_subscription_and_error(error)


@pytest.mark.parametrize("empty", [completed_source, soon_to_complete_source], ids=["immediately", "delayed"])
def test_zip_with_one_completed_and_one_nonempty_publisher(local_mat, empty):
    zip_setup(empty(), nonempty_source()).run(local_mat).expect_subscription_and_complete()
    zip_setup(nonempty_source(), empty()).run(local_mat).expect_subscription_and_complete()


@pytest.mark.parametrize("failing", [failed_source, soon_to_fail_source], ids=["immediately", "delayed"])
def test_zip_with_one_failed_and_one_nonempty_publisher(local_mat, failing):
    zip_setup(failing(), nonempty_source()).run(local_mat).expect_subscription_and_error(TEST_EXCEPTION)
    zip_setup(nonempty_source(), failing()).run(local_mat).expect_subscription_and_error(TEST_EXCEPTION)


# ============================================================================================== MergePreferred


def test_merge_preferred_prefers_the_selected_input(local_mat):
    n = 2000

    def build(b, sink):
        m = b.add(MergePreferred(3))
        Source.from_iterator(lambda: iter([1] * n)) >> m.preferred
        m.out >> Flow().grouped(n * 2) >> sink.in_
        aux = Source.from_iterator(lambda: iter([2] * n))
        for i in range(3):
            aux >> m.in_(i)
        return ClosedShape

    first = closed(build, Sink.head()).run(local_mat).result(20)
    assert first.count(1) == n


def test_merge_preferred_passes_all_elements_without_corrupting_order(mat):
    """The preferred input and one secondary input come from islands of their own."""

    def build(b, sink):
        m = b.add(MergePreferred(3))
        Source.range(1, 101).island() >> m.preferred
        m.out >> Flow().grouped(500) >> sink.in_
        for i, start in enumerate((101, 201, 301)):
            src = Source.range(start, start + 100)
            if i == 1:
                src = src.island()
            src >> m.in_(i)
        return ClosedShape

    result = closed(build, Sink.head()).run(mat).result(20)
    assert sorted(result) == list(range(1, 401))
    for lo in (0, 100, 200, 300):
        assert [x for x in result if lo < x <= lo + 100] == list(range(lo + 1, lo + 101))


# ============================================================================================== Interleave


def test_interleave_happy_case(local_mat):
    probe = (
        Source.range(0, 4)
        .interleave(Source.range(4, 7), 2)
        .interleave(Source.range(7, 12), 3)
        .to_mat(TestSink.probe(), Keep.right)
        .run(local_mat)
    )
    collected = [probe.request_next() for _ in range(12)]
    assert collected == [0, 1, 4, 7, 8, 9, 5, 2, 3, 10, 11, 6]
    probe.expect_complete()


@pytest.mark.parametrize(
    "left, right, segment, expected",
    [
        (range(0, 3), range(3, 6), 2, [0, 1, 3, 4, 2, 5]),
        (range(0, 3), range(3, 6), 1, [0, 3, 1, 4, 2, 5]),
        (range(0, 3), range(3, 16), 10, list(range(16))),
        (range(1, 21), range(21, 26), 10, list(range(1, 11)) + list(range(21, 26)) + list(range(11, 21))),
    ],
    ids=["segment not equal to stream length", "segment 1", "segment longer than first", "segment longer than second"],
)
def test_interleave_segments(local_mat, left, right, segment, expected):
    probe = Source.from_iterable(left).interleave(Source.from_iterable(right), segment).to_mat(TestSink.probe(), Keep.right).run(local_mat)
    probe.request(100)
    probe.expect_next_n(expected)
    probe.expect_complete()


def test_interleave_rejects_segment_size_0():
    with pytest.raises(ValueError, match="segment_size"):
        Source.range(0, 3).interleave(Source.range(3, 6), 0)


def _interleave_probed(mat, eager_close=True):
    (s1, s2), probe = (
        TestSource.probe()
        .interleave(TestSource.probe(), 2, eager_close=eager_close, combine=Keep.both)
        .to_mat(TestSink.probe(), Keep.both)
        .run(mat)
    )
    return s1, s2, probe


def test_interleave_eager_close_when_first_stream_closes(mat):
    s1, s2, probe = _interleave_probed(mat)
    probe.request(10)
    s1.send_next(0)
    s2.send_next(10)
    s1.send_next(1)
    s2.send_next(11)
    s1.send_next(2)
    s1.send_complete()
    probe.expect_next(0, 1, 10, 11, 2)
    probe.expect_complete()
    s2.expect_cancellation()


def test_interleave_eager_close_when_non_current_upstream_closes(local_mat):
    s1, s2, probe = _interleave_probed(local_mat)
    probe.request(10)
    s1.send_next(0)
    s2.send_next(10)
    s1.send_next(1)
    # Pekko waits for the second input's detacher to ask again, i.e. for 10 to have gone through;
    # here the detacher is inside the junction, so wait for 10 downstream instead
    probe.expect_next(0, 1, 10)
    s1.send_complete()  # while the second input is current
    probe.expect_complete()
    s2.expect_cancellation()


def test_interleave_eager_close_when_other_stream_closes(local_mat):
    s1, s2, probe = _interleave_probed(local_mat)
    probe.request(10)
    s1.send_next(0)
    s2.send_next(10)
    s1.send_next(1)
    s2.send_next(11)
    s2.send_complete()
    probe.expect_next(0, 1, 10, 11)
    probe.expect_complete()
    s1.expect_cancellation()


@pytest.mark.parametrize("empty", [completed_source, soon_to_complete_source], ids=["immediately", "delayed"])
def test_interleave_with_one_completed_and_one_nonempty_publisher(local_mat, empty):
    for left, right in ((empty(), nonempty_source()), (nonempty_source(), empty())):
        probe = interleave_setup(left, right).run(local_mat)
        probe.request(4)
        probe.expect_next(1, 2, 3, 4)
        probe.expect_complete()


def test_interleave_with_one_immediately_failed_and_one_nonempty_publisher(local_mat):
    probe = interleave_setup(failed_source(), nonempty_source()).run(local_mat)
    probe.request(4)
    probe.expect_error(TEST_EXCEPTION)

    probe = interleave_setup(nonempty_source(), failed_source()).run(local_mat)
    probe.request(4)
    seen = []
    while True:
        ev = probe.expect_event()
        if ev[0] == "error":
            assert ev[1] == TEST_EXCEPTION
            break
        assert ev[0] == "next"
        seen.append(ev[1])
    assert seen == [1, 2][: len(seen)]


def test_interleave_passes_along_early_cancellation(local_mat):
    s1, s2, probe = _interleave_probed(local_mat, eager_close=False)
    probe.cancel()
    s1.expect_cancellation()
    s2.expect_cancellation()


# ============================================================================================== OrElse


def test_or_else_passes_elements_from_the_first_input(local_mat):
    assert Source.from_iterable([1, 2, 3]).or_else(Source.from_iterable([4, 5, 6])).run_with(Sink.seq(), local_mat).result(10) == [1, 2, 3]


def test_or_else_passes_elements_from_the_second_input_if_the_first_is_empty(local_mat):
    assert Source.empty().or_else(Source.from_iterable([4, 5, 6])).run_with(Sink.seq(), local_mat).result(5) == [4, 5, 6]


def _or_else_probed(mat, first=None):
    first = TestSource.probe() if first is None else first
    (in1, in2), out = first.or_else(TestSource.probe(), Keep.both).to_mat(TestSink.probe(), Keep.both).run(mat)
    return in1, in2, out


def test_or_else_passes_input_one_through_and_cancels_input_two(mat):
    in1, in2, out = _or_else_probed(mat)
    out.request(1)
    in1.expect_request()
    in1.send_next("a")
    out.expect_next("a")
    in1.send_complete()
    in2.expect_cancellation()
    out.expect_complete()


def test_or_else_passes_input_two_when_input_one_completed_empty(local_mat):
    in1, in2, out = _or_else_probed(local_mat)
    out.request(1)
    in1.send_complete()
    in2.expect_request()
    in2.send_next("a")
    out.expect_next("a")
    in2.send_complete()
    out.expect_complete()


def test_or_else_passes_input_two_when_input_one_is_lazily_empty(local_mat):
    _, in2, out = _or_else_probed(local_mat, first=soon_to_complete_source())
    out.request(1)
    in2.expect_request()
    in2.send_next("a")
    out.expect_next("a")
    in2.send_complete()
    out.expect_complete()


def test_or_else_passes_all_requested_elements_of_input_two(local_mat):
    in1, in2, out = _or_else_probed(local_mat)
    out.request(5)
    in1.send_complete()
    in2.expect_request()
    for x in "abc":
        in2.send_next(x)
        out.expect_next(x)
    in2.send_complete()
    out.expect_complete()


def test_or_else_completes_when_both_inputs_complete_empty(local_mat):
    in1, in2, out = _or_else_probed(local_mat)
    out.ensure_subscription()
    in1.send_complete()
    in2.send_complete()
    out.expect_complete()


def test_or_else_completes_when_both_inputs_complete_empty_regardless_of_order(local_mat):
    in1, in2, out = _or_else_probed(local_mat)
    out.ensure_subscription()
    in2.send_complete()
    out.expect_no_message(QUIET)  # the primary may still emit
    in1.send_complete()
    out.expect_complete()


def test_or_else_continues_with_primary_when_secondary_completes(local_mat):
    in1, in2, out = _or_else_probed(local_mat)
    out.request(1)
    in2.send_complete()
    in1.expect_request()
    in1.send_next("a")
    out.expect_next("a")
    in1.send_complete()
    out.expect_complete()


def test_or_else_fails_when_input_one_fails(mat):
    in1, in2, out = _or_else_probed(mat)
    out.ensure_subscription()
    in1.send_error(TE("in1 failed"))
    in2.expect_cancellation()
    out.expect_error(TE("in1 failed"))


def test_or_else_fails_when_input_two_fails(local_mat):
    in1, in2, out = _or_else_probed(local_mat)
    out.ensure_subscription()
    in2.send_error(TE("in2 failed"))
    in1.expect_cancellation()
    out.expect_error(TE("in2 failed"))
