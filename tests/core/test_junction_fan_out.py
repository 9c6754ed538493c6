"""Fan-out junctions on the bare interpreter: Broadcast, Balance, Partition, Unzip and UnzipWith
(Pekko's GraphBroadcastSpec, GraphBalanceSpec, GraphPartitionSpec, GraphUnzipSpec, GraphUnzipWithSpec)."""
from __future__ import annotations

import pytest

from atoll.errors import NO_MORE_ELEMENTS_NEEDED, STAGE_WAS_COMPLETED, PartitionOutOfBoundsError, PortStateError
from atoll._impl.ops.fan_in import Zip
from atoll._impl.ops.fan_out import Balance, Broadcast, Partition, Unzip, UnzipWith
from atoll.stage.supervision import Supervision

from interpreter_kit import Cancel, JunctionSetup, Kit, OnComplete, OnError, OnNext, RequestOne, feed
from stage_helpers import Boom


def errors_of(s, probe):
    return [e.payload for e in s.kit.log if isinstance(e, OnError) and e.source is probe]


# ---------------------------------------------------------------------------------------------- Broadcast


def test_broadcast_emits_only_when_every_output_pulled():
    s = JunctionSetup(Broadcast(2))
    d1, d2 = s.downs
    assert s.last_events() == set()  # a broadcast pulls only once every output asked
    d1.request_one()
    assert s.last_events() == set()
    d2.request_one()
    assert s.last_events() == {RequestOne(s.up)}
    s.up.on_next(1)
    assert s.last_events() == {OnNext(1, d1), OnNext(1, d2)}
    d2.request_one()
    assert s.last_events() == set()
    d1.request_one()
    assert s.last_events() == {RequestOne(s.up)}
    s.up.on_next_and_complete(2)
    assert s.last_events() == {OnNext(2, d1), OnNext(2, d2), OnComplete(d1), OnComplete(d2)}
    assert s.interpreter.is_completed


def test_broadcast_to_other_subscriber():
    """GraphBroadcastSpec "broadcast to other subscriber": both get everything, at their own pace."""
    s = JunctionSetup(Broadcast(2))
    assert s.feed([[1, 2, 3]]) == [[1, 2, 3], [1, 2, 3]]
    assert OnComplete(s.downs[0]) in s.kit.log and OnComplete(s.downs[1]) in s.kit.log


@pytest.mark.parametrize("n", [1, 5, 22])
def test_one_way_and_n_way_broadcast(n):
    s = JunctionSetup(Broadcast(n))
    assert s.feed([[1, 2, 3]]) == [[1, 2, 3]] * n
    assert s.interpreter.is_completed


@pytest.mark.parametrize("cancelled", [0, 1], ids=["first_cancels", "second_cancels"])
def test_broadcast_produces_to_the_other_even_though_one_downstream_cancels(cancelled):
    s = JunctionSetup(Broadcast(2))
    s.downs[cancelled].cancel_and_run()
    assert s.last_events() == set()  # not eager: the upstream stays
    out = s.feed([[1, 2, 3]])
    assert out[cancelled] == [] and out[1 - cancelled] == [1, 2, 3]
    assert OnComplete(s.downs[1 - cancelled]) in s.kit.log


def test_broadcast_cancels_upstream_when_all_downstreams_cancel():
    s = JunctionSetup(Broadcast(2))
    d1, d2 = s.downs
    d1.request_one()
    d2.request_one()
    s.up.on_next(1)
    assert s.last_events() == {RequestOne(s.up), OnNext(1, d1), OnNext(1, d2)}
    d1.request_one()
    d2.request_one()
    s.up.on_next(2)
    assert s.last_events() == {RequestOne(s.up), OnNext(2, d1), OnNext(2, d2)}
    d1.cancel_and_run()
    assert s.last_events() == set()
    d2.cancel_and_run()
    assert s.last_events() == {Cancel(NO_MORE_ELEMENTS_NEEDED, s.up)}
    assert s.interpreter.is_completed


