"""Sequencing junctions on the bare interpreter: Concat (detached and not), Interleave and OrElse
(Pekko's GraphConcatSpec, FlowConcatSpec, FlowInterleaveSpec, FlowOrElseSpec)."""
from __future__ import annotations

import pytest

from atoll.errors import NO_MORE_ELEMENTS_NEEDED, STAGE_WAS_COMPLETED
from atoll._impl.ops.fan_in import Concat, Interleave, OrElse

from interpreter_kit import Cancel, JunctionSetup, Kit, OnComplete, OnError, OnNext, RequestOne, feed
from stage_helpers import Boom

# ---------------------------------------------------------------------------------------------- Concat


def test_chained_concats_happy_case():
    """GraphConcatSpec "work in the happy case": concat(concat([], 1..4), 5..10)."""
    kit = Kit()
    ups = [kit.add(kit.upstream(f"up{i}")) for i in range(3)]
    down = kit.add(kit.downstream("down"))
    c1, c2 = Concat(), Concat()
    kit.add(c1)
    kit.add(c2)
    kit.connect(ups[0].out, c1.ins[0]).connect(ups[1].out, c1.ins[1]).connect(c1.out, c2.ins[0])
    kit.connect(ups[2].out, c2.ins[1]).connect(c2.out, down.in_)
    kit.init()
    kit.run()
    (out,) = feed(kit, ups, [down], [[], [1, 2, 3, 4], [5, 6, 7, 8, 9, 10]])
    assert out == list(range(1, 11))
    assert OnComplete(down) in kit.log and kit.interpreter.is_completed


@pytest.mark.parametrize("detached", [True, False])
def test_concat_of_n_inputs_in_order(detached):
    s = JunctionSetup(Concat(4, detached_inputs=detached))
    assert s.feed([[1, 2], [], [3], [4, 5, 6]]) == [[1, 2, 3, 4, 5, 6]]
    assert OnComplete(s.down) in s.kit.log


def test_one_input_concat_passes_through():
    s = JunctionSetup(Concat(1))
    assert s.feed([[1, 2, 3]]) == [[1, 2, 3]]


def test_detached_concat_pulls_every_input_at_start():
    s = JunctionSetup(Concat(3))
    assert s.last_events() == {RequestOne(up) for up in s.ups}


def test_attached_concat_pulls_only_the_current_input_on_demand():
    s = JunctionSetup(Concat(2, detached_inputs=False))
    up0, up1 = s.ups
    assert s.last_events() == set()
    s.down.request_one()
    assert s.last_events() == {RequestOne(up0)}
    up0.on_next(1)
    assert s.last_events() == {OnNext(1, s.down)}
    s.down.request_one()
    assert s.last_events() == {RequestOne(up0)}
    up0.on_complete()
    assert s.last_events() == {RequestOne(up1)}  # downstream waits: the next input is asked
    up1.on_next_and_complete(2)
    assert s.last_events() == {OnNext(2, s.down), OnComplete(s.down)}


def test_detached_concat_keeps_one_element_per_input_at_hand():
    """FlowConcatSpec "subscribe at once to initial source and to one that it's concat to"."""
    s = JunctionSetup(Concat())
    up0, up1 = s.ups
    s.last_events()
    up0.on_next(1)
    up1.on_next(2)  # held by the second input's buffer; not pulled again
    assert s.last_events() == set()
    s.down.request_one()
    assert s.last_events() == {OnNext(1, s.down), RequestOne(up0)}
    up0.on_complete()
    assert s.last_events() == set()
    s.down.request_one()
    assert s.last_events() == {OnNext(2, s.down), RequestOne(up1)}
    up1.on_complete()
    assert s.last_events() == {OnComplete(s.down)}


def test_detached_concat_passes_the_buffered_element_of_a_completed_input_before_moving_on():
    s = JunctionSetup(Concat(3))
    up0, up1, up2 = s.ups
    up1.on_next_and_complete("b")  # completed, but its element is still buffered
    up2.on_next("c")
    s.last_events()
    s.down.request_one()
    up0.on_next_and_complete("a")
    assert s.last_events() == {OnNext("a", s.down)}
    s.down.request_one()
    assert s.last_events() == {OnNext("b", s.down)}
    s.down.request_one()
    assert s.last_events() == {OnNext("c", s.down), RequestOne(up2)}
    up2.on_complete()
    assert s.last_events() == {OnComplete(s.down)}


