"""The offline drawing (to_dot/to_svg) and the progress figures of islands without channel boundaries."""
from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET

from atoll import Keep, Sink, Source, progress
from atoll.materializer.graph_drawing import describe

from .conftest import demo_like


def test_describe_islands_stages_and_edges():
    d = describe(demo_like(10), "g")
    names = {i.name: i.stages for i in d.islands}
    assert set(names) == {"enrich", "aggregate", "g-island-0"}
    assert names["enrich"] == ["map", "range"]  # materialized sink to source
    assert sorted(names["aggregate"]) == ["tumbling_window", "with_timestamps"]
    channels = [(a, b) for a, b in d.edges if a[0] != b[0]]
    assert len(channels) == 2 and len(d.edges) == 4


def test_to_dot_and_to_svg():
    g = demo_like(10)
    dot = g.to_dot()
    assert dot.startswith('digraph "graph"') and 'label="enrich"' in dot and "style=dashed" in dot
    svg = ET.fromstring(g.to_svg())
    ns = "{http://www.w3.org/2000/svg}"
    islands = [e.get("data-island") for e in svg.iter(ns + "g") if e.get("class") == "island"]
    assert sorted(islands) == ["aggregate", "enrich", "graph-island-0"]
    assert len([e for e in svg.iter(ns + "line")]) == 4


def test_single_island_source_to_sink_counts_its_source(mat):
    """Source -> sink in one island has no channel boundary: its source's position is counted, and the
    range's length gives the expected size (for the ETA)."""
    probe_total = 5_000
    fut = Source.range(0, probe_total).to_mat(Sink.fold(0, lambda a, b: a + b), Keep.right).run(mat)
    fut.result(timeout=30)
    (info,) = _last_graph_islands()
    assert info["source_elements"] == probe_total and info["expected"] == probe_total


def _last_graph_islands():
    from atoll.materializer import graph_registry

    return graph_registry.graphs()[-1].graph.islands()


def test_progress_line_and_bars_never_read_zero_for_a_working_island(mat):
    """Figures of an infinite graph between two reads: every island reads a rate above 0 (or busy)."""
    from atoll.materializer import graph_registry

    switch_graph = demo_like()
    fut = switch_graph.run(mat)
    graph = graph_registry.graphs()[-1].graph
    p = progress(graph, out=io.StringIO(), live=False)
    p.line()
    import threading

    moved = threading.Event()
    for _ in range(400):  # wait (on a condition, at most ~20 s) until every island counted something new
        figs = p.figures()
        if all(f.rate_in > 0 or f.rate_out > 0 or f.events_rate > 0 for f in figs):
            moved.set()
            break
        moved.wait(0.05)
    assert moved.is_set()
    for f in figs:  # the island's first figure (what it takes in, or sends for a source island) is not 0/s
        assert not re.match(r"\S+ (-> )?0/s", f.short()), f.short()
    bars = [f.bar(20, 12) for f in figs]
    assert len(bars) == 3
    graph.cancel()
    assert graph.wait(10)
    assert fut.exception(10) is not None