def test_broadcast_cancelled_output_no_longer_holds_back_the_others():
    s = JunctionSetup(Broadcast(3))
    d1, d2, d3 = s.downs
    d1.request_one()
    d2.request_one()
    assert s.last_events() == set()
    d3.cancel_and_run()  # the output that had not pulled yet cancels: the others' pulls suffice
    assert s.last_events() == {RequestOne(s.up)}
    s.up.on_next(1)
    assert s.last_events() == {OnNext(1, d1), OnNext(1, d2)}


def test_broadcast_passes_along_early_cancellation():
    s = JunctionSetup(Broadcast(2))
    s.downs[0].cancel_and_run()
    s.downs[1].cancel_and_run()
    assert s.last_events() == {Cancel(NO_MORE_ELEMENTS_NEEDED, s.up)}


@pytest.mark.parametrize("cancelled", [0, 1], ids=["main_cancels", "side_cancels"])
def test_eager_cancel_broadcast_cancels_when_any_branch_cancels(cancelled):
    """GraphBroadcastSpec "cancel if alsoTo side/main branch cancels"."""
    s = JunctionSetup(Broadcast(2, eager_cancel=True))
    s.downs[cancelled].cancel_and_run()
    assert s.last_events() == {Cancel(NO_MORE_ELEMENTS_NEEDED, s.up), OnComplete(s.downs[1 - cancelled])}


def test_eager_cancel_with_a_failure_cause_fails_the_other_outputs():
    exc = Boom("downstream failed")
    s = JunctionSetup(Broadcast(2, eager_cancel=True))
    s.downs[0].cancel_and_run(exc)
    assert s.last_events() == {Cancel(exc, s.up), OnError(exc, s.downs[1])}


def test_broadcast_continues_to_remaining_outputs_when_a_non_eager_output_cancels():
    s = JunctionSetup(Broadcast(2, eager_cancel=True, non_eager_cancel_outputs={1}))
    main, side = s.downs
    main.request_one()
    side.request_one()
    s.up.on_next(1)
    assert s.last_events() == {RequestOne(s.up), OnNext(1, main), OnNext(1, side)}
    main.request_one()
    side.request_one()
    s.up.on_next(2)
    assert s.last_events() == {RequestOne(s.up), OnNext(2, main), OnNext(2, side)}
    side.cancel_and_run()
    assert s.last_events() == set()
    main.request_one()
    assert s.last_events() == {RequestOne(s.up)}
    s.up.on_next(3)
    assert s.last_events() == {OnNext(3, main)}
    s.up.on_complete()
    assert s.last_events() == {OnComplete(main)}
    # ... but the eager output still cancels everything
    s = JunctionSetup(Broadcast(2, eager_cancel=True, non_eager_cancel_outputs={1}))
    s.downs[0].cancel_and_run()
    assert s.last_events() == {Cancel(NO_MORE_ELEMENTS_NEEDED, s.up), OnComplete(s.downs[1])}


def test_broadcast_upstream_failure_fails_every_output():
    exc = Boom("up")
    s = JunctionSetup(Broadcast(2))
    s.downs[0].request_one()
    s.up.on_error(exc)
    assert s.last_events() == {OnError(exc, s.downs[0]), OnError(exc, s.downs[1])}


# ---------------------------------------------------------------------------------------------- Balance


def test_balance_between_subscribers_which_signal_demand():
    s = JunctionSetup(Balance(2))
    d1, d2 = s.downs
    d1.request_one()
    assert s.last_events() == {RequestOne(s.up)}
    s.up.on_next(1)
    assert s.last_events() == {OnNext(1, d1)}
    d2.request_one()
    assert s.last_events() == {RequestOne(s.up)}
    s.up.on_next(2)
    assert s.last_events() == {OnNext(2, d2)}
    d2.request_one()
    s.up.on_next_and_complete(3)
    assert s.last_events() == {RequestOne(s.up), OnNext(3, d2), OnComplete(d1), OnComplete(d2)}


