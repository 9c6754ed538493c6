"""``recursively`` with event time across a restore: windows after the loop come out the same as uninterrupted.

The loop holds a watermark until it emitted every descendant of the elements before it (DESIGN 10), and a cut
inside it records the loop's queues, the watermarks waiting among them and the windows' panes (DESIGN 11). Each
case checkpoints mid-stream (``checkpoint_round_trip``), restores, and compares the windows (or, without windows,
each root's descendants in the loop's breadth-first order). Timestamps are assigned before the loop (descendants
carry their root's) with a bound wider than the disorder, so no element is late: which elements are late behind a
loop would depend on how the loop interleaves roots, which a restore may change. The cases are the configurations
of a randomized campaign (300 random graphs restored on ``Materializer.local``, 286 on ``Materializer.ray``,
none differing), kept as a regression guard.
"""
from __future__ import annotations

from collections import defaultdict

import pytest

from atoll import Aggregate, OverflowStrategy, Source
from atoll.testkit.round_trip import checkpoint_round_trip
from recursion_trees import children  # tests/: the recovery tests' tree, (r, k) -> (r, 2k), (r, 2k + 1)

ROOTS = 30
DEPTH = 6  # a root (r, 1) grows (r, 1 .. 2 * DEPTH - 1)
#: 3 apart, up to 5 early or late: a bound of 12 covers the disorder (at most 10 between two roots)
TIMESTAMPS = [max(0, 3 * i + (i * 7) % 11 - 5) for i in range(ROOTS)]
BOUND = 12


def _step(kind):
    def step(s):
        s = s.filter(lambda e: e[1] < DEPTH)
        if kind == "island":  # the step's second half in an island of its own: the loop crosses a channel twice
            s = s.island()
        s = s.map_concat(children)
        if kind == "substream":  # take has no stateless form: each expansion runs as a substream
            s = s.take(2)
        elif kind == "buffer":
            s = s.buffer(3, OverflowStrategy.backpressure)
        return s
    return step


def _graph(step, window, islands):
    def make():
        s = Source.range(0, ROOTS).map(lambda i: (i, 1)).with_timestamps(lambda e: TIMESTAMPS[e[0]],
                                                                         max_out_of_orderness=BOUND)
        if islands:
            s = s.island()
        s = s.recursively(_step(step))
        if islands:
            s = s.island()
        key, agg = (lambda e: e[1] % 3), Aggregate.sum(lambda e: e[1])
        if window == "tumbling":
            s = s.tumbling_window(10, key=key, aggregate=agg)
        elif window == "sliding":
            s = s.sliding_window(10, 2, key=key, aggregate=agg)
        elif window == "session":
            s = s.session_window(4, key=key, aggregate=agg)
        return s
    return make


def _per_root(elements):
    roots = defaultdict(list)
    for r, v in elements:
        roots[r].append(v)
    return dict(roots)


@pytest.mark.parametrize("islands", [False, True], ids=["one island", "loop in an island"])
@pytest.mark.parametrize("window", ["tumbling", "sliding", "session", "none"])
@pytest.mark.parametrize("step", ["fused", "island", "substream", "buffer"])
def test_windows_after_a_loop_restore_as_uninterrupted(step, window, islands, tmp_path):
    fusion = (len(step) + len(window)) % 2 == 0  # both, spread over the cases
    make = _graph(step, window, islands)
    at = 17 if window != "none" else ROOTS * (2 * DEPTH - 1) // 3
    expected, got = checkpoint_round_trip(make, at, storage=str(tmp_path), fusion=fusion, timeout=30)
    assert expected, "the uninterrupted run emitted nothing"
    if window == "none":
        assert sorted(got) == sorted(expected)
        assert len(got) == ROOTS * (2 * DEPTH - 1)
        assert _per_root(got) == _per_root(expected)  # each root's descendants in the loop's order
    else:
        # windows fired at one watermark may come out in another order after a restore (DESIGN 11): compare sets
        assert len(got) == len(expected)
        assert sorted(map(repr, got)) == sorted(map(repr, expected))
        assert all(w.timing == "on_time" for w in got)
