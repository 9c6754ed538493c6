"""Chunk connections on ``Materializer.ray()``: random graphs whose branches run in islands of their
own give the same results and failures as the element-by-element local reference (``fusion=False``).

A small subset of tests/core/test_chunk_parity.py (Ray is slow on small machines); self-contained so
that the Ray workers can import what the user functions refer to (this module, by name).
"""
from __future__ import annotations

import random

import pytest

from atoll import (
    Attributes,
    Broadcast,
    ClosedShape,
    Flow,
    GraphDSL,
    Materializer,
    RunnableGraph,
    Sink,
    Source,
    Supervision,
    Zip,
    ZipWith,
)


class Boom(Exception):
    pass


def _outcome(fut):
    try:
        return ("ok", fut.result(60))
    except Exception as e:  # noqa: BLE001
        assert not isinstance(e, TimeoutError), "the stream did not end"
        return ("err", _root(e))


def _root(e: BaseException) -> str:
    """The user's exception as text, also when a Ray error wraps it."""
    cause = getattr(e, "cause", None)
    if isinstance(cause, BaseException):
        e = cause
    return f"{type(e).__name__}{e.args!r}"


def _bad_values(rng: random.Random, p: float) -> frozenset:
    if rng.random() < p:
        return frozenset(rng.randint(0, 60) for _ in range(rng.randint(1, 2)))
    return frozenset()


def _junction_graph(seed: int):
    """Source -> Broadcast(n) -> an island of maps per branch (failures in one branch) -> Zip/ZipWith (n)."""
    rng = random.Random(seed)
    n = rng.randint(2, 3)
    use_zip = n == 2 and rng.random() < 0.4
    data = [rng.randint(0, 60) for _ in range(rng.choice([0, rng.randint(2, 30), rng.randint(30, 300)]))]
    failing = rng.randrange(n)
    branches = []
    for b in range(n):
        flow = Flow()
        for m in range(rng.randint(1, 2)):
            bad = _bad_values(rng, 0.5) if b == failing else frozenset()
            k = rng.randint(1, 5)

            def fn(x, b=b, m=m, k=k, bad=bad):
                if x in bad:
                    raise Boom("branch", b, m, x)
                return (x * k + b) % 61

            flow = flow.map(fn)
        branches.append(flow.island())
    zip_bad = _bad_values(rng, 0.3) if not use_zip else frozenset()
    resume = rng.random() < 0.5

    def combine(*xs):
        if xs[0] in zip_bad:
            raise Boom("zip", xs)
        return sum(xs) * 3 + xs[-1]

    def build(sink):
        def graph(b, s):
            bcast = b.add(Broadcast(n))
            if use_zip:
                zip_ = b.add(Zip())
            else:
                zw = GraphDSL.create(lambda bb: bb.add(ZipWith(combine, n)))
                if resume:
                    zw = zw.with_attributes(Attributes.supervision_strategy(Supervision.resuming_decider))
                zip_ = b.add(zw)
            Source.from_iterable(data) >> bcast.in_
            for i, flow in enumerate(branches):
                bcast.out(i) >> flow >> zip_.ins[i]
            zip_.out >> s.in_
            return ClosedShape

        return RunnableGraph.from_graph(GraphDSL.create(graph, sink))

    sink = Sink.seq if rng.random() < 0.5 else (lambda: Sink.fold(0, lambda acc, x: (acc * 31 + hash(x)) % 1_000_003))
    return build, sink


def _reference(run):
    mat = Materializer.local(fusion=False)
    try:
        return run(mat)
    finally:
        mat.shutdown()


@pytest.mark.parametrize("seed", [1, 3, 5, 11])
def test_junction_branches_in_islands_on_ray_equal_unfused(rmat, seed):
    build, sink = _junction_graph(seed)
    expected = _reference(lambda m: _outcome(build(sink()).run(m)))
    assert _outcome(build(sink()).run(rmat)) == expected


def _linear(seed: int):
    rng = random.Random(seed)
    data = [rng.randint(0, 60) for _ in range(rng.randint(50, 500))]
    bad = frozenset([rng.randint(0, 60)])
    fail = rng.random() < 0.5

    def f(x):
        if fail and x in bad:
            raise Boom("map", x)
        return x * 3 % 61

    def g(x):
        if x in bad:
            raise Boom("resumed", x)
        return x % 2 == 0

    resumed = Flow().filter(g).with_attributes(Attributes.supervision_strategy(Supervision.resuming_decider))
    return lambda: (
        Source.from_iterable(data).map(lambda x: x + 1).map(f).island().via(resumed).map(lambda x: x * 2).island()
        .map_concat(lambda x: [x, x + 1]).filter_not(lambda x: x % 5 == 0)
    )


@pytest.mark.parametrize("seed", [1, 2])
def test_linear_chain_across_islands_on_ray_equal_unfused(rmat, seed):
    make = _linear(seed)
    expected = _reference(lambda m: _outcome(make().run_with(Sink.seq(), m)))
    assert _outcome(make().run_with(Sink.seq(), rmat)) == expected