def test_balance_serves_outputs_in_the_order_they_pulled():
    """GraphBalanceSpec "fairly balance between three outputs"."""
    s = JunctionSetup(Balance(3))
    order = [0, 1, 2, 1, 0, 2, 0]
    for elem, j in enumerate(order, start=1):
        s.downs[j].request_one()
        if elem < len(order):
            s.up.on_next(elem)
        else:
            s.up.on_next_and_complete(elem)
        assert OnNext(elem, s.downs[j]) in s.last_events()
    assert all(OnComplete(d) in s.kit.log for d in s.downs)


def test_balance_waits_for_demand_from_all_downstreams():
    s = JunctionSetup(Balance(2, wait_for_all_downstreams=True))
    d1, d2 = s.downs
    d1.request_one()
    assert s.last_events() == set()  # still no demand from the second output
    d2.request_one()
    assert s.last_events() == {RequestOne(s.up)}
    s.up.on_next(1)
    assert s.last_events() == {OnNext(1, d1), RequestOne(s.up)}
    s.up.on_next(2)
    assert s.last_events() == {OnNext(2, d2)}
    d2.request_one()
    assert s.last_events() == {RequestOne(s.up)}
    s.up.on_next_and_complete(3)
    assert s.last_events() == {OnNext(3, d2), OnComplete(d1), OnComplete(d2)}


def test_balance_waits_for_demand_from_all_non_cancelled_downstreams():
    s = JunctionSetup(Balance(3, wait_for_all_downstreams=True))
    d1, d2, d3 = s.downs
    d1.request_one()
    d2.request_one()
    assert s.last_events() == set()
    d3.cancel_and_run()
    assert s.last_events() == {RequestOne(s.up)}
    s.up.on_next(1)
    assert s.last_events() == {OnNext(1, d1), RequestOne(s.up)}
    s.up.on_next(2)
    assert s.last_events() == {OnNext(2, d2)}


def test_one_way_balance():
    s = JunctionSetup(Balance(1))
    assert s.feed([[1, 2, 3]]) == [[1, 2, 3]]


def test_five_way_balance_with_waiting_gives_every_element_to_someone():
    s = JunctionSetup(Balance(5, wait_for_all_downstreams=True))
    out = s.feed([list(range(15))])
    assert sorted(x for o in out for x in o) == list(range(15))
    assert all(o for o in out)


@pytest.mark.parametrize("cancelled", [0, 1], ids=["first_cancels", "second_cancels"])
def test_balance_produces_to_the_other_even_though_one_cancels(cancelled):
    s = JunctionSetup(Balance(2))
    s.downs[cancelled].cancel_and_run()
    assert s.last_events() == set()
    out = s.feed([[1, 2, 3]])
    assert out[1 - cancelled] == [1, 2, 3]
    assert OnComplete(s.downs[1 - cancelled]) in s.kit.log


def test_balance_cancels_upstream_when_all_downstreams_cancel():
    s = JunctionSetup(Balance(2))
    d1, d2 = s.downs
    d1.request_one()
    s.up.on_next(1)
    d2.request_one()
    s.up.on_next(2)
    assert s.last_events() == {RequestOne(s.up), OnNext(1, d1), OnNext(2, d2)}
    d1.cancel_and_run()
    assert s.last_events() == set()
    d2.cancel_and_run()
    assert s.last_events() == {Cancel(NO_MORE_ELEMENTS_NEEDED, s.up)}


def test_eager_cancel_balance_cancels_upstream_when_any_downstream_cancels():
    s = JunctionSetup(Balance(2, eager_cancel=True))
    d1, d2 = s.downs
    d1.request_one()
    s.up.on_next(1)
    d2.request_one()
    s.up.on_next(2)
    s.last_events()
    d1.cancel_and_run()
    assert s.last_events() == {Cancel(NO_MORE_ELEMENTS_NEEDED, s.up), OnComplete(d2)}


