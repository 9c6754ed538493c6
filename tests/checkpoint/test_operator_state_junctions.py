"""Fan-in junctions restore exactly: cut-and-restore of one logic on the bare interpreter (element form),
and the checkpoint round trip through the runtime, fused (chunk forms where they exist) and unfused."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from operator_state_kit import Run, run_cut, run_whole  # noqa: E402

from atoll import GraphDSL, Source  # noqa: E402
from atoll._impl.ops import fan_in  # noqa: E402
from atoll.stage import SourceShape  # noqa: E402
from atoll.testkit.round_trip import checkpoint_round_trip  # noqa: E402

A = list(range(0, 12))
B = list(range(100, 109))

# ---------------------------------------------------------------------------------------------- one logic
LOGICS = {
    "concat": lambda: fan_in.Concat(2),
    "concat_attached": lambda: fan_in.Concat(2, detached_inputs=False),
    "interleave": lambda: fan_in.Interleave(2, 3),
    "merge_sorted": lambda: fan_in.MergeSorted(),
    "or_else": lambda: fan_in.OrElse(),
    "merge_preferred": lambda: fan_in.MergePreferred(1),
    "merge_prioritized": lambda: fan_in.MergePrioritized([1, 3], seed=5),
    "merge_latest": lambda: fan_in.MergeLatest(2),
    "zip_latest": lambda: fan_in.ZipLatestWith(lambda a, b: (a, b), 2, eager_complete=False),
}
SORTED_INPUTS = [list(range(0, 24, 2)), list(range(1, 19, 3))]


def _feeds(name):
    return SORTED_INPUTS if name == "merge_sorted" else [A, B]


@pytest.mark.parametrize("demand", [None, 3])
@pytest.mark.parametrize("cut", [(0, 0), (1, 0), (4, 2), (7, 9), (12, 9)])
@pytest.mark.parametrize("name", sorted(LOGICS))
def test_logic_cut_and_restore_equals_the_uninterrupted_run(name, cut, demand):
    """Inputs fed up to ``cut`` while downstream asked for ``demand`` outputs, cut, restore, the rest."""
    feeds = _feeds(name)
    whole = run_whole(LOGICS[name], feeds)
    first, second, _ = run_cut(LOGICS[name], feeds, list(cut), demand_before=[demand])
    got = first.outputs() + second.outputs()
    if name in ("merge_preferred", "merge_prioritized", "merge_latest", "zip_latest"):
        # which input goes first depends on arrivals against demand; the per-input order may not change
        _check_timing_dependent(name, got, whole.outputs())
    else:
        assert got == whole.outputs()
    assert [e.kind for e in second.ends()] == ["OnComplete"]


def _check_timing_dependent(name, got, whole):
    if name in ("merge_preferred", "merge_prioritized"):
        assert sorted(got) == sorted(whole)
        assert [x for x in got if x < 100] == A and [x for x in got if x >= 100] == B
        return
    for k in (0, 1):  # every list holds the latest value of each input: never going back
        column = [lst[k] for lst in got]
        assert column == sorted(column)
    assert got[-1] == whole[-1]
    if name == "merge_latest":  # one list per arrival once every input delivered: one value moves by one
        for a, b in zip(got, got[1:]):
            assert sorted([b[0] - a[0], b[1] - a[1]]) == [0, 1]
    else:
        assert all(a != b for a, b in zip(got, got[1:]))  # a combination goes out once


def test_concat_saves_the_read_ahead_element_of_a_detached_input():
    first, second, state = run_cut(LOGICS["concat"], [A, B], [3, 1], demand_before=[2])
    assert first.outputs() == [0, 1] and state["active"] == 0 and state["held"][1] == [100]
    assert first.outputs() + second.outputs() == A + B


def test_interleave_saves_its_read_ahead_elements_while_downstream_is_stalled():
    r = Run(LOGICS["interleave"]())
    r.pump([A[:1], B[:1]], complete=False, demand=[0])
    assert r.logic.ready_for_snapshot()
    assert r.logic.save_to_snapshot()["held"] == [[0], [100]]


def test_or_else_restored_after_the_primary_emitted_never_runs_the_secondary():
    first, second, state = run_cut(LOGICS["or_else"], [A, B], [2, 0])
    assert state is True and first.outputs() + second.outputs() == A


def test_or_else_restored_after_an_empty_primary_takes_the_secondary():
    whole = run_whole(LOGICS["or_else"], [[], B])
    first, second, state = run_cut(LOGICS["or_else"], [[], B], [0, 4])
    assert state is False and first.outputs() + second.outputs() == whole.outputs() == B


def test_merge_latest_saves_the_lists_waiting_for_demand():
    r = Run(LOGICS["merge_latest"]())
    r.pump([A[:3], B[:2]], complete=False, demand=[0])
    state = r.logic.save_to_snapshot()
    assert r.logic.ready_for_snapshot() and state["queue"]  # held lists are state, not an emit in progress


# ---------------------------------------------------------------------------------------------- round trip
N = 40


def _graph(junction, *sources):
    def build(b):
        j = b.add(junction())
        for i, src in enumerate(sources):
            src >> j.in_(i)
        return SourceShape(j.out)

    return Source.from_graph(GraphDSL.create(build))


def _preferred():
    def build(b):
        j = b.add(fan_in.MergePreferred(1))
        Source.range(0, N) >> j.preferred
        Source.range(100, 100 + N) >> j.in_(0)
        return SourceShape(j.out)

    return Source.from_graph(GraphDSL.create(build))


BLUEPRINTS = {
    "concat": lambda: Source.range(0, N).concat(Source.range(100, 100 + N)),
    "prepend": lambda: Source.range(0, N).prepend(Source.range(100, 100 + N)),
    "concat_attached": lambda: _graph(lambda: fan_in.Concat(2, detached_inputs=False),
                                      Source.range(0, N), Source.range(100, 100 + N)),
    "interleave": lambda: Source.range(0, N).interleave(Source.range(100, 100 + N), 3),
    "interleave_uneven": lambda: Source.range(0, N).interleave(Source.range(100, 110), 4),
    "merge_sorted": lambda: Source.range(0, 2 * N, 2).merge_sorted(Source.range(1, 2 * N, 4)),
    "or_else": lambda: Source.range(0, N).or_else(Source.range(100, 100 + N)),
    "or_else_empty": lambda: Source.empty().or_else(Source.range(100, 100 + N)),
    "merge_preferred": _preferred,
    "merge_prioritized": lambda: _graph(lambda: fan_in.MergePrioritized([1, 2], seed=3),
                                        Source.range(0, N), Source.range(100, 100 + N)),
    "merge_latest": lambda: _graph(lambda: fan_in.MergeLatest(2), Source.range(0, N), Source.range(100, 100 + N)),
    "zip_latest": lambda: Source.range(0, N).zip_latest(Source.range(100, 100 + N)),
    "zip_latest_with": lambda: _graph(lambda: fan_in.ZipLatestWith(_pair, 2, eager_complete=False),
                                      Source.range(0, N), Source.range(100, 100 + N)),
}
ORDERED = {"concat", "prepend", "concat_attached", "interleave", "interleave_uneven", "merge_sorted", "or_else",
           "or_else_empty"}


def _ats(name):
    n = {"interleave_uneven": N + 10, "merge_sorted": N + N // 2, "or_else": N, "or_else_empty": N}.get(name, 2 * N)
    if name in ("merge_latest", "zip_latest", "zip_latest_with"):
        n = 8  # at least this many lists go out in any timing
    return [0, 1, n // 2, n - 1]


CASES = [(name, at) for name in sorted(BLUEPRINTS) for at in _ats(name)]


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("name,at", CASES)
def test_junction_round_trip(name, at, fusion, tmp_path):
    expected, got = checkpoint_round_trip(BLUEPRINTS[name], at=at, storage=str(tmp_path), fusion=fusion)
    if name in ORDERED:
        assert got == expected
    elif name in ("merge_preferred", "merge_prioritized"):
        assert sorted(got) == sorted(expected)
        assert [x for x in got if x < 100] == list(range(N))
    elif name == "merge_latest":
        assert got[-1] == expected[-1] == [N - 1, 100 + N - 1]
        for a, b in zip(got, got[1:]):
            assert sorted([b[0] - a[0], b[1] - a[1]]) == [0, 1]
    else:  # zip_latest completes with the first input, so its last pair depends on timing
        if name == "zip_latest_with":
            assert got[-1] == expected[-1] == (N - 1, 100 + N - 1)
        for k in (0, 1):
            column = [p[k] for p in got]
            assert column == sorted(column)
        assert all(a != b for a, b in zip(got, got[1:]))


def _pair(a, b):
    return (a, b)