@pytest.mark.parametrize("detached", [True, False])
def test_concat_skips_inputs_that_completed_empty_before_their_turn(detached):
    s = JunctionSetup(Concat(3, detached_inputs=detached))
    up0, up1, up2 = s.ups
    up1.on_complete()
    s.last_events()
    s.down.request_one()
    up0.on_next(1)
    assert OnNext(1, s.down) in s.last_events()
    s.down.request_one()
    up0.on_complete()
    events = s.last_events()
    assert OnComplete(s.down) not in events
    if not detached:
        assert events == {RequestOne(up0), RequestOne(up2)}
    up2.on_next_and_complete(3)
    assert {OnNext(3, s.down), OnComplete(s.down)} <= s.last_events()


@pytest.mark.parametrize("detached", [True, False])
def test_concat_handles_async_errors_in_the_secondary_upstream(detached):
    exc = Boom("test")
    s = JunctionSetup(Concat(detached_inputs=detached))
    up0, up1 = s.ups
    out = s.feed([[1, 2, 3], None])
    assert out == [[1, 2, 3]]
    up1.on_error(exc)
    assert OnError(exc, s.down) in s.last_events()
    assert s.interpreter.is_completed


@pytest.mark.parametrize("detached", [True, False])
def test_concat_fails_when_a_later_input_fails_before_its_turn(detached):
    exc = Boom("test")
    s = JunctionSetup(Concat(detached_inputs=detached))
    up0, up1 = s.ups
    s.down.request_one()
    up0.on_next(1)
    s.last_events()
    up1.on_error(exc)
    assert s.last_events() == {OnError(exc, s.down), Cancel(exc, up0)}


def test_detached_concat_drops_the_buffered_element_of_a_failed_input():
    exc = Boom("test")
    s = JunctionSetup(Concat())
    up0, up1 = s.ups
    up0.on_next(1)  # buffered, downstream has not asked
    s.last_events()
    up0.on_error(exc)
    assert s.last_events() == {OnError(exc, s.down), Cancel(exc, up1)}


@pytest.mark.parametrize("detached", [True, False])
def test_concat_nonempty_then_immediately_failed_publisher(detached):
    exc = Boom("test")
    s = JunctionSetup(Concat(detached_inputs=detached), start=False)
    s.ups[1].fail_out(exc)
    (out,) = s.feed([[1, 2, 3, 4], None])
    assert out == []  # the failure wins before any element gets through
    assert OnError(exc, s.down) in s.kit.log


@pytest.mark.parametrize("detached", [True, False])
def test_concat_downstream_cancel_cancels_every_input(detached):
    s = JunctionSetup(Concat(3, detached_inputs=detached))
    s.last_events()
    s.down.cancel_and_run()
    assert s.last_events() == {Cancel(NO_MORE_ELEMENTS_NEEDED, up) for up in s.ups}


def test_concat_completion_cancels_nothing_that_is_closed():
    s = JunctionSetup(Concat())
    s.feed([[1], [2]])
    assert not any(isinstance(e, Cancel) for e in s.kit.log)


def test_concat_as_prepend_wiring():
    """``prepend``: the other stream's elements come first (Concat with the inputs swapped)."""
    s = JunctionSetup(Concat())
    main, prepended = [4, 5, 6], [1, 2, 3]
    assert s.feed([prepended, main]) == [[1, 2, 3, 4, 5, 6]]


# ---------------------------------------------------------------------------------------------- Interleave


def test_interleave_happy_case():
    """FlowInterleaveSpec "work in the happy case": (0..3 interleave 4..6 by 2) interleave 7..11 by 3."""
    kit = Kit()
    ups = [kit.add(kit.upstream(f"up{i}")) for i in range(3)]
    down = kit.add(kit.downstream("down"))
    i1, i2 = Interleave(2, 2), Interleave(2, 3)
    kit.add(i1)
    kit.add(i2)
    kit.connect(ups[0].out, i1.ins[0]).connect(ups[1].out, i1.ins[1]).connect(i1.out, i2.ins[0])
    kit.connect(ups[2].out, i2.ins[1]).connect(i2.out, down.in_)
    kit.init()
    kit.run()
    (out,) = feed(kit, ups, [down], [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9, 10, 11]])
    assert out == [0, 1, 4, 7, 8, 9, 5, 2, 3, 10, 11, 6]
    assert OnComplete(down) in kit.log and kit.interpreter.is_completed


def test_interleave_when_segment_size_does_not_divide_the_stream():
    s = JunctionSetup(Interleave(2, 2))
    assert s.feed([[0, 1, 2], [3, 4, 5]]) == [[0, 1, 3, 4, 2, 5]]