def test_balance_does_not_push_an_output_twice():
    """GraphBalanceSpec "not push output twice" (Akka #20943)."""
    s = JunctionSetup(Balance(2))
    d1, d2 = s.downs
    d1.request_one()
    s.up.on_next(1)
    assert s.last_events() == {RequestOne(s.up), OnNext(1, d1)}
    d2.request_one()
    d2.cancel_and_run()
    s.up.on_next(2)  # goes nowhere: its output cancelled after pulling
    assert s.last_events() == {RequestOne(s.up)}
    d1.cancel_and_run()
    assert s.last_events() == {Cancel(NO_MORE_ELEMENTS_NEEDED, s.up)}


def test_balance_element_left_by_a_cancelled_output_goes_to_the_next_puller():
    s = JunctionSetup(Balance(2))
    d1, d2 = s.downs
    d2.request_one()
    d2.cancel_and_run()
    s.up.on_next(7)
    assert s.last_events() == {RequestOne(s.up)}
    d1.request_one()
    assert s.last_events() == {OnNext(7, d1)}


def test_balance_does_not_dequeue_from_an_empty_outlet_queue():
    """GraphBalanceSpec "not dequeue from empty outlet buffer" (Akka #25387)."""
    s = JunctionSetup(Balance(3))
    d1, d2, d3 = s.downs
    d1.request_one()
    d1.cancel_and_run()
    d2.request_one()
    d2.cancel_and_run()
    assert s.last_events() == {RequestOne(s.up)}
    s.up.on_next(1)
    assert s.last_events() == set()
    d3.request_one()
    assert s.last_events() == {OnNext(1, d3)}
    d3.cancel_and_run()
    assert s.last_events() == {Cancel(NO_MORE_ELEMENTS_NEEDED, s.up)}


def test_balance_upstream_completion_and_failure_reach_every_output():
    s = JunctionSetup(Balance(2))
    s.downs[0].request_one()
    s.up.on_complete()
    assert s.last_events() == {RequestOne(s.up), OnComplete(s.downs[0]), OnComplete(s.downs[1])}
    exc = Boom("up")
    s = JunctionSetup(Balance(2))
    s.up.on_error(exc)
    assert s.last_events() == {OnError(exc, s.downs[0]), OnError(exc, s.downs[1])}


# ---------------------------------------------------------------------------------------------- Partition


def three_way(x):
    return 0 if x > 3 else 1 if x < 3 else 2


def test_partition_to_three_subscribers():
    s = JunctionSetup(Partition(3, three_way))
    assert s.feed([[1, 2, 3, 4, 5]]) == [[4, 5], [1, 2], [3]]
    assert all(OnComplete(d) in s.kit.log for d in s.downs)


def test_partition_completes_stage_after_upstream_completes():
    s = JunctionSetup(Partition(2, lambda w: 0 if len(w) > 4 else 1))
    out = s.feed([["this", "is", "just", "another", "test"]], demand=[1, 4])
    assert out == [["another"], ["this", "is", "just", "test"]]
    assert all(OnComplete(d) in s.kit.log for d in s.downs)


def test_partition_remembers_the_first_pull_even_though_the_first_element_targeted_another_out():
    s = JunctionSetup(Partition(2, lambda x: 0 if x < 6 else 1))
    d1, d2 = s.downs
    d1.request_one()
    assert s.last_events() == {RequestOne(s.up)}
    s.up.on_next(6)
    assert s.last_events() == set()  # waits for out1, no new pull
    d2.request_one()
    assert s.last_events() == {OnNext(6, d2), RequestOne(s.up)}
    s.up.on_next_and_complete(3)
    assert s.last_events() == {OnNext(3, d1), OnComplete(d1), OnComplete(d2)}


