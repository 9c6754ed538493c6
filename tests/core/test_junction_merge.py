"""Merging junctions on the bare interpreter: Merge, MergePreferred, MergePrioritized, MergeSorted and
MergeLatest (Pekko's GraphMergeSpec, FlowMergeSpec, GraphMergePreferredSpec, GraphMergePrioritizedSpec,
GraphMergeSortedSpec, GraphMergeLatestSpec)."""
from __future__ import annotations

import random

import pytest

from atoll.errors import NO_MORE_ELEMENTS_NEEDED, STAGE_WAS_COMPLETED
from atoll._impl.ops.fan_in import Merge, MergeLatest, MergePreferred, MergePrioritized, MergeSorted

from interpreter_kit import Cancel, JunctionSetup, Kit, OnComplete, OnError, OnNext, RequestOne, feed
from stage_helpers import Boom

# ---------------------------------------------------------------------------------------------- Merge


def test_merge_happy_case_keeps_the_order_of_each_input():
    s = JunctionSetup(Merge(2))
    (out,) = s.feed([[0, 1, 2, 3], [4, 5, 6, 7, 8, 9]])
    assert sorted(out) == list(range(10))
    assert [x for x in out if x <= 3] == [0, 1, 2, 3]
    assert [x for x in out if x >= 4] == [4, 5, 6, 7, 8, 9]
    assert OnComplete(s.down) in s.kit.log


def test_chained_merges_with_an_empty_input():
    """GraphMergeSpec "work in the happy case": two merges in a row, one input empty."""
    kit = Kit()
    ups = [kit.add(kit.upstream(f"up{i}")) for i in range(3)]
    down = kit.add(kit.downstream("down"))
    m1, m2 = Merge(2), Merge(2)
    kit.add(m1)
    kit.add(m2)
    kit.connect(ups[0].out, m1.ins[0]).connect(ups[1].out, m1.ins[1]).connect(m1.out, m2.ins[0])
    kit.connect(ups[2].out, m2.ins[1]).connect(m2.out, down.in_)
    kit.init()
    kit.run()
    (out,) = feed(kit, ups, [down], [[1, 2, 3, 4], [5, 6, 7, 8, 9, 10], []])
    assert sorted(out) == list(range(1, 11))
    assert [x for x in out if x <= 4] == [1, 2, 3, 4]
    assert OnComplete(down) in kit.log and kit.interpreter.is_completed


def test_one_way_merge():
    s = JunctionSetup(Merge(1))
    assert s.feed([[1, 2, 3]]) == [[1, 2, 3]]


def test_n_way_merge():
    s = JunctionSetup(Merge(6))
    (out,) = s.feed([[1], [2], [3], [4], [5], []])
    assert sorted(out) == [1, 2, 3, 4, 5]
    assert OnComplete(s.down) in s.kit.log


def test_merge_serves_waiting_inputs_in_arrival_order():
    s = JunctionSetup(Merge(3))
    up0, up1, up2 = s.ups
    up2.on_next("c")
    up0.on_next("a")
    up1.on_next("b")
    assert s.last_events() == {RequestOne(up0), RequestOne(up1), RequestOne(up2)}
    s.down.request_one()
    assert s.last_events() == {OnNext("c", s.down), RequestOne(up2)}
    s.down.request_one()
    assert s.last_events() == {OnNext("a", s.down), RequestOne(up0)}
    up2.on_next("d")  # queued behind "b"
    s.down.request_one()
    assert s.last_events() == {OnNext("b", s.down), RequestOne(up1)}
    s.down.request_one()
    assert s.last_events() == {OnNext("d", s.down), RequestOne(up2)}


def test_merge_completes_after_the_last_upstream_and_the_waiting_elements():
    s = JunctionSetup(Merge(2))
    up0, up1 = s.ups
    up0.on_next_and_complete(1)
    up1.on_complete()
    assert s.last_events() == {RequestOne(up0), RequestOne(up1)}  # start-up pulls; 1 still waits
    s.down.request_one()
    assert s.last_events() == {OnNext(1, s.down), OnComplete(s.down)}


def test_eager_complete_merge_completes_when_one_upstream_completes():
    s = JunctionSetup(Merge(2, eager_complete=True))
    up0, up1 = s.ups
    s.last_events()
    up0.on_complete()
    # the input is cancelled, then the stage completes (its cause, as in Pekko, is the last one given)
    assert s.last_events() == {Cancel(STAGE_WAS_COMPLETED, up1), OnComplete(s.down)}


