"""Cycles built with GraphDSL, and streaming recursion, on both materializers.

The cycle cases follow the examples of Pekko's docs (GraphCyclesSpec): a merge-broadcast loop that
deadlocks, the same loop made live by a dropping buffer on the feedback edge (here with
``MergePreferred``, as Atoll's GraphDSL docstring recommends), the dead and the live zipping cycle.
Then a feedback loop that ends by itself (Collatz sequences: an element goes round until it reaches
1), and the Kafka Streams recursion KIP's example (counting the descendants of every node of a tree
whose edges arrive as a stream) with ``Source.recursively``.
"""
from __future__ import annotations

import random

from atoll import (
    Broadcast,
    ClosedShape,
    Concat,
    Flow,
    Keep,
    KillSwitches,
    Merge,
    MergePreferred,
    OverflowStrategy,
    Partition,
    Sink,
    Source,
    ZipWith,
)
from atoll.testkit import TestSink

from dsl_helpers import QUIET, closed

N = 1000  # elements of the finite sources: far more than any loop can hold


def drain(probe, quiet: float = QUIET) -> list:
    """Elements the probe receives until nothing arrives for ``quiet`` seconds (fails on a terminal
    event). Only the probe's public API: on Ray the probe is a handle to an island's object."""
    got = []
    while True:
        try:
            probe.expect_no_message(quiet)
            return got
        except AssertionError:
            ev = probe.expect_event()
            if ev[0] != "next":
                raise AssertionError(f"the stream ended with {ev!r} after {got!r}") from None
            got.append(ev[1])


def rest_until_complete(probe) -> list:
    got = []
    while True:
        ev = probe.expect_event()
        if ev[0] == "complete":
            return got
        assert ev[0] == "next", ev
        got.append(ev[1])


# ============================================================================================== merge-broadcast loops


def test_unbuffered_merge_broadcast_cycle_deadlocks(mat):
    """source -> Merge -> (kill switch) -> map -> Broadcast -> sink, with the broadcast's second
    output fed back into the merge: the broadcast waits for the merge to take the element it fed
    back, the merge waits for the broadcast to pull. The sink, asking for everything, gets a few
    elements and then nothing; the kill switch ends the stalled graph."""

    def build(b, switch, sink):
        merge = b.add(Merge(2))
        bcast = b.add(Broadcast(2))
        Source.range(0, N) >> merge.in_(0)
        merge.out >> switch.in_
        switch.out >> Flow().map(lambda x: x) >> bcast.in_
        bcast.out(0) >> sink.in_
        bcast.out(1) >> merge.in_(1)
        return ClosedShape

    switch, probe = closed(build, KillSwitches.single(), TestSink.probe(), combine=Keep.both).run(mat)
    probe.request(N)
    assert probe.expect_next() == 0
    stalled_at = 1 + len(drain(probe))
    probe.expect_no_message(QUIET)  # stalled, with demand for everything left
    switch.shutdown()
    assert stalled_at + len(rest_until_complete(probe)) < N


def _live_loop(mat, merge_preferred: bool):
    n = 10

    def build(b, switch, sink):
        merge = b.add(MergePreferred(1) if merge_preferred else Merge(2))
        feedback_in = merge.preferred if merge_preferred else merge.in_(1)
        bcast = b.add(Broadcast(2))
        Source.range(0, n) >> merge.in_(0)
        merge.out >> switch.in_
        switch.out >> Flow().map(lambda x: x) >> bcast.in_
        bcast.out(0) >> sink.in_
        bcast.out(1) >> Flow().buffer(10, OverflowStrategy.drop_head) >> feedback_in
        return ClosedShape

    switch, probe = closed(build, KillSwitches.single(), TestSink.probe(), combine=Keep.both).run(mat)
    probe.request(5 * n)
    got = probe.expect_next_n(5 * n)  # five times what the source has: elements recirculate
    assert got[0] == 0 and set(got) <= set(range(n))
    switch.shutdown()
    rest_until_complete(probe)


def test_merge_preferred_with_dropping_buffer_on_the_feedback_edge_keeps_the_cycle_live(mat):
    """The loop above with ``buffer(10, drop_head)`` on the feedback edge into the preferred input:
    the buffer always takes the fed-back element, so the broadcast never waits; the loop keeps
    running and the sink gets far more elements than the source has. The kill switch ends it."""
    _live_loop(mat, merge_preferred=True)


def test_merge_with_dropping_buffer_on_the_feedback_edge_keeps_the_cycle_live(local_mat):
    """The same with a plain Merge (the form of Pekko's docs)."""
    _live_loop(local_mat, merge_preferred=False)


# ============================================================================================== zipping cycles


def test_zipping_cycle_without_a_starting_element_is_dead(local_mat):
    """ZipWith whose second input is fed back from its own output never gets a pair together."""

    def build(b, switch, sink):
        zip_ = b.add(ZipWith(lambda left, right: right))
        bcast = b.add(Broadcast(2))
        Source.range(0, N) >> zip_.in0
        zip_.out >> switch.in_
        switch.out >> Flow().map(lambda x: x) >> bcast.in_
        bcast.out(0) >> sink.in_
        bcast.out(1) >> zip_.in1
        return ClosedShape

    switch, probe = closed(build, KillSwitches.single(), TestSink.probe(), combine=Keep.both).run(local_mat)
    probe.request(1)
    probe.expect_no_message(QUIET)
    switch.shutdown()
    probe.expect_complete()