def test_partition_cancels_upstream_when_all_downstreams_cancel():
    s = JunctionSetup(Partition(2, lambda x: 0 if x < 6 else 1))
    d1, d2 = s.downs
    d1.request_one()
    d2.request_one()
    s.up.on_next(1)
    assert s.last_events() == {RequestOne(s.up), OnNext(1, d1)}
    s.up.on_next(8)
    assert s.last_events() == {OnNext(8, d2)}  # no output left with demand: no pull
    d1.request_one()
    assert s.last_events() == {RequestOne(s.up)}
    s.up.on_next(2)
    assert s.last_events() == {OnNext(2, d1)}
    d1.cancel_and_run()
    assert s.last_events() == set()
    d2.request_one()
    s.up.on_next(9)
    assert s.last_events() == {RequestOne(s.up), OnNext(9, d2)}
    d2.cancel_and_run()
    assert s.last_events() == {Cancel(NO_MORE_ELEMENTS_NEEDED, s.up)}


def test_eager_cancel_partition_cancels_upstream_when_any_downstream_cancels():
    s = JunctionSetup(Partition(2, lambda x: 0 if x < 6 else 1, eager_cancel=True))
    d1, d2 = s.downs
    d1.request_one()
    d2.request_one()
    s.up.on_next(1)
    s.last_events()
    d1.cancel_and_run()
    assert s.last_events() == {Cancel(NO_MORE_ELEMENTS_NEEDED, s.up), OnComplete(d2)}


def test_partition_handles_upstream_completion_and_downstream_cancel():
    s = JunctionSetup(Partition(2, lambda x: 0 if x in ("a", "b") else 1))
    out = s.feed([["a", "b", "c", "d"]], demand=[10, 1])
    assert out == [["a", "b"], ["c"]]  # "d" waits for out1, the upstream has completed
    assert not s.interpreter.is_completed
    s.last_events()
    s.downs[1].cancel_and_run()  # the waiting element is dropped: nothing left to do
    assert s.last_events() == {OnComplete(s.downs[0])}
    assert s.interpreter.is_completed


def test_partition_handles_upstream_completion_and_downstream_pulls():
    s = JunctionSetup(Partition(2, lambda x: 0 if x in ("a", "b") else 1))
    out = s.feed([["a", "b", "c"]], demand=[10, 0])
    assert out == [["a", "b"], []]
    s.last_events()
    s.downs[1].request_one()
    assert s.last_events() == {OnNext("c", s.downs[1]), OnComplete(s.downs[0]), OnComplete(s.downs[1])}


def test_partition_element_for_a_cancelled_output_is_dropped():
    s = JunctionSetup(Partition(2, lambda x: x % 2))
    s.downs[1].cancel_and_run()
    assert s.feed([[1, 2, 3, 4]]) == [[2, 4], []]


def test_partition_with_merge():
    from atoll._impl.ops.fan_in import Merge

    kit = Kit()
    up, down = kit.add(kit.upstream("up")), kit.add(kit.downstream("down"))
    part, merge = Partition(2, lambda x: 0 if x < 4 else 1), Merge(2)
    kit.add(part)
    kit.add(merge)
    kit.connect(up.out, part.in_).connect(part.outs[0], merge.ins[0]).connect(part.outs[1], merge.ins[1]).connect(merge.out, down.in_)
    kit.init()
    kit.run()
    data = [5, 2, 9, 1, 1, 1, 10]
    (out,) = feed(kit, [up], [down], [data])
    assert sorted(out) == sorted(data)
    assert kit.interpreter.is_completed


def test_partition_fails_the_stage_if_the_index_is_out_of_bounds():
    s = JunctionSetup(Partition(2, lambda x: -1 if x < 0 else 0))
    d1, d2 = s.downs
    d1.request_one()
    s.up.on_next(-3)
    (exc,) = errors_of(s, d1)
    assert isinstance(exc, PartitionOutOfBoundsError) and isinstance(exc, IndexError)
    assert str(exc) == "partitioner must return an index in the range [0,1]. returned: [-1] for input [int]."
    assert s.last_events() == {RequestOne(s.up), OnError(exc, d1), OnError(exc, d2), Cancel(exc, s.up)}


def test_partition_index_that_is_not_an_int_fails_the_stage():
    s = JunctionSetup(Partition(2, lambda x: "0"))
    s.downs[0].request_one()
    s.up.on_next(1)
    (exc,) = errors_of(s, s.downs[0])
    assert isinstance(exc, TypeError) and "Partition" in str(exc)


