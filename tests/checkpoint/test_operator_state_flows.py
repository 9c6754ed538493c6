"""Linear operators restore exactly: cut-and-restore of one logic on the bare interpreter, and the
checkpoint round trip through the runtime (fused and unfused)."""
from __future__ import annotations

import operator
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from operator_state_kit import check_flow, run_cut  # noqa: E402

from atoll import OverflowStrategy, Sink, Source  # noqa: E402
from atoll._impl.ops import aggregate, collection, sequence, slicing, transform  # noqa: E402
from atoll.testkit.round_trip import checkpoint_round_trip  # noqa: E402

ELEMS = list(range(20))

STAGES = {
    "scan": lambda: aggregate.Scan(0, operator.add),
    "fold": lambda: aggregate.Fold(0, operator.add),
    "reduce": lambda: aggregate.Reduce(operator.add),
    "grouped": lambda: aggregate.Grouped(3),
    "sliding": lambda: aggregate.Sliding(3, 2),
    "sliding_gap": lambda: aggregate.Sliding(2, 3),
    "take": lambda: slicing.Take(7),
    "drop": lambda: slicing.Drop(7),
    "take_while": lambda: slicing.TakeWhile(lambda x: x < 12),
    "drop_while": lambda: slicing.DropWhile(lambda x: x < 12),
    "limit": lambda: slicing.Limit(50),
    "intersperse": lambda: sequence.Intersperse("[", ",", "]"),
    "zip_with_index": lambda: sequence.ZipWithIndex(),
    "drop_repeated": lambda: sequence.DropRepeated(lambda a, b: a // 3 == b // 3),
    "map": lambda: transform.Map(lambda x: x * 2),
    "filter": lambda: transform.Filter(lambda x: x % 3),
    "map_concat": lambda: transform.MapConcat(lambda x: [x] * (x % 3)),
    "stateful_map": lambda: transform.StatefulMap(lambda: [], lambda s, x: (s + [x], sum(s)), lambda s: len(s)),
    "stateful_map_concat": lambda: transform.StatefulMapConcat(_running_pairs),
    "grouped_weighted": lambda: collection.GroupedWeighted(5, lambda x: x % 4 + 1),
    "grouped_adjacent_by": lambda: collection.GroupedAdjacentBy(lambda x: x // 4),
    "take_last": lambda: collection.TakeLast(3),
}


def _running_pairs():
    seen = []

    def fn(x):
        seen.append(x)
        return [len(seen), x] if x % 2 else []

    return fn


@pytest.mark.parametrize("cut", [0, 1, 5, 13, 20])
@pytest.mark.parametrize("name", sorted(STAGES))
def test_logic_cut_and_restore_equals_the_uninterrupted_run(name, cut):
    check_flow(STAGES[name], ELEMS, cut)


def test_map_concat_cut_in_the_middle_of_an_iterable_keeps_the_rest():
    """A list iterator half consumed is saved as its remaining elements (pulls bounded by the cut)."""
    make = lambda: transform.MapConcat(lambda x: [x, x + 100, x + 200])  # noqa: E731
    first, second, state = run_cut(make, [[1, 2]], [1], demand_before=[2])
    assert first.outputs() == [1, 101]
    assert state["outputs"] == [201]
    assert first.outputs() + second.outputs() == [1, 101, 201, 2, 102, 202]


def test_map_concat_with_a_generator_in_progress_is_not_ready():
    make = lambda: transform.MapConcat(lambda x: (y for y in (x, x + 1, x + 2)))  # noqa: E731
    from operator_state_kit import Run

    r = Run(make())
    r.pump([[1]], complete=False, demand=[1])
    assert r.outputs() == [1] and not r.logic.ready_for_snapshot()
    r.pump([[1]], complete=False, demand=[3])
    assert r.outputs() == [1, 2, 3] and r.logic.ready_for_snapshot()


def test_scan_restored_does_not_emit_zero_again():
    first, second, state = run_cut(STAGES["scan"], [[1, 2, 3]], [2])
    assert first.outputs() == [0, 1, 3] and state == (3, True)
    assert second.outputs() == [6]


def test_take_restored_with_nothing_left_completes_at_once():
    first, second, state = run_cut(lambda: slicing.Take(2), [[1, 2, 3]], [1], demand_before=[1])
    assert state == 1 and second.outputs() == [2]
    from operator_state_kit import Run

    done = Run(slicing.Take(2), 0, restore=True)
    assert [e.kind for e in done.ends()] == ["OnComplete"]


def test_buffer_keeps_its_elements_under_backpressure():
    from atoll._impl.ops.buffer import Buffer, OverflowStrategy

    make = lambda: Buffer(4, OverflowStrategy.backpressure)  # noqa: E731
    first, second, state = run_cut(make, [ELEMS], [6], demand_before=[1])
    assert first.outputs() == [0] and state == [1, 2, 3, 4]
    assert first.outputs() + second.outputs() == ELEMS


def test_stateful_map_state_is_a_copy_taken_at_the_cut():
    make = STAGES["stateful_map"]
    from operator_state_kit import Run

    r = Run(make())
    r.pump([[1, 2]], complete=False)
    saved = r.logic.save_to_snapshot()
    r.pump([[1, 2, 3]], complete=False)
    assert saved == [1, 2]


# ---------------------------------------------------------------------------------------------- round trip
N = 60
BLUEPRINTS = {
    "scan": lambda: Source.range(0, N).scan(0, operator.add),
    "fold_grouped": lambda: Source.range(0, N).grouped(2).map(sum),
    "sliding": lambda: Source.range(0, N).sliding(3, 2),
    "take_drop": lambda: Source.range(0, N + 20).drop(10).take(N),
    "zip_with_index": lambda: Source.range(0, N).zip_with_index(),
    "intersperse": lambda: Source.range(0, N).intersperse(-1),
    "map_concat": lambda: Source.range(0, N // 2).map_concat(lambda x: [x, x]),
    "stateful_map": lambda: Source.range(0, N).stateful_map(lambda: 0, lambda s, x: (s + x, s)),
    "drop_repeated": lambda: Source.range(0, N * 2).map(lambda x: x // 2).drop_repeated(),
    "buffer": lambda: Source.range(0, N).buffer(8, OverflowStrategy.backpressure),
    "from_iterator_replay": lambda: Source.from_iterator(lambda: iter(range(N)), replay="skip"),
    "unfold": lambda: Source.unfold(0, lambda s: None if s >= N else (s + 1, s * s)),
    "from_list": lambda: Source.from_iterable(list(range(N))).filter(lambda x: x % 5),
}


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("at", [0, 17, 28])
@pytest.mark.parametrize("name", sorted(BLUEPRINTS))
def test_round_trip(name, at, fusion, tmp_path):
    expected, got = checkpoint_round_trip(BLUEPRINTS[name], at=at, storage=str(tmp_path), fusion=fusion)
    assert got == expected


@pytest.mark.parametrize("fusion", [True, False])
def test_round_trip_at_the_last_output(fusion, tmp_path):
    expected, got = checkpoint_round_trip(BLUEPRINTS["scan"], at=N, storage=str(tmp_path), fusion=fusion)
    assert got == expected and len(expected) == N + 1


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("at", [0, 31, N - 1])
def test_round_trip_into_a_fold_sink(at, fusion, tmp_path):
    expected, got = checkpoint_round_trip(lambda: Source.range(0, N), sink=lambda: Sink.fold(0, operator.add),
                                          at=at, storage=str(tmp_path), fusion=fusion)
    assert got == expected == sum(range(N))