def test_merge_does_not_grab_from_a_closed_input_previously_enqueued():
    """FlowMergeSpec "not try to grab from a closed input previously enqueued" (Akka #21138)."""
    s = JunctionSetup(Merge(2, eager_complete=True))
    up0, up1 = s.ups
    up0.on_next(7)
    up1.on_next(8)
    s.last_events()
    up1.on_complete()
    assert s.last_events() == {Cancel(NO_MORE_ELEMENTS_NEEDED, up0)}  # 7 is dropped with its input
    s.down.request_one()
    assert s.last_events() == {OnNext(8, s.down), OnComplete(s.down)}


def test_merge_upstream_failure_fails_the_stage_and_cancels_the_others():
    exc = Boom("up0")
    s = JunctionSetup(Merge(3))
    s.last_events()
    s.ups[0].on_error(exc)
    assert s.last_events() == {OnError(exc, s.down), Cancel(exc, s.ups[1]), Cancel(exc, s.ups[2])}


# ---------------------------------------------------------------------------------------------- MergePreferred


def test_merge_preferred_takes_the_preferred_input_first():
    s = JunctionSetup(MergePreferred(1))
    secondary, preferred = s.ups
    assert s.last_events() == {RequestOne(secondary), RequestOne(preferred)}
    preferred.on_next("p1")  # waits for demand; preferred pulled again
    assert s.last_events() == {RequestOne(preferred)}
    preferred.on_next("p2")
    assert s.last_events() == {RequestOne(preferred)}
    preferred.on_next("p3")  # two preferred elements are on their way: this one waits in its port
    secondary.on_next("s1")  # blocked while preferred elements are emitting
    assert s.last_events() == set()
    out = [s.down.request_one() or [e.payload for e in s.last_events() if isinstance(e, OnNext)] for _ in range(4)]
    assert out == [["p1"], ["p2"], ["p3"], ["s1"]]


def test_merge_preferred_serves_secondaries_when_preferred_is_idle():
    s = JunctionSetup(MergePreferred(2))
    s0, s1, preferred = s.ups
    s.last_events()
    s.down.request_one()
    s1.on_next(10)
    assert s.last_events() == {OnNext(10, s.down), RequestOne(s1)}
    s0.on_next(20)  # arrives while nothing preferred is on its way: queued for the next pull
    preferred.on_next(1)
    assert s.last_events() == {RequestOne(preferred)}
    s.down.request_one()
    assert s.last_events() == {OnNext(20, s.down), RequestOne(s0)}
    s.down.request_one()
    assert s.last_events() == {OnNext(1, s.down)}


def test_merge_preferred_eventually_passes_all_elements_without_corrupting_the_order():
    s = JunctionSetup(MergePreferred(3))
    (out,) = s.feed([list(range(101, 201)), list(range(201, 301)), list(range(301, 401)), list(range(1, 101))])
    assert sorted(out) == list(range(1, 401))
    for lo, hi in [(1, 100), (101, 200), (201, 300), (301, 400)]:
        assert [x for x in out if lo <= x <= hi] == list(range(lo, hi + 1))
    assert OnComplete(s.down) in s.kit.log


def test_merge_preferred_prefers_the_selected_input_more_than_others():
    n = 300
    s = JunctionSetup(MergePreferred(3))
    (out,) = s.feed([[2] * n, [2] * n, [2] * n, [1] * n])
    assert out[: 2 * n].count(1) == n  # every preferred element among the first 2n


def test_merge_preferred_completes_when_all_inputs_completed():
    s = JunctionSetup(MergePreferred(1))
    secondary, preferred = s.ups
    s.last_events()
    preferred.on_complete()
    assert s.last_events() == set()
    secondary.on_complete()
    assert s.last_events() == {OnComplete(s.down)}


@pytest.mark.parametrize("which", [0, 1], ids=["secondary", "preferred"])
def test_eager_complete_merge_preferred_completes_when_any_input_completes(which):
    s = JunctionSetup(MergePreferred(1, eager_complete=True))
    s.last_events()
    s.ups[which].on_complete()
    assert s.last_events() == {OnComplete(s.down), Cancel(STAGE_WAS_COMPLETED, s.ups[1 - which])}