def test_partition_accepts_any_integer_like_index():
    s = JunctionSetup(Partition(2, lambda x: x > 2))  # a bool is 0 or 1
    assert s.feed([[1, 2, 3, 4]]) == [[1, 2], [3, 4]]


def raising_at_three(x):
    if x == 3:
        raise Boom("three")
    return three_way(x)


@pytest.mark.parametrize("decider", [Supervision.resuming_decider, Supervision.restarting_decider], ids=["resume", "restart"])
def test_partition_to_three_subscribers_with_supervision(decider):
    s = JunctionSetup(Partition(3, raising_at_three), decider=decider)
    assert s.feed([[1, 2, 3, 4, 5]]) == [[4, 5], [1, 2], []]
    assert all(OnComplete(d) in s.kit.log for d in s.downs)


def test_partition_supervision_covers_out_of_bounds_indices():
    s = JunctionSetup(Partition(3, lambda x: -1 if x == 3 else three_way(x)), decider=Supervision.resuming_decider)
    assert s.feed([[1, 2, 3, 4, 5]]) == [[4, 5], [1, 2], []]


def test_partition_stops_by_default_when_fn_raises():
    s = JunctionSetup(Partition(3, raising_at_three))
    out = s.feed([[1, 2, 3, 4, 5]])
    assert out[2] == [] and 4 not in out[0]
    assert all(isinstance(errors_of(s, d)[0], Boom) for d in s.downs)


def test_partition_stage_completion_waits_for_the_pending_output():
    s = JunctionSetup(Partition(2, lambda x: 0 if x < 6 else 1))
    d1, d2 = s.downs
    d1.request_one()
    s.up.on_next_and_complete(6)
    assert s.last_events() == {RequestOne(s.up)}
    d2.request_one()
    assert s.last_events() == {OnNext(6, d2), OnComplete(d1), OnComplete(d2)}


def test_divert_style_partition_sends_matching_elements_to_the_side():
    """GraphPartitionSpec "divertTo must send matching elements to the sink"."""
    s = JunctionSetup(Partition(2, lambda x: 1 if x % 2 else 0, eager_cancel=True))
    even, odd = s.downs
    even.request_one()
    assert s.last_events() == {RequestOne(s.up)}
    s.up.on_next(1)
    assert s.last_events() == set()
    odd.request_one()
    assert s.last_events() == {OnNext(1, odd), RequestOne(s.up)}
    s.up.on_next_and_complete(2)
    assert s.last_events() == {OnNext(2, even), OnComplete(even), OnComplete(odd)}


# ---------------------------------------------------------------------------------------------- Unzip


def test_unzip_to_two_subscribers():
    s = JunctionSetup(Unzip())
    d1, d2 = s.downs
    d1.request_one()
    assert s.last_events() == set()
    d2.request_one()
    assert s.last_events() == {RequestOne(s.up)}
    s.up.on_next((1, "a"))
    assert s.last_events() == {OnNext(1, d1), OnNext("a", d2)}
    d2.request_one()
    assert s.last_events() == set()  # the other output still holds back
    d1.request_one()
    assert s.last_events() == {RequestOne(s.up)}
    s.up.on_next((2, "b"))
    assert s.last_events() == {OnNext(2, d1), OnNext("b", d2)}
    d1.request_one()
    d2.request_one()
    s.up.on_next_and_complete((3, "c"))
    assert s.last_events() == {RequestOne(s.up), OnNext(3, d1), OnNext("c", d2), OnComplete(d1), OnComplete(d2)}


@pytest.mark.parametrize("cancelled", [0, 1], ids=["left_cancels", "right_cancels"])
def test_unzip_produces_to_one_downstream_even_though_the_other_cancels(cancelled):
    s = JunctionSetup(Unzip())
    s.downs[cancelled].cancel_and_run()
    out = s.feed([[(1, "a"), (2, "b"), (3, "c")]])
    assert out[1 - cancelled] == ([1, 2, 3] if cancelled == 1 else ["a", "b", "c"])
    assert out[cancelled] == []
    assert OnComplete(s.downs[1 - cancelled]) in s.kit.log


