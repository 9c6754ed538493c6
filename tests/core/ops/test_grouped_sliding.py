"""grouped and sliding: ported from Pekko's FlowGroupedSpec and FlowSlidingSpec.

FlowSlidingSpec compares the operator with Scala's ``Iterator.sliding`` on generated
(length, window, step) triples; here the comparison is with ``reference_sliding`` below, written
from the same contract, over seeded random triples of the same three kinds.
"""
from __future__ import annotations

import random

import pytest
from ops_kit import RANDOM_TEST_RANGE, run_script

from atoll import Flow, Keep, Sink, Source
from atoll.testkit import TestSink, TestSource


# =========================================================================== grouped
def _random_group(rng, n):
    s = [rng.randint(-(2**31), 2**31 - 1) for _ in range(n)]
    return s, [s]


@pytest.mark.parametrize("seed", RANDOM_TEST_RANGE)
def test_grouped_groups_evenly(mat, seed):
    rng = random.Random(seed)
    size = rng.randint(1, 15)
    phases = [_random_group(rng, size) for _ in RANDOM_TEST_RANGE]
    run_script(mat, lambda f: f.grouped(size), phases, seed=seed)


@pytest.mark.parametrize("seed", RANDOM_TEST_RANGE)
def test_grouped_groups_with_rest(mat, seed):
    rng = random.Random(seed)
    size = rng.randint(1, 15)
    phases = [_random_group(rng, size) for _ in RANDOM_TEST_RANGE] + [_random_group(rng, 1)]
    # the one-element rest only comes out when upstream completes (unless groups have size 1)
    run_script(mat, lambda f: f.grouped(size), phases, seed=seed, flush_on_complete=1 if size > 1 else 0)


def test_grouped_emits_a_full_group_without_waiting_for_more(mat):
    src, sink = TestSource.probe().grouped(2).to_mat(TestSink.probe(), Keep.both).run(mat)
    sink.request(1)
    src.send_next_many(1, 2)
    sink.expect_next([1, 2])
    src.send_next(3)
    sink.request(1)
    sink.expect_no_message(0.05)
    src.send_complete()
    sink.expect_next([3])
    sink.expect_complete()


def test_grouped_of_an_empty_stream_emits_nothing(mat):
    assert Source.empty().grouped(3).run_with(Sink.seq(), mat).result(3) == []


def test_grouped_groups_are_independent_lists(mat):
    out = Source.range(0, 7).grouped(3).run_with(Sink.seq(), mat).result(3)
    assert out == [[0, 1, 2], [3, 4, 5], [6]]
    out[0].append(99)
    assert out[1] == [3, 4, 5]


# =========================================================================== sliding
def reference_sliding(xs, n, step):
    """Windows of ``n`` elements starting every ``step`` elements; after the last full window, one
    shorter window with the remaining elements, if it holds any element no window emitted yet (so an
    input shorter than ``n`` gives one short window, and an empty input none)."""
    out = []
    covered = 0  # elements [0, covered) are in some emitted window
    start = 0
    while start < len(xs):
        end = start + n
        if end > len(xs):
            if len(xs) > covered:
                out.append(list(xs[start:]))
            break
        out.append(list(xs[start:end]))
        covered = end
        start += step
    return out


def test_reference_sliding_matches_known_cases():
    assert reference_sliding([1, 2, 3, 4, 5], 3, 2) == [[1, 2, 3], [3, 4, 5]]
    assert reference_sliding([1, 2, 3, 4, 5, 6], 3, 2) == [[1, 2, 3], [3, 4, 5], [5, 6]]
    assert reference_sliding([1, 2, 3, 4, 5], 4, 3) == [[1, 2, 3, 4], [4, 5]]
    assert reference_sliding([1, 2, 3, 4, 5], 2, 4) == [[1, 2], [5]]
    assert reference_sliding([1, 2, 3], 2, 4) == [[1, 2]]
    assert reference_sliding([1, 2], 3, 1) == [[1, 2]]
    assert reference_sliding([1, 2, 3, 4], 2, 2) == [[1, 2], [3, 4]]
    assert reference_sliding([], 2, 1) == []


def _check(mat, cases):
    for length, win, step in cases:
        got = (
            Source.from_iterator(lambda length=length: iter(range(length)))
            .sliding(win, step)
            .run_fold([], lambda acc, w: acc + [w], mat)
            .result(3)
        )
        assert got == reference_sliding(list(range(length)), win, step), (length, win, step)


def _cases(seed, step_of):
    rng = random.Random(seed)
    out = []
    for _ in range(100):
        length, win = rng.randint(0, 31), rng.randint(1, 61)
        out.append((length, win, step_of(rng, win)))
    return out


def test_sliding_behaves_like_the_reference_with_step_below_window(mat):
    _check(mat, _cases(1, lambda rng, win: rng.randint(1, max(win - 1, 1))))


def test_sliding_behaves_like_the_reference_with_step_equal_to_window(mat):
    _check(mat, _cases(2, lambda rng, win: win))


def test_sliding_behaves_like_the_reference_with_step_above_window(mat):
    _check(mat, _cases(3, lambda rng, win: rng.randint(win + 1, 127)))


def test_sliding_behaves_like_the_reference_on_small_inputs_exhaustively(mat):
    _check(mat, [(length, win, step) for length in range(0, 7) for win in range(1, 5) for step in range(1, 6)])


def test_sliding_works_with_empty_sources(mat):
    seen = []
    done = Source.empty().sliding(1).run_foreach(seen.append, mat)
    done.result(3)
    assert seen == []


def test_sliding_emits_each_window_on_demand(mat):
    src, sink = TestSource.probe().sliding(3, 1).to_mat(TestSink.probe(), Keep.both).run(mat)
    sink.request(1)
    src.send_next_many(1, 2, 3)
    sink.expect_next([1, 2, 3])
    src.send_next(4)
    sink.expect_no_message(0.05)
    sink.request(1)
    sink.expect_next([2, 3, 4])
    src.send_complete()
    sink.expect_complete()  # nothing new since the last full window


# =========================================================================== build time
@pytest.mark.parametrize(
    "build, pattern",
    [
        (lambda: Flow().grouped(0), r"grouped: argument 'n' must be >= 1, got 0"),
        (lambda: Flow().grouped(-3), r"grouped: argument 'n' must be >= 1, got -3"),
        (lambda: Flow().sliding(0), r"sliding: argument 'n' must be >= 1, got 0"),
        (lambda: Flow().sliding(2, 0), r"sliding: argument 'step' must be >= 1, got 0"),
        (lambda: Source.single(1).sliding(2, -1), r"sliding: argument 'step' must be >= 1, got -1"),
    ],
)
def test_grouped_and_sliding_reject_bad_sizes_at_build_time(build, pattern):
    with pytest.raises(ValueError, match=pattern):
        build()


@pytest.mark.parametrize(
    "build, pattern",
    [
        (lambda: Flow().grouped(2.0), r"grouped: argument 'n' must be an int"),
        (lambda: Flow().grouped(True), r"grouped: argument 'n' must be an int"),
        (lambda: Flow().sliding("3"), r"sliding: argument 'n' must be an int"),
        (lambda: Flow().sliding(3, None), r"sliding: argument 'step' must be an int"),
    ],
)
def test_grouped_and_sliding_reject_non_int_sizes_at_build_time(build, pattern):
    with pytest.raises(TypeError, match=pattern):
        build()
