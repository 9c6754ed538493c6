"""On Ray, the driver's handle of an ended graph (kept by the caller, or by the registry of recent graphs) holds none
of the values its futures carried: a ``Sink.seq``'s list, once the caller dropped it, is gone. Before, the island
records kept the driver's futures, and the monitor thread the last poll result, until the next graph."""
from __future__ import annotations

import gc
import weakref

from atoll import Keep, Sink, Source
from atoll.materializer import graph_registry


def test_an_ended_ray_graph_keeps_none_of_its_results(rmat):
    # sets: built on the workers from the standard library, and weakly referable on the driver
    blueprint = (Source.range(0, 300).map(lambda i: {i}).island().map(lambda s: s).island()
                 .to_mat(Sink.seq(), Keep.right))
    result = blueprint.run(rmat).result(60)
    assert [min(s) for s in result] == list(range(300))
    refs = [weakref.ref(s) for s in result]
    graph = graph_registry.graphs()[-1].graph
    assert graph.wait(30)
    del result
    gc.collect()
    assert sum(1 for r in refs if r() is not None) == 0
    assert [i["state"] for i in graph.islands()] == ["completed"] * 3