def test_unzip_does_not_push_twice_when_pull_is_followed_by_cancel_before_element_has_been_pushed():
    s = JunctionSetup(Unzip())
    d1, d2 = s.downs
    d2.request_one()
    d1.request_one()
    d2.cancel_and_run()
    assert s.last_events() == {RequestOne(s.up)}
    out = s.feed([[(1, "a"), (2, "b"), (3, "c")]])
    assert out == [[1, 2, 3], []]
    assert OnComplete(d1) in s.kit.log


def test_unzip_does_not_lose_elements_when_pull_is_followed_by_cancel_before_other_sink_has_requested():
    s = JunctionSetup(Unzip())
    d1, d2 = s.downs
    d2.request_one()
    d2.cancel_and_run()
    assert s.last_events() == set()
    out = s.feed([[(1, "a"), (2, "b"), (3, "c")]])
    assert out[0] == [1, 2, 3]
    assert OnComplete(d1) in s.kit.log


def test_unzip_cancels_upstream_when_downstreams_cancel():
    s = JunctionSetup(Unzip())
    d1, d2 = s.downs
    for elem in [(1, "a"), (2, "b")]:
        d1.request_one()
        d2.request_one()
        s.up.on_next(elem)
        assert {OnNext(elem[0], d1), OnNext(elem[1], d2)} <= s.last_events()
    d1.cancel_and_run()
    assert s.last_events() == set()
    d2.cancel_and_run()
    assert s.last_events() == {Cancel(NO_MORE_ELEMENTS_NEEDED, s.up)}


def test_unzip_with_zip():
    kit = Kit()
    up, down = kit.add(kit.upstream("up")), kit.add(kit.downstream("down"))
    zip_, unzip = Zip(), Unzip()
    kit.add(zip_)
    kit.add(unzip)
    kit.connect(up.out, unzip.in_).connect(unzip.outs[0], zip_.ins[0]).connect(unzip.outs[1], zip_.ins[1]).connect(zip_.out, down.in_)
    kit.init()
    kit.run()
    (out,) = feed(kit, [up], [down], [[(1, "a"), (2, "b"), (3, "c")]])
    assert out == [(1, "a"), (2, "b"), (3, "c")]
    assert OnComplete(down) in kit.log and kit.interpreter.is_completed


def test_unzip_of_something_that_is_not_a_pair_fails_the_stage():
    s = JunctionSetup(Unzip())
    s.downs[0].request_one()
    s.downs[1].request_one()
    s.up.on_next((1, 2, 3))
    (exc,) = errors_of(s, s.downs[0])
    assert isinstance(exc, TypeError) and "Unzip" in str(exc)
    assert Cancel(exc, s.up) in s.kit.log


# ---------------------------------------------------------------------------------------------- UnzipWith


def doubling(b):
    return (b + b, f"{b} + {b}")


def test_unzip_with_immediately_completed_publisher():
    s = JunctionSetup(UnzipWith(doubling), start=False)
    s.up.complete_out()
    s.kit.run()
    assert s.last_events() == {OnComplete(s.downs[0]), OnComplete(s.downs[1])}


def test_unzip_with_delayed_completed_publisher():
    s = JunctionSetup(UnzipWith(doubling))
    s.downs[0].request_one()
    s.downs[1].request_one()
    s.up.on_complete()
    assert s.last_events() == {RequestOne(s.up), OnComplete(s.downs[0]), OnComplete(s.downs[1])}


@pytest.mark.parametrize("delayed", [False, True])
def test_unzip_with_failed_publisher(delayed):
    exc = Boom("test")
    s = JunctionSetup(UnzipWith(doubling))
    if delayed:
        s.downs[0].request_one()
        s.downs[1].request_one()
    s.up.on_error(exc)
    events = s.last_events()
    assert {OnError(exc, s.downs[0]), OnError(exc, s.downs[1])} <= events
    assert not any(isinstance(e, (OnNext, OnComplete)) for e in events)


