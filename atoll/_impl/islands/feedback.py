"""Feedback inputs of a graph's cycles: the fan-in inlets that the watermark valve leaves out.

In a GraphDSL cycle, a fan-in's input that is reachable from the fan-in's own output carries back what
the fan-in already let through: its watermark can only follow the others, so counting it would hold
the fan-in's watermark at ``-inf`` for ever (Flink's ``iterate`` stalled this way, FLIP-15). Such an
input is a *feedback* input: the stage and its neighbour are in one strongly connected component of
the graph of stages, islands and channels included. Elements on a feedback input may be late for the
watermark downstream; ``recursively`` is exact and is the better tool when it fits.

When every inlet of a stage is a feedback input (a ``Zip`` inside the loop body, fed twice from one
``Broadcast`` there), none is left out: time reaches the loop through all of them alike.
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Set, Tuple

from .island_plan import AssignPort, IslandPlan, PublishOutput, TakeInput

Node = Tuple[int, int]  # (island index, stage index)


def feedback_inlets(plans: Sequence[IslandPlan]) -> Dict[int, Dict[int, Tuple[int, ...]]]:
    """``{island index: {stage index: feedback inlet port ids}}`` for the graph of ``plans``."""
    edges = _edges(plans)
    component = _components({n for e in edges for n in e[:2]}, edges)
    found: Dict[Node, List[int]] = {}
    for u, v, port in edges:
        if component[u] == component[v]:
            found.setdefault(v, []).append(port)
    by_island: Dict[int, Dict[int, Tuple[int, ...]]] = {}
    stages = {p.index: p.stages for p in plans}
    for (island, stage), ports in found.items():
        inlets = len(stages[island][stage].module.shape.inlets)
        if inlets > 1 and len(set(ports)) < inlets:
            by_island.setdefault(island, {})[stage] = tuple(sorted(set(ports)))
    return by_island


def _edges(plans: Sequence[IslandPlan]) -> List[Tuple[Node, Node, int]]:
    """Every connection as ``(producer, consumer, consumer's inlet port id)``."""
    channel_source: Dict[int, Node] = {}
    taken: Dict[Tuple[int, int], int] = {}
    producers: Dict[Tuple[int, int], int] = {}
    consumers: List[Tuple[int, int, int, int]] = []  # island, slot, stage, port
    for plan in plans:
        k = plan.index
        for step in plan.steps:
            t = type(step)
            if t is AssignPort:
                if step.is_inlet:
                    consumers.append((k, step.slot, step.stage, step.port_id))
                else:
                    producers[(k, step.slot)] = step.stage
            elif t is PublishOutput:
                channel_source[step.channel] = (k, step.stage)
            elif t is TakeInput:
                taken[(k, step.slot)] = step.channel
    edges = []
    for k, slot, stage, port in consumers:
        ch = taken.get((k, slot))
        if ch is not None:
            src = channel_source.get(ch)
        else:
            p = producers.get((k, slot))
            src = None if p is None else (k, p)
        if src is not None:
            edges.append((src, (k, stage), port))
    return edges


def _components(nodes, edges) -> Dict[Node, int]:
    """Strongly connected components (Tarjan's algorithm, iterative): node -> component number."""
    succ: Dict[Node, List[Node]] = {n: [] for n in nodes}
    for u, v, _ in edges:
        succ[u].append(v)
    index: Dict[Node, int] = {}
    low: Dict[Node, int] = {}
    on_stack = set()
    stack: List[Node] = []
    component: Dict[Node, int] = {}
    counter = components = 0
    for root in succ:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            nexts = succ[node]
            if i < len(nexts):
                work.append((node, i + 1))
                w = nexts[i]
                if w not in index:
                    work.append((w, 0))
                elif w in on_stack:
                    low[node] = min(low[node], index[w])
                continue
            if low[node] == index[node]:
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component[w] = components
                    if w == node:
                        break
                components += 1
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return component


def back_edge_channels(plans: Sequence[IslandPlan]) -> Set[int]:
    """The channels that close a cycle between islands: the back edges of a depth-first walk of the graph of
    islands and channels (islands in index order). Without them the channels form a DAG, so an island
    waiting for barriers on its other inputs never waits for itself; a back edge's barrier always comes after
    its island's cut (the island it leaves is downstream of the one it enters), so checkpoints log such a
    channel from the cut until its barrier (the ABS algorithm) instead of waiting for it."""
    succ: Dict[int, List[Tuple[int, int]]] = {p.index: [] for p in plans}
    published: Dict[int, int] = {}
    for plan in plans:
        for step in plan.steps:
            if type(step) is PublishOutput:
                published[step.channel] = plan.index
    for plan in plans:
        for step in plan.steps:
            if type(step) is TakeInput and step.channel in published:
                succ[published[step.channel]].append((plan.index, step.channel))
    back: Set[int] = set()
    state: Dict[int, int] = {}  # 1: on the walk's path, 2: done
    for root in sorted(succ):
        if root in state:
            continue
        state[root] = 1
        work = [(root, iter(succ[root]))]
        while work:
            node, it = work[-1]
            step = next(it, None)
            if step is None:
                state[node] = 2
                work.pop()
                continue
            nxt, channel = step
            seen = state.get(nxt)
            if seen == 1:
                back.add(channel)
            elif seen is None:
                state[nxt] = 1
                work.append((nxt, iter(succ[nxt])))
    return back
