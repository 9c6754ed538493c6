"""Drawing a blueprint as its islands and stages: ``describe(graph)``, ``to_dot(graph)``, ``to_svg(graph)``.

The blueprint's traversal is walked by the same phased walk that runs it (``phased.materialize``), with a
recording island plugin that creates nothing: it notes each island's stages (by their names) and every
connection, inside an island or across islands (a channel). Nothing is started and no driver-side
preparation runs (a Spark source is not computed).

``to_svg`` lays the drawing out itself (no Graphviz needed): islands left to right in the order data flows
between them (an island's column is the longest channel path reaching it), islands of one column stacked;
inside an island, stages top to bottom by their longest in-island path, stages of one row side by side.
Edges are straight lines with an arrow; a channel between islands is drawn dashed. Each island's box has an
empty ``<text class="figures" data-island=NAME>`` line under its title for a live view (the console's) to
fill in.
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .phase import PhaseIsland

Node = Tuple[int, int]  # (island index, stage index)


@dataclass
class IslandDrawing:
    index: int
    name: str
    stages: List[str] = field(default_factory=list)


@dataclass
class GraphDrawing:
    """What a blueprint is made of: ``islands`` (each with its stages' names, in materialization order) and
    ``edges`` ``((island, stage), (island, stage))`` from producer to consumer."""

    name: str
    islands: List[IslandDrawing]
    edges: List[Tuple[Node, Node]]

    def island(self, index: int) -> IslandDrawing:
        for i in self.islands:
            if i.index == index:
                return i
        raise KeyError(index)


class _Recorder(PhaseIsland):
    """Records one island's stages and wiring; creates nothing."""

    def __init__(self, graph_name: str, attributes: Any, index: int):
        self.index = index
        self.name = _island_name(graph_name, attributes, index)
        self.stages: List[str] = []
        self.in_slots: Dict[int, int] = {}  # local slot -> consuming stage
        self.out_slots: Dict[int, int] = {}  # local slot -> producing stage
        self.taken: Dict[int, Node] = {}  # local slot -> producer in another island

    def materialize_atomic(self, module, attributes):
        from .mat_values import PendingValue

        self.stages.append(str(getattr(module, "name", None) or type(module).__name__))
        i = len(self.stages) - 1
        return i, PendingValue(("drawing", self.index, i))

    def assign_port(self, port, slot: int, handle) -> None:
        from ..stage.ports import Inlet

        (self.in_slots if isinstance(port, Inlet) else self.out_slots)[slot] = handle

    def create_publisher(self, out, handle) -> Node:
        return (self.index, handle)

    def take_publisher(self, slot: int, publisher, attributes) -> None:
        self.taken[slot] = publisher

    def on_island_ready(self) -> None:
        pass


def _island_name(graph_name: str, attributes: Any, index: int) -> str:
    """As the materializers name islands: ``.island(name=...)``, else ``<graph>-island-<index>``."""
    from ..stage.attributes import AsyncBoundary

    boundary = attributes.get(AsyncBoundary) if attributes is not None else None
    if boundary is not None and "name" in getattr(boundary, "options", {}):
        return boundary.options["name"]
    return f"{graph_name}-island-{index}"


def _traversal_of(graph: Any):
    from .traversal import Traversal

    if isinstance(graph, Traversal):
        return graph
    builder = getattr(graph, "builder", None) or getattr(graph, "traversal_builder", None)
    if builder is None:
        raise TypeError(f"cannot draw {graph!r}: not a blueprint")
    return builder.traversal


def describe(graph: Any, name: str = "graph") -> GraphDrawing:
    """The islands, stages and connections of ``graph`` (a runnable blueprint or its traversal). ``name``
    stands for the graph's name in the island names the materializer would give (``<name>-island-<i>``)."""
    from .materializer import MaterializerSettings
    from .phased import materialize

    recorders: List[_Recorder] = []

    def make_phase(tag, attributes, index):
        r = _Recorder(name, attributes, index)
        recorders.append(r)
        return r

    materialize(_traversal_of(graph), make_phase, MaterializerSettings().top_attributes())
    islands, edges = [], []
    for r in recorders:
        if r.stages:
            islands.append(IslandDrawing(r.index, r.name, list(r.stages)))
        for slot, consumer in r.in_slots.items():
            src = r.taken.get(slot)
            if src is None and slot in r.out_slots:
                src = (r.index, r.out_slots[slot])
            if src is not None:
                edges.append((src, (r.index, consumer)))
    edges.sort()
    return GraphDrawing(name, islands, edges)


# ---------------------------------------------------------------------------------------------- DOT
def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def to_dot(graph: Any, name: str = "graph") -> str:
    """Graphviz DOT text: one ``cluster`` per island, one node per stage, channels dashed."""
    d = graph if isinstance(graph, GraphDrawing) else describe(graph, name)
    lines = [f"digraph {_q(d.name)} {{", "  rankdir=LR;", "  node [shape=box, style=rounded, fontname=Helvetica];"]
    for isl in d.islands:
        lines.append(f"  subgraph cluster_{isl.index} {{")
        lines.append(f"    label={_q(isl.name)}; style=rounded; color=\"#4a6fa5\";")
        for s, label in enumerate(isl.stages):
            lines.append(f"    n{isl.index}_{s} [label={_q(label)}];")
        lines.append("  }")
    for (a, b) in d.edges:
        style = " [style=dashed]" if a[0] != b[0] else ""
        lines.append(f"  n{a[0]}_{a[1]} -> n{b[0]}_{b[1]}{style};")
    lines.append("}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------- layout
def _longest_path_layers(nodes: List[Any], edges: List[Tuple[Any, Any]]) -> Dict[Any, int]:
    """Layer of each node: the longest path from a node without predecessors, back edges (cycles) left out."""
    succ: Dict[Any, List[Any]] = {n: [] for n in nodes}
    for a, b in edges:
        if a in succ and b in succ and a != b:
            succ[a].append(b)
    # drop back edges found by an iterative DFS, then take longest paths over the DAG in topological order
    state: Dict[Any, int] = {}
    order: List[Any] = []
    dag: Dict[Any, List[Any]] = {n: [] for n in nodes}
    for root in nodes:
        if root in state:
            continue
        state[root] = 1
        stack = [(root, iter(succ[root]))]
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                order.append(node)
                stack.pop()
            elif nxt not in state:
                dag[node].append(nxt)
                state[nxt] = 1
                stack.append((nxt, iter(succ[nxt])))
            elif state[nxt] == 2:
                dag[node].append(nxt)
            # state 1: a back edge, left out
    layer = {n: 0 for n in nodes}
    for n in reversed(order):
        for m in dag[n]:
            layer[m] = max(layer[m], layer[n] + 1)
    return layer


@dataclass
class _Box:
    x: float
    y: float
    w: float
    h: float


STAGE_W, STAGE_H, STAGE_GAP_X, STAGE_GAP_Y = 150, 30, 16, 22
ISLAND_PAD, ISLAND_HEAD, ISLAND_GAP_X, ISLAND_GAP_Y, MARGIN = 14, 46, 70, 30, 16


def layout(d: GraphDrawing) -> Tuple[Dict[int, _Box], Dict[Node, _Box], float, float]:
    """Boxes of the islands and stages of ``d``, and the picture's width and height."""
    island_edges = [(a[0], b[0]) for a, b in d.edges if a[0] != b[0]]
    columns = _longest_path_layers([i.index for i in d.islands], island_edges)
    inner: Dict[int, Dict[Node, Tuple[int, int]]] = {}  # island -> stage -> (row, position in row)
    sizes: Dict[int, Tuple[float, float]] = {}
    for isl in d.islands:
        nodes = [(isl.index, s) for s in range(len(isl.stages))]
        rows = _longest_path_layers(nodes, [(a, b) for a, b in d.edges if a[0] == b[0] == isl.index])
        by_row: Dict[int, List[Node]] = {}
        for n in nodes:
            by_row.setdefault(rows[n], []).append(n)
        inner[isl.index] = {n: (r, k) for r, ns in by_row.items() for k, n in enumerate(ns)}
        width = max(len(ns) for ns in by_row.values()) if by_row else 1
        height = len(by_row)
        w = 2 * ISLAND_PAD + width * STAGE_W + (width - 1) * STAGE_GAP_X
        w = max(w, 12 + 7.2 * len(isl.name) + 2 * ISLAND_PAD, 250)
        h = ISLAND_HEAD + ISLAND_PAD + height * STAGE_H + (height - 1) * STAGE_GAP_Y
        sizes[isl.index] = (w, h)
    by_col: Dict[int, List[int]] = {}
    for isl in d.islands:
        by_col.setdefault(columns[isl.index], []).append(isl.index)
    islands: Dict[int, _Box] = {}
    stages: Dict[Node, _Box] = {}
    x = MARGIN
    total_h = 0.0
    for col in sorted(by_col):
        members = by_col[col]
        col_w = max(sizes[i][0] for i in members)
        y = MARGIN
        for i in members:
            w, h = sizes[i]
            islands[i] = _Box(x, y, col_w, h)
            for n, (r, k) in inner[i].items():
                stages[n] = _Box(x + ISLAND_PAD + k * (STAGE_W + STAGE_GAP_X),
                                 y + ISLAND_HEAD + r * (STAGE_H + STAGE_GAP_Y), STAGE_W, STAGE_H)
            y += h + ISLAND_GAP_Y
        total_h = max(total_h, y - ISLAND_GAP_Y)
        x += col_w + ISLAND_GAP_X
    return islands, stages, x - ISLAND_GAP_X + MARGIN, total_h + MARGIN


def _anchor(a: _Box, b: _Box) -> Tuple[float, float, float, float]:
    """Where an edge from box ``a`` to box ``b`` leaves and enters: sides facing each other."""
    ax, ay, bx, by = a.x + a.w / 2, a.y + a.h / 2, b.x + b.w / 2, b.y + b.h / 2
    if b.x >= a.x + a.w:  # b right of a
        return a.x + a.w, ay, b.x, by
    if b.x + b.w <= a.x:  # b left of a
        return a.x, ay, b.x + b.w, by
    if by >= ay:
        return ax, a.y + a.h, bx, b.y
    return ax, a.y, bx, b.y + b.h


def to_svg(graph: Any, name: str = "graph") -> str:
    """A self-contained SVG picture of ``graph`` (see the module docstring for the layout)."""
    d = graph if isinstance(graph, GraphDrawing) else describe(graph, name)
    islands, stages, width, height = layout(d)
    e = html.escape
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="atoll-graph" width="{width:.0f}" height="{height:.0f}" '
           f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="Helvetica, Arial, sans-serif" font-size="12">',
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
           'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#555"/></marker></defs>']
    for isl in d.islands:
        b = islands[isl.index]
        out.append(f'<g class="island" data-island="{e(isl.name)}">')
        out.append(f'<rect class="island-box" x="{b.x:.0f}" y="{b.y:.0f}" width="{b.w:.0f}" height="{b.h:.0f}" '
                   'rx="10" fill="#eef3fb" stroke="#4a6fa5" stroke-width="1.5"/>')
        out.append(f'<text x="{b.x + ISLAND_PAD:.0f}" y="{b.y + 18:.0f}" font-weight="bold" fill="#1d3557">'
                   f'{e(isl.name)}</text>')
        out.append(f'<text class="figures" data-island="{e(isl.name)}" x="{b.x + ISLAND_PAD:.0f}" '
                   f'y="{b.y + 35:.0f}" fill="#333" font-size="11"></text>')
        for s, label in enumerate(isl.stages):
            sb = stages[(isl.index, s)]
            text = label if len(label) <= 22 else label[:21] + "…"
            out.append(f'<rect class="stage" x="{sb.x:.0f}" y="{sb.y:.0f}" width="{sb.w:.0f}" height="{sb.h:.0f}" '
                       'rx="5" fill="#fff" stroke="#888"/>')
            out.append(f'<text x="{sb.x + sb.w / 2:.0f}" y="{sb.y + sb.h / 2 + 4:.0f}" text-anchor="middle">'
                       f'<title>{e(label)}</title>{e(text)}</text>')
        out.append("</g>")
    for a, b in d.edges:
        if a not in stages or b not in stages:
            continue
        x1, y1, x2, y2 = _anchor(stages[a], stages[b])
        dash = ' stroke-dasharray="6 4" class="channel"' if a[0] != b[0] else ' class="edge"'
        out.append(f'<line x1="{x1:.0f}" y1="{y1:.0f}" x2="{x2:.0f}" y2="{y2:.0f}" stroke="#555" '
                   f'stroke-width="1.4" marker-end="url(#arrow)"{dash}/>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


__all__ = ["GraphDrawing", "IslandDrawing", "describe", "to_dot", "to_svg", "layout"]