def test_unzip_with_happy_case():
    s = JunctionSetup(UnzipWith(doubling))
    left, right = s.downs
    left.request_one()
    right.request_one()
    s.up.on_next(1)
    assert s.last_events() == {RequestOne(s.up), OnNext(2, left), OnNext("1 + 1", right)}
    left.request_one()
    assert s.last_events() == set()  # waits for the right output
    right.request_one()
    s.up.on_next(2)
    assert s.last_events() == {RequestOne(s.up), OnNext(4, left), OnNext("2 + 2", right)}
    out = s.feed([[3, 4]])
    assert out == [[6, 8], ["3 + 3", "4 + 4"]]
    assert OnComplete(left) in s.kit.log and OnComplete(right) in s.kit.log


def test_unzip_with_sad_case():
    s = JunctionSetup(UnzipWith(lambda b: (1 // b, f"1 / {b}")))
    left, right = s.downs
    out = s.feed([[-2, -1, 0, 1, 2]])
    assert out == [[1 // -2, 1 // -1], ["1 / -2", "1 / -1"]]
    (exc,) = errors_of(s, left)
    assert isinstance(exc, ZeroDivisionError)
    assert errors_of(s, right) == [exc]
    assert Cancel(exc, s.up) in s.kit.log


def test_unzip_with_propagates_the_last_downstream_cancellation_cause_once_all_have_cancelled():
    first, last = Boom("first"), Boom("last")
    s = JunctionSetup(UnzipWith(doubling))
    s.downs[0].cancel_and_run(first)
    assert s.last_events() == set()
    s.downs[1].cancel_and_run(last)
    assert s.last_events() == {Cancel(last, s.up)}


def test_unzip_with_three_outputs():
    s = JunctionSetup(UnzipWith(lambda p: (p["name"], p["surname"], p["int"]), 3))
    out = s.feed([[{"name": "Caplin", "surname": "Capybara", "int": 3}]])
    assert out == [["Caplin"], ["Capybara"], [3]]
    assert all(OnComplete(d) in s.kit.log for d in s.downs)


def test_unzip_with_twenty_two_outputs():
    s = JunctionSetup(UnzipWith(lambda xs: tuple(x if i % 2 == 0 else str(x) for i, x in enumerate(xs)), 22))
    out = s.feed([[list(range(1, 23))]])
    assert out == [[i] if (i - 1) % 2 == 0 else [str(i)] for i in range(1, 23)]


@pytest.mark.parametrize("bad", [(1,), [1, 2, 3], 5])
def test_unzip_with_result_of_the_wrong_arity_fails_the_stage(bad):
    s = JunctionSetup(UnzipWith(lambda x: bad))
    s.downs[0].request_one()
    s.downs[1].request_one()
    s.up.on_next(1)
    (exc,) = errors_of(s, s.downs[0])
    assert isinstance(exc, TypeError) and "UnzipWith" in str(exc)


def test_unzip_with_none_part_is_rejected():
    s = JunctionSetup(UnzipWith(lambda x: (x, None)))
    s.downs[0].request_one()
    s.downs[1].request_one()
    s.up.on_next(1)
    (exc,) = errors_of(s, s.downs[1])
    assert isinstance(exc, PortStateError) and "None" in str(exc)
    assert s.last_events() == {RequestOne(s.up), OnNext(1, s.downs[0]), OnError(exc, s.downs[0]), OnError(exc, s.downs[1]), Cancel(exc, s.up)}
    assert s.interpreter.is_completed


def test_fan_out_stage_completion_cancels_nothing_it_does_not_own():
    s = JunctionSetup(Broadcast(2))
    s.up.on_complete()
    assert s.last_events() == {OnComplete(s.downs[0]), OnComplete(s.downs[1])}
    assert not any(isinstance(e, Cancel) and e.payload is STAGE_WAS_COMPLETED for e in s.kit.log)
