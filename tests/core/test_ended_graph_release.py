"""A graph that ended holds none of its stream's elements: its handle (kept by the caller, or by the registry of
recent graphs a console reads) still answers ``islands()`` and its outcome, but the interpreters, with their stages,
buffers and in-flight elements, are let go. Before, the registry's 20 recent graphs kept every stage of each alive,
a ``Sink.seq``'s list of results included."""
from __future__ import annotations

import gc
import weakref

import pytest

from atoll import CheckpointSettings, Keep, KillSwitches, Materializer, OverflowStrategy, Sink, Source
from atoll.materializer import graph_registry


class Payload:
    """An element the test can watch die (a weak reference to each one made)."""

    __slots__ = ("n", "__weakref__")

    def __init__(self, n: int):
        self.n = n


def _watched(n: int, refs: list):
    """A replayable source of ``n`` new ``Payload`` objects, each watched in ``refs``."""
    def make(i: int) -> Payload:
        p = Payload(i)
        refs.append(weakref.ref(p))
        return p
    return Source.range(0, n).map(make)


def _alive(refs: list) -> int:
    gc.collect()
    return sum(1 for r in refs if r() is not None)


def _pipeline(refs: list, n: int, islands: bool):
    flow = _watched(n, refs).map(lambda p: p)
    if islands:
        flow = flow.island().buffer(64, OverflowStrategy.backpressure).island()
    return flow.to_mat(Sink.seq(), Keep.right)


@pytest.mark.parametrize("islands", [False, True], ids=["fused", "islands"])
def test_a_completed_graph_keeps_no_element_alive(mat, islands):
    refs: list = []
    result = _pipeline(refs, 500, islands).run(mat).result(10)
    assert [p.n for p in result] == list(range(500))
    graph = graph_registry.graphs()[-1].graph
    assert graph.wait(10)
    del result
    assert len(refs) == 500 and _alive(refs) == 0
    infos = graph.islands()   # the handle still answers, with the last figures
    assert len(infos) == (3 if islands else 1)
    assert all(i["state"] == "completed" and i["running_stages"] == 0 for i in infos)
    if islands:   # each of the two channels delivered every element
        assert sorted(i["elements_in"] for i in infos) == [0, 500, 500]


def test_a_cancelled_graph_keeps_none_of_the_elements_it_held(mat):
    """Elements waiting in a buffer and a channel when the graph is cancelled die with it."""
    refs: list = []
    switch, done = (_watched(10_000_000, refs).island().buffer(256, OverflowStrategy.backpressure)
                    .via_mat(KillSwitches.single(), Keep.right).island().throttle(100, 1.0)
                    .to_mat(Sink.ignore(), Keep.both).run(mat))
    graph = graph_registry.graphs()[-1].graph
    deadline = 200
    while len(refs) < 300 and deadline:   # the buffer and the channel have filled (throttle lets few through)
        graph.wait(0.05)
        deadline -= 1
    assert len(refs) >= 300
    graph.cancel()
    assert graph.wait(10)
    assert done.exception(10) is not None
    del switch, done
    assert _alive(refs) == 0
    assert all(i["state"] in ("completed", "failed") for i in graph.islands())


def test_a_checkpointed_graph_that_ended_keeps_no_element_alive(tmp_path):
    m = Materializer.local(checkpoint=CheckpointSettings(storage=str(tmp_path), interval=None))
    try:
        refs: list = []
        result = _pipeline(refs, 500, True).run(m).result(10)
        assert len(result) == 500
        graph = graph_registry.graphs()[-1].graph
        assert graph.wait(10)
        del result
        assert _alive(refs) == 0
        assert [i["state"] for i in graph.islands()] == ["completed"] * 3
    finally:
        m.shutdown()


def test_the_registry_holds_an_ended_graphs_blueprint_only_while_its_owner_does(mat):
    """A blueprint may hold the user's data (``from_iterable(rows)``): once the graph ended, the registry of recent
    graphs keeps it weakly, so the drawing is there while the owner keeps the blueprint, and the data dies with it."""
    rows = [Payload(i) for i in range(100)]
    refs = [weakref.ref(p) for p in rows]
    blueprint = Source.from_iterable(rows).to_mat(Sink.ignore(), Keep.right)
    del rows
    blueprint.run(mat).result(10)
    entry = graph_registry.graphs()[-1]
    assert entry.graph.wait(10)
    assert entry.drawing() is not None   # the owner still has the blueprint
    kept = [Payload(i) for i in range(100)]
    kept_refs = [weakref.ref(p) for p in kept]
    second = Source.from_iterable(kept).to_mat(Sink.ignore(), Keep.right)
    second.run(mat).result(10)
    later = graph_registry.graphs()[-1]
    assert later.graph.wait(10)
    del blueprint, second, kept
    assert _alive(refs) == 0 and _alive(kept_refs) == 0
    assert later.drawing() is None and entry.drawing() is not None   # the first was drawn while its blueprint lived