def test_merge_preferred_completion_waits_for_elements_being_emitted():
    s = JunctionSetup(MergePreferred(1, eager_complete=True))
    secondary, preferred = s.ups
    preferred.on_next(1)
    preferred.on_complete()
    assert OnComplete(s.down) not in s.last_events()
    s.down.request_one()
    assert s.last_events() == {OnNext(1, s.down), OnComplete(s.down)}


# ---------------------------------------------------------------------------------------------- MergePrioritized


def test_merge_prioritized_streams_data_from_all_sources():
    s = JunctionSetup(MergePrioritized([6, 3, 1], seed=1))
    (out,) = s.feed([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    assert sorted(out) == list(range(1, 10))
    assert OnComplete(s.down) in s.kit.log


def _count_when_all_available(priorities, sources, seed=3):
    s = JunctionSetup(MergePrioritized(priorities, seed=seed))
    n = max(len(x) for x in sources)
    (out,) = s.feed(sources, demand=[n])
    return out


def test_merge_prioritized_streams_data_with_priority():
    n = 3000
    out = _count_when_all_available([6, 3, 1], [[1] * n, [2] * n, [3] * n])
    ones, twos, threes = out.count(1), out.count(2), out.count(3)
    assert len(out) == n
    assert abs(ones / twos - 2) < 1 and abs(ones / threes - 6) < 1.5 and abs(twos / threes - 3) < 1


def test_merge_prioritized_streams_data_when_only_one_source_produces():
    out = _count_when_all_available([6, 3, 1], [[1] * 10, [], []])
    assert out == [1] * 10


def test_merge_prioritized_streams_data_with_priority_when_only_two_sources_produce():
    n = 2000
    out = _count_when_all_available([6, 3, 1], [[1] * n, [2] * n, []])
    assert out.count(3) == 0
    assert abs(out.count(1) / out.count(2) - 2) < 1


def test_merge_prioritized_is_reproducible_with_a_seed():
    a = _count_when_all_available([5, 5], [list(range(50)), list(range(100, 150))], seed=11)
    b = _count_when_all_available([5, 5], [list(range(50)), list(range(100, 150))], seed=11)
    assert a == b


def test_merge_prioritized_does_not_push_on_arrival_when_another_input_waits():
    s = JunctionSetup(MergePrioritized([1, 1], seed=0))
    up0, up1 = s.ups
    up0.on_next("a")
    s.last_events()
    s.down.request_one()
    assert s.last_events() == {OnNext("a", s.down), RequestOne(up0)}


def test_eager_complete_merge_prioritized_completes_when_one_upstream_completes():
    s = JunctionSetup(MergePrioritized([1, 2], eager_complete=True))
    s.last_events()
    s.ups[1].on_complete()
    assert s.last_events() == {OnComplete(s.down), Cancel(STAGE_WAS_COMPLETED, s.ups[0])}


def test_merge_prioritized_completes_after_all_upstreams_and_waiting_elements():
    s = JunctionSetup(MergePrioritized([1, 2]))
    up0, up1 = s.ups
    up0.on_next_and_complete(1)
    up1.on_complete()
    s.last_events()
    s.down.request_one()
    assert s.last_events() == {OnNext(1, s.down), OnComplete(s.down)}


# ---------------------------------------------------------------------------------------------- MergeSorted


def test_merge_sorted_nominal_case():
    rnd = random.Random(4711)
    for _ in range(60):
        picks = [rnd.random() < 0.5 for _ in range(rnd.randrange(0, 25))]
        left = [i for i, p in enumerate(picks) if p]
        right = [i for i, p in enumerate(picks) if not p]
        s = JunctionSetup(MergeSorted())
        assert s.feed([left, right]) == [list(range(len(picks)))]
        assert OnComplete(s.down) in s.kit.log and s.interpreter.is_completed


def test_merge_sorted_passes_unsorted_input_along_unsorted():
    s = JunctionSetup(MergeSorted())
    assert s.feed([[1, 3, 5, 7], [20, 1, 1, 1]]) == [[1, 3, 5, 7, 20, 1, 1, 1]]
    s = JunctionSetup(MergeSorted())
    assert s.feed([[1, 3, 5, 7], [2, 4, 6, 8]]) == [[1, 2, 3, 4, 5, 6, 7, 8]]


def test_merge_sorted_with_a_key_and_ties_going_to_the_second_input():
    s = JunctionSetup(MergeSorted(key=lambda t: t[0]))
    (out,) = s.feed([[(1, "l"), (3, "l")], [(1, "r"), (2, "r")]])
    assert out == [(1, "r"), (1, "l"), (2, "r"), (3, "l")]


def test_merge_sorted_emits_only_when_both_inputs_have_an_element():
    s = JunctionSetup(MergeSorted())
    left, right = s.ups
    assert s.last_events() == {RequestOne(left), RequestOne(right)}
    s.down.request_one()
    left.on_next(1)
    assert s.last_events() == set()  # 1 may not be the smallest yet
    right.on_next(2)
    assert s.last_events() == {OnNext(1, s.down), RequestOne(left)}
    left.on_complete()
    assert s.last_events() == set()  # no demand: 2 waits
    s.down.request_one()
    assert s.last_events() == {OnNext(2, s.down), RequestOne(right)}
    s.down.request_one()
    right.on_next_and_complete(3)
    assert s.last_events() == {OnNext(3, s.down), OnComplete(s.down)}


def test_merge_sorted_unorderable_elements_fail_the_stage():
    s = JunctionSetup(MergeSorted())
    (out,) = s.feed([[1], ["a"]])
    assert out == []
    (err,) = [e.payload for e in s.kit.log if isinstance(e, OnError)]
    assert isinstance(err, TypeError)


# ---------------------------------------------------------------------------------------------- MergeLatest


def test_merge_latest_starts_emitting_only_after_each_input_emitted():
    s = JunctionSetup(MergeLatest(3))
    up0, up1, up2 = s.ups
    s.last_events()
    s.down.request_one()
    assert s.last_events() == set()
    up0.on_next(1)
    assert s.last_events() == {RequestOne(up0)}
    up1.on_next(2)
    assert s.last_events() == {RequestOne(up1)}
    up2.on_next(3)
    assert s.last_events() == {OnNext([1, 2, 3], s.down), RequestOne(up2)}
    up0.on_complete()
    up1.on_complete()
    assert s.last_events() == set()
    up2.on_complete()
    assert s.last_events() == {OnComplete(s.down)}


def test_merge_latest_updates_values_after_a_message_from_one_stream():
    s = JunctionSetup(MergeLatest(3))
    up0, up1, up2 = s.ups
    up0.on_next(1)
    up1.on_next(2)
    up2.on_next(3)
    expected = [[1, 2, 3]]
    for up, elem, latest in [(up0, 2, [2, 2, 3]), (up1, 4, [2, 4, 3]), (up2, 6, [2, 4, 6]), (up2, 9, [2, 4, 9]), (up0, 4, [4, 4, 9])]:
        s.down.request_one()
        up.on_next(elem)
        expected.append(latest)
    s.down.request_one()
    assert s.received(s.down) == expected
    for up in s.ups:
        up.on_complete()
    assert OnComplete(s.down) in s.last_events()


def test_one_way_merge_latest():
    s = JunctionSetup(MergeLatest(1))
    assert s.feed([[1, 2, 3]]) == [[[1], [2], [3]]]


def test_eager_complete_merge_latest_completes_when_one_input_finished():
    s = JunctionSetup(MergeLatest(2, eager_complete=True))
    s.last_events()
    s.ups[0].on_complete()
    assert s.last_events() == {OnComplete(s.down), Cancel(STAGE_WAS_COMPLETED, s.ups[1])}


def test_merge_latest_backpressures_each_input_behind_its_waiting_list():
    """Atoll deviation: an input is pulled again only after the list its element produced went out
    (Pekko pulls at once and may queue lists without bound)."""
    s = JunctionSetup(MergeLatest(2))
    up0, up1 = s.ups
    s.last_events()
    up0.on_next(1)
    assert s.last_events() == {RequestOne(up0)}  # not every input has a value yet: pull on
    up1.on_next(2)
    assert s.last_events() == set()  # [1, 2] waits for demand; up1 is not pulled again
    up0.on_next(3)
    assert s.last_events() == set()  # [3, 2] waits too; up0 is not pulled again
    s.down.request_one()
    assert s.last_events() == {OnNext([1, 2], s.down), RequestOne(up1)}
    s.down.request_one()
    assert s.last_events() == {OnNext([3, 2], s.down), RequestOne(up0)}
    s.down.request_one()
    assert s.last_events() == set()


def test_merge_latest_emits_copies_not_the_live_list():
    s = JunctionSetup(MergeLatest(2))
    (out,) = s.feed([[1, 2], [10]])
    assert out == [[1, 10], [2, 10]]
    assert out[0] is not out[1]
