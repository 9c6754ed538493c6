"""Fuzzing mode (Pekko's ``fuzzing-mode``): shuffled event order, the same stream semantics.

``Materializer.local(fuzzing=seed)`` makes every interpreter queue each event before or after the last
queued one at random and turns event chasing off. The order on one connection is untouched, so every
operator must produce exactly what it produces in the normal mode; only the interleaving of
independent branches may differ (and does: the first test checks that the mode is not a no-op).
"""
from __future__ import annotations

import random

import pytest

from atoll import (
    Broadcast,
    ClosedShape,
    Flow,
    GraphDSL,
    Materializer,
    Merge,
    OverflowStrategy,
    RunnableGraph,
    Sink,
    Source,
    Zip,
)
from test_chunk_parity import Chain, _outcome, _random_sink, _random_source


def _merge_of_two_branches(trace: list, n: int = 30):
    """range(n) -> Broadcast(2) -> a map per branch logging ("a", x) / ("b", x) -> Merge -> seq."""

    def graph(b, sink):
        bcast = b.add(Broadcast(2))
        merge = b.add(Merge(2))
        Source.range(0, n) >> bcast.in_
        bcast.out(0) >> Flow().map(lambda x: trace.append(("a", x)) or ("a", x)) >> merge.in_(0)
        bcast.out(1) >> Flow().map(lambda x: trace.append(("b", x)) or ("b", x)) >> merge.in_(1)
        merge.out >> sink.in_
        return ClosedShape

    return RunnableGraph.from_graph(GraphDSL.create(graph, Sink.seq()))


def _run_merge(**settings):
    trace: list = []
    mat = Materializer.local(**settings)
    try:
        out = _outcome(_merge_of_two_branches(trace).run(mat))
    finally:
        mat.shutdown()
    return out, trace


@pytest.mark.parametrize("fusion", [True, False])
def test_fuzzing_shuffles_independent_branches_and_keeps_every_branch_in_order(fusion):
    normal, normal_trace = _run_merge(fusion=fusion)
    assert normal[0] == "ok"
    traces = set()
    for seed in range(12):
        out, trace = _run_merge(fusion=fusion, fuzzing=seed)
        assert out[0] == "ok"
        assert sorted(out[1]) == sorted(normal[1])  # the same elements
        for branch in ("a", "b"):  # each branch in its own order
            assert [x for t, x in out[1] if t == branch] == list(range(30))
            assert [x for t, x in trace if t == branch] == list(range(30))
        traces.add(tuple(trace))
    assert len(traces - {tuple(normal_trace)}) > 0, "fuzzing never changed the interleaving of the branches"


def test_the_same_seed_gives_the_same_order():
    assert _run_merge(fusion=False, fuzzing=3) == _run_merge(fusion=False, fuzzing=3)


@pytest.mark.parametrize("seed", range(40))
def test_random_chains_under_fuzzing_equal_the_normal_mode(seed):
    # a chain is one path: elements, completion, failure and every stage's calls are deterministic
    rng = random.Random(90_000 + seed)
    source_log, sink_log = [], []
    make_source, _ = _random_source(rng, source_log)
    chain = Chain(rng, generators=rng.random() < 0.3)
    make_sink, _ = _random_sink(rng, sink_log)
    chunk_size = rng.randint(1, 50)
    results = []
    for settings in (dict(fusion=False), dict(fusion=False, fuzzing=seed), dict(fusion=True, fuzzing=seed)):
        chain.clear()
        source_log.clear()
        sink_log.clear()
        mat = Materializer.local(chunk_size=chunk_size, **settings)
        try:
            out = _outcome(chain.apply(make_source()).run_with(make_sink(), mat))
        finally:
            mat.shutdown()
        results.append((settings, out, [list(source_log)] + chain.snapshot() + [list(sink_log)]))
    (_, ref_out, ref_logs), *fuzzed = results
    for settings, out, logs in fuzzed:
        assert out == ref_out, settings
        if not settings["fusion"]:  # element by element: the very same calls
            assert logs == ref_logs, settings


@pytest.mark.parametrize("seed", range(20))
def test_broadcast_zip_graphs_under_fuzzing_equal_the_normal_mode(seed):
    rng = random.Random(91_000 + seed)
    data = [rng.randint(0, 99) for _ in range(rng.randint(0, 200))]
    ks = [rng.randint(1, 5) for _ in range(2)]

    def make():
        def graph(b, sink):
            bcast = b.add(Broadcast(2))
            zip_ = b.add(Zip())
            Source.from_iterable(data) >> bcast.in_
            bcast.out(0) >> Flow().map(lambda x: x * ks[0]).filter(lambda x: True) >> zip_.ins[0]
            bcast.out(1) >> Flow().map(lambda x: x + ks[1]).buffer(rng.randint(1, 8), OverflowStrategy.backpressure) >> zip_.ins[1]
            zip_.out >> sink.in_
            return ClosedShape

        return RunnableGraph.from_graph(GraphDSL.create(graph, Sink.seq()))

    want = [(x * ks[0], x + ks[1]) for x in data]
    for settings in (dict(fusion=False, fuzzing=seed), dict(fusion=True, fuzzing=seed, chunk_size=rng.randint(1, 9))):
        mat = Materializer.local(**settings)
        try:
            assert _outcome(make().run(mat)) == ("ok", want), settings
        finally:
            mat.shutdown()


@pytest.mark.parametrize("bad", ["yes", 1.5])
def test_fuzzing_setting_is_checked(bad):
    with pytest.raises(ValueError, match="fuzzing"):
        Materializer.local(fuzzing=bad)