def test_interleave_with_segment_size_one():
    s = JunctionSetup(Interleave(2, 1))
    assert s.feed([[0, 1, 2], [3, 4, 5]]) == [[0, 3, 1, 4, 2, 5]]


def test_interleave_with_segment_size_larger_than_the_streams():
    s = JunctionSetup(Interleave(2, 10))
    assert s.feed([[0, 1, 2], list(range(3, 16))]) == [list(range(16))]
    s = JunctionSetup(Interleave(2, 10))
    assert s.feed([list(range(1, 21)), list(range(21, 26))]) == [
        list(range(1, 11)) + list(range(21, 26)) + list(range(11, 21))
    ]


def test_interleave_of_three_inputs_skips_completed_ones():
    s = JunctionSetup(Interleave(3, 1))
    assert s.feed([[1, 4, 6], [2], [3, 5, 7, 8]]) == [[1, 2, 3, 4, 5, 6, 7, 8]]


def _eager_close_prefix(s):
    """The common start of the eager-close cases: 0, 1 from the first input, 10 from the second."""
    source1, source2 = s.ups
    s.down.request_one()
    assert s.last_events() == {RequestOne(source1), RequestOne(source2)}  # it eagerly pulls all inputs
    source1.on_next(0)
    assert s.last_events() == {OnNext(0, s.down), RequestOne(source1)}
    source2.on_next(10)  # kept by the second input's buffer
    assert s.last_events() == set()
    s.down.request_one()
    source1.on_next(1)
    assert s.last_events() == {OnNext(1, s.down), RequestOne(source1)}
    s.down.request_one()
    assert s.last_events() == {OnNext(10, s.down), RequestOne(source2)}
    s.down.request_one()


def test_interleave_eager_close_first_stream_closed():
    s = JunctionSetup(Interleave(2, 2, eager_close=True))
    source1, source2 = s.ups
    _eager_close_prefix(s)
    source2.on_next(11)
    assert s.last_events() == {OnNext(11, s.down), RequestOne(source2)}
    s.down.request_one()
    source1.on_next(2)  # buffered before: the first input's turn now
    assert s.last_events() == {OnNext(2, s.down), RequestOne(source1)}
    source1.on_complete()
    assert s.last_events() == {OnComplete(s.down), Cancel(STAGE_WAS_COMPLETED, source2)}
    assert s.received(s.down) == [0, 1, 10, 11, 2]


def test_interleave_eager_close_non_current_upstream_closed():
    s = JunctionSetup(Interleave(2, 2, eager_close=True))
    source1, source2 = s.ups
    _eager_close_prefix(s)
    source1.on_complete()  # not the current input, and nothing buffered: the stage completes
    assert s.last_events() == {OnComplete(s.down), Cancel(STAGE_WAS_COMPLETED, source2)}
    assert s.received(s.down) == [0, 1, 10]


def test_interleave_eager_close_other_stream_closed():
    s = JunctionSetup(Interleave(2, 2, eager_close=True))
    source1, source2 = s.ups
    _eager_close_prefix(s)
    source2.on_next_and_complete(11)  # the element still goes out, then the stage completes
    assert s.last_events() == {OnNext(11, s.down), OnComplete(s.down), Cancel(STAGE_WAS_COMPLETED, source1)}
    assert s.received(s.down) == [0, 1, 10, 11]


def test_interleave_eager_close_waits_for_the_buffered_element_of_the_closing_input():
    s = JunctionSetup(Interleave(2, 1, eager_close=True))
    source1, source2 = s.ups
    source2.on_next_and_complete(10)  # buffered: its input is not closed for the junction yet
    assert OnComplete(s.down) not in s.last_events()
    s.down.request_one()
    source1.on_next(0)
    s.down.request_one()
    assert s.received(s.down) == [0, 10]
    assert OnComplete(s.down) in s.kit.log


def test_interleave_passes_along_early_cancellation():
    s = JunctionSetup(Interleave(2, 2))
    s.last_events()
    s.down.cancel_and_run()
    assert s.last_events() == {Cancel(NO_MORE_ELEMENTS_NEEDED, up) for up in s.ups}


def test_interleave_non_eager_current_input_completing_switches_to_the_next():
    s = JunctionSetup(Interleave(3, 5))
    up0, up1, up2 = s.ups
    s.down.request_one()
    up0.on_next("a")
    s.down.request_one()
    s.last_events()
    up0.on_complete()  # downstream waits: the next input (already pulled at start) is asked
    up1.on_next("b")
    assert s.last_events() == {OnNext("b", s.down), RequestOne(up1)}


