"""Chunk forms of the fan-in junctions against the element-wise reference (``fusion=False``).

Deterministic junctions (``ZipWith``, ``MergeSorted``, ``Interleave``, ``OrElse``) must produce the
same events under the same demand. The junctions whose element order depends on arrival
(``MergePreferred``, ``MergePrioritized``) are compared on what Pekko fixes: every element of each
input in its order, nothing beyond demand, the same completion or failure, and every element an input
delivered before its failure out before that failure. Signals interleaved with elements come out
exactly once, after every element that arrived before them and before every element after them.
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
from atoll.testkit import TestSink


class Boom(Exception):
    def __eq__(self, other):
        return type(other) is type(self) and other.args == self.args

    def __hash__(self):
        return hash(self.args)


CHUNKED = [dict(chunk_size=1), dict(chunk_size=3), dict(chunk_size=1024)]


def _fail_at(n):
    def f(x):
        if x == n:
            raise Boom("failed at", n)
        return x

    return f


def _events_until_quiet(probe):
    """Every event the probe got, until nothing more comes (completion and failure need no demand)."""
    out = []
    while True:
        try:
            probe.expect_no_message(0.02)
            return out
        except AssertionError:
            ev = probe.expect_event()
            out.append(("error", ev[1]) if ev[0] == "error" else ev)


def _run_seq(graph, **settings):
    m = Materializer.local(**settings)
    try:
        try:
            return ("ok", graph.run(m).result(10))
        except Exception as e:  # noqa: BLE001
            assert not isinstance(e, TimeoutError), "the stream did not end"
            return ("err", e)
    finally:
        m.shutdown()


# ---------------------------------------------------------------------------------------------- DESIGN.md section 9, bugs 2 and 3
def _broadcast_zip(fail0, fail1, sink, n=10, depth0=2):
    def build(b, s):
        bc = b.add(Broadcast(2))
        z = b.add(Zip())
        Source.from_iterable(range(n)) >> bc.in_
        branch0 = Flow()
        for _ in range(depth0 - 1):
            branch0 = branch0.map(lambda x: x)
        bc.out(0) >> branch0.map(_fail_at(fail0)) >> z.ins[0]
        bc.out(1) >> Flow().map(_fail_at(fail1)) >> z.ins[1]
        z.out >> s.in_
        return ClosedShape

    return RunnableGraph.from_graph(GraphDSL.create(build, sink))


@pytest.mark.parametrize("fails", [(5, 7), (7, 5), (0, 9), (9, 0), (3, 4)])
@pytest.mark.parametrize("depth0", [1, 2, 3])
def test_bug2_the_failure_of_the_earliest_element_wins_through_broadcast_and_zip(fails, depth0):
    # element-wise the branches run in lockstep: the failure at the smaller element comes first, after
    # the pairs before it; a chunk form used to let the branch that got further fail the stream first
    want = _run_seq(_broadcast_zip(*fails, Sink.seq(), depth0=depth0), fusion=False)
    assert want == ("err", Boom("failed at", min(fails)))
    for s in CHUNKED:
        assert _run_seq(_broadcast_zip(*fails, Sink.seq(), depth0=depth0), **s) == want, s


@pytest.mark.parametrize("fails", [(5, 7), (7, 5), (2, 6)])
def test_bug2_under_demand_the_pairs_before_the_failure_come_first(fails):
    def run(**settings):
        m = Materializer.local(**settings)
        try:
            probe = _broadcast_zip(*fails, TestSink.probe()).run(m)
            probe.request(3)
            first = _events_until_quiet(probe)
            probe.request(20)
            return first, _events_until_quiet(probe)
        finally:
            m.shutdown()

    want = run(fusion=False)
    k = min(fails)
    assert sum(want, []) == [("next", (i, i)) for i in range(k)] + [("error", Boom("failed at", k))]
    for s in CHUNKED:
        assert run(**s) == want, s


def _resumed_zip_then_input_failure(sink):
    def comb(a, b):
        if a == 0:
            raise Boom("zip", a)
        return (a, b)

    def build(b, s):
        bc = b.add(Broadcast(2))
        zw = GraphDSL.create(lambda bb: bb.add(ZipWith(comb, 2)))
        z = b.add(zw.with_attributes(Attributes.supervision_strategy(Supervision.resuming_decider)))
        Source.from_iterable(range(5)) >> bc.in_
        bc.out(0) >> Flow().map(lambda x: x) >> z.ins[0]
        bc.out(1) >> Flow().map(_fail_at(4)) >> z.ins[1]
        z.out >> s.in_
        return ClosedShape

    return RunnableGraph.from_graph(GraphDSL.create(build, sink))


@pytest.mark.parametrize("requests", [(2, 6), (1, 1, 1, 5), (3, 3), (8,)])
def test_bug3_zip_with_keeps_the_combinations_before_an_input_failure(requests):
    def run(**settings):
        m = Materializer.local(**settings)
        try:
            probe = _resumed_zip_then_input_failure(TestSink.probe()).run(m)
            seen = []
            for r in requests:
                probe.request(r)
                seen.append(_events_until_quiet(probe))
            return seen
        finally:
            m.shutdown()

    want = run(fusion=False)
    assert sum(want, []) == [("next", (1, 1)), ("next", (2, 2)), ("next", (3, 3)), ("error", Boom("failed at", 4))]
    for s in CHUNKED:
        assert run(**s) == want, s


def test_zip_input_failure_with_unmatched_elements_waits_for_their_combinations():
    # branch 1 fails at 7 after delivering 0..6; branch 0 completes after 0..6: the pairs go out, then
    # the completion of branch 0 ends the stream before the failure of branch 1 (element-wise, the
    # failing element is never pulled)
    def build(b, s):
        bc = b.add(Broadcast(2))
        z = b.add(Zip())
        Source.from_iterable(range(10)) >> bc.in_
        bc.out(0) >> Flow().take(7) >> z.ins[0]
        bc.out(1) >> Flow().map(_fail_at(7)) >> z.ins[1]
        z.out >> s.in_
        return ClosedShape

    g = RunnableGraph.from_graph(GraphDSL.create(build, Sink.seq()))
    want = _run_seq(g, fusion=False)
    assert want == ("ok", [(i, i) for i in range(7)])
    for s in CHUNKED:
        assert _run_seq(g, **s) == want, s