def test_zipping_cycle_with_a_starting_element_is_live_and_completes(mat):
    """A Concat puts one element in front of the feedback edge: the zip gets going, emits every
    source element, and the whole loop completes when the source does."""

    def build(b, sink):
        zip_ = b.add(ZipWith(lambda left, right: left))
        bcast = b.add(Broadcast(2))
        concat = b.add(Concat(2))
        Source.range(0, 50) >> zip_.in0
        zip_.out >> Flow().map(lambda x: x) >> bcast.in_
        bcast.out(0) >> sink.in_
        concat.out >> zip_.in1
        Source.single(0) >> concat.in_(0)
        bcast.out(1) >> concat.in_(1)
        return ClosedShape

    assert closed(build, Sink.seq()).run(mat).result(20) == list(range(50))


# ============================================================================================== a loop that ends itself


def collatz_steps(n: int) -> int:
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def collatz_step(e):
    start, n, steps = e
    return (start, n // 2 if n % 2 == 0 else 3 * n + 1, steps + 1)


def test_collatz_feedback_loop_ends_when_every_element_reached_1(mat):
    """source -> Merge -> Partition: elements that reached 1 leave through ``take(len(starts))`` to
    the sink, the others go round through the step (its own island) and a buffer that holds every
    element there is, so the loop can never fill up. When the last element left, ``take`` completes;
    the eager-cancel partition then tears the loop down, and the graph ends by itself."""
    starts = list(range(1, 28))
    expected = {s: collatz_steps(s) for s in starts}

    def build(b, sink):
        step = b.add(Flow().map(collatz_step).buffer(len(starts), OverflowStrategy.backpressure).island())
        merge = b.add(Merge(2))
        part = b.add(Partition(2, lambda e: 0 if e[1] == 1 else 1, eager_cancel=True))
        Source.from_iterable([(s, s, 0) for s in starts]) >> merge.in_(0)
        merge.out >> part.in_
        part.out(0) >> Flow().take(len(starts)) >> sink.in_
        part.out(1) >> step.in_
        step.out >> merge.in_(1)
        return ClosedShape

    result = closed(build, Sink.seq()).run(mat).result(30)
    assert len(result) == len(starts)
    assert {start: steps for start, n, steps in result} == expected
    assert all(n == 1 for _, n, _ in result)


# ============================================================================================== streaming recursion (KIP)


# the tree: node -> parent (0 is the root)
TREE = {1: 0, 2: 0, 3: 1, 4: 1, 5: 3, 6: 3, 7: 2, 8: 7, 9: 4, 10: 9, 11: 9, 12: 5, 13: 12, 14: 0}


def expected_descendant_counts(tree):
    """(node, number of descendants) for every node with any, computed directly from the tree."""
    children = {}
    for child, parent in tree.items():
        children.setdefault(parent, []).append(child)

    def size(node):  # nodes in the subtree below ``node``
        return sum(1 + size(c) for c in children.get(node, ()))

    return sorted((node, size(node)) for node in children)


def edges_in_order(tree):
    """(child, parent) edges, every parent's own edge before its children's (the KIP's in-order case)."""
    depth = {}

    def d(n):
        if n not in depth:
            depth[n] = 0 if n not in tree else 1 + d(tree[n])
        return depth[n]

    return sorted(tree.items(), key=lambda e: (d(e[0]), e[0]))


def count_ancestor(counts, edge):
    counts = dict(counts)
    counts[edge[1]] = counts.get(edge[1], 0) + 1
    return counts


def descendants_graph(edges, parents, island: bool):
    """The KIP's example: each (node, ancestor) record is joined with the parents table to give
    (node, ancestor's parent); the root has no parent, which ends the recursion. Every record is a
    (descendant, ancestor) pair, so counting records per ancestor counts descendants."""

    def op(s):
        return s.filter(lambda e: e[1] in parents).map(lambda e: (e[0], parents[e[1]]))

    source = Source.from_iterable(edges)
    if island:
        source = source.island()
    recursive = source.recursively(op)
    if island:
        recursive = recursive.island()  # the recursive stage in an island of its own
    return recursive.to_mat(Sink.fold({}, count_ancestor), Keep.right)


def test_expected_descendant_counts_of_a_small_tree():
    assert expected_descendant_counts({1: 0, 2: 0, 3: 1, 4: 1, 5: 3, 6: 3, 7: 2}) == [(0, 7), (1, 4), (2, 1), (3, 2)]
    assert edges_in_order({2: 1, 1: 0}) == [(1, 0), (2, 1)]


def test_recursion_counts_descendants_of_every_node(mat):
    """Completes on its own; on Ray the source and the recursive stage each have an island."""
    counts = descendants_graph(edges_in_order(TREE), dict(TREE), island=True).run(mat).result(30)
    assert sorted(counts.items()) == expected_descendant_counts(TREE)


def test_recursion_counts_descendants_with_edges_in_any_order(local_mat):
    edges = list(TREE.items())
    random.Random(7).shuffle(edges)
    counts = descendants_graph(edges, dict(TREE), island=False).run(local_mat).result(10)
    assert sorted(counts.items()) == expected_descendant_counts(TREE)


def test_recursion_with_a_step_that_is_not_a_plain_chain(local_mat):
    """A step with a stateful operator runs as a substream per element; the result is the same."""

    def op(s):
        return s.filter(lambda e: e[1] in TREE).map(lambda e: (e[0], TREE[e[1]])).take(1)

    counts = Source.from_iterable(edges_in_order(TREE)).recursively(op).run_with(Sink.fold({}, count_ancestor), local_mat).result(10)
    assert sorted(counts.items()) == expected_descendant_counts(TREE)


def test_recursion_of_an_empty_stream_completes(local_mat):
    assert Source.empty().recursively(lambda s: s.filter(lambda x: False)).run_with(Sink.seq(), local_mat).result(5) == []