def test_interleave_failure_fails_the_stage():
    exc = Boom("test")
    s = JunctionSetup(Interleave(2, 2))
    s.last_events()
    s.ups[1].on_error(exc)
    assert s.last_events() == {OnError(exc, s.down), Cancel(exc, s.ups[0])}


# ---------------------------------------------------------------------------------------------- OrElse


def test_or_else_passes_elements_from_the_first_input():
    s = JunctionSetup(OrElse())
    assert s.feed([[1, 2, 3], [4, 5, 6]]) == [[1, 2, 3]]
    assert Cancel(NO_MORE_ELEMENTS_NEEDED, s.ups[1]) in s.kit.log


def test_or_else_passes_elements_from_the_second_input_if_the_first_completes_without_elements():
    s = JunctionSetup(OrElse())
    assert s.feed([[], [4, 5, 6]]) == [[4, 5, 6]]
    assert OnComplete(s.down) in s.kit.log


def test_or_else_passes_input_one_through_and_cancels_input_two():
    s = JunctionSetup(OrElse())
    primary, secondary = s.ups
    assert s.last_events() == set()  # no eager pulls
    s.down.request_one()
    assert s.last_events() == {RequestOne(primary)}
    primary.on_next("a")
    assert s.last_events() == {OnNext("a", s.down), Cancel(NO_MORE_ELEMENTS_NEEDED, secondary)}
    primary.on_complete()
    assert s.last_events() == {OnComplete(s.down)}


def test_or_else_passes_input_two_when_input_one_completed_without_elements():
    s = JunctionSetup(OrElse())
    primary, secondary = s.ups
    s.down.request_one()
    s.last_events()
    primary.on_complete()
    assert s.last_events() == {RequestOne(secondary)}
    secondary.on_next("a")
    assert s.last_events() == {OnNext("a", s.down)}
    secondary.on_complete()
    assert s.last_events() == {OnComplete(s.down)}


def test_or_else_switches_without_demand_and_pulls_the_secondary_on_the_next_pull():
    """FlowOrElseSpec "... (lazyEmpty)": the primary completes before anyone asked."""
    s = JunctionSetup(OrElse())
    primary, secondary = s.ups
    primary.on_complete()
    assert s.last_events() == set()
    s.down.request_one()
    assert s.last_events() == {RequestOne(secondary)}
    secondary.on_next_and_complete("a")
    assert s.last_events() == {OnNext("a", s.down), OnComplete(s.down)}


def test_or_else_passes_all_available_requested_elements_from_input_two():
    s = JunctionSetup(OrElse())
    primary, secondary = s.ups
    primary.on_complete()
    assert s.feed([None, ["a", "b", "c"]]) == [["a", "b", "c"]]
    assert OnComplete(s.down) in s.kit.log


def test_or_else_completes_when_both_inputs_complete_without_emitting():
    s = JunctionSetup(OrElse())
    primary, secondary = s.ups
    primary.on_complete()
    secondary.on_complete()
    assert s.last_events() == {OnComplete(s.down)}


def test_or_else_completes_when_both_complete_regardless_of_order():
    s = JunctionSetup(OrElse())
    primary, secondary = s.ups
    secondary.on_complete()
    assert s.last_events() == set()  # not complete yet: the primary may still emit
    primary.on_complete()
    assert s.last_events() == {OnComplete(s.down)}


def test_or_else_continues_passing_primary_through_when_secondary_completes():
    s = JunctionSetup(OrElse())
    primary, secondary = s.ups
    s.down.request_one()
    secondary.on_complete()
    assert s.last_events() == {RequestOne(primary)}
    primary.on_next("a")
    assert s.last_events() == {OnNext("a", s.down)}
    primary.on_complete()
    assert s.last_events() == {OnComplete(s.down)}


@pytest.mark.parametrize("failing", [0, 1], ids=["input1_fails", "input2_fails"])
def test_or_else_fails_when_either_input_fails(failing):
    exc = Boom(f"in{failing + 1} failed")
    s = JunctionSetup(OrElse())
    s.ups[failing].on_error(exc)
    assert s.last_events() == {OnError(exc, s.down), Cancel(exc, s.ups[1 - failing])}


def test_or_else_ignores_the_secondary_once_the_primary_emitted():
    s = JunctionSetup(OrElse())
    primary, secondary = s.ups
    s.down.request_one()
    primary.on_next(1)
    assert secondary.closed
    s.down.request_one()
    primary.on_next_and_complete(2)
    assert s.received(s.down) == [1, 2]
    assert OnComplete(s.down) in s.kit.log
