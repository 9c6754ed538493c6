"""Chunk negotiation: before an island starts, decide which of its connections carry lists of elements.

A logic with a chunk form (``GraphStageLogic.chunk_capable()``) runs it when at least one of its
neighbours in the island has one too; a connection between two such logics carries chunks: the pull
says how many elements it accepts (``pull_chunk``), the push brings a non-empty list of at most that
many (``push_chunk``). Where a chunk logic meets an element logic, an adapter stage converts, asking
for exactly one element per element pull, so demand, order and completion stay the per-element ones.
A logic whose neighbours all lack a chunk form stays element-wise (adapters would only cost), and so
does a whole region of chunk logics in which no chunk can hold more than one element: one without a
stage that asks for several elements at once (a sink, an output boundary, a stage that pulls ahead of
demand: ``GraphStageLogic.pulls_ahead``) downstream of one that can hand several on (a source, an input
boundary, a stage that pulls ahead or expands: ``GraphStageLogic.expands``) - between element stages
the adapters would move chunks of one.

This is what makes a whole island - junctions included - run as a few Python calls per chunk: the
interpreter is the same, only the unit an event moves is a list.
"""
from __future__ import annotations

from typing import List

from ...stage.handlers import InHandler, OutHandler
from ...stage.logic import GraphStageLogic
from ...stage.ports import Inlet, Outlet
from ...stage.shapes import FlowShape
from ...stage._connection import Connection

#: how many elements a stage with unbounded demand (a fold, a seq sink ...) asks for per pull
DEFAULT_CHUNK_SIZE = 1024


def negotiate_chunks(builder, chunk_size: int = DEFAULT_CHUNK_SIZE, event_time: bool = False) -> int:
    """Switch ``builder``'s island to chunk connections where both ends can; returns how many logics
    switched. With ``event_time`` a chunk form counts only if it carries timestamps (``chunk_timestamps``)."""
    conns: List[Connection] = builder.slot_conns + builder.extra_conns
    capable = {}
    for logic in builder.logics:
        try:
            ok = bool(logic.chunk_capable())
            if ok and event_time:
                ok = bool(logic.chunk_timestamps())
        except AttributeError:  # a logic written before the chunk API (duck-typed stages)
            ok = False
        capable[id(logic)] = ok
    chunked = set()
    for region in _regions(conns, capable):
        if _fills_chunks(region):
            chunked.update(region)
    if not chunked:
        return 0
    switched = [logic for logic in builder.logics if id(logic) in chunked]
    for logic in switched:
        logic.enable_chunks(chunk_size)
    for c in list(conns):
        up, down = id(c.out_owner) in chunked, id(c.in_owner) in chunked
        if up and down:
            c.chunked = True
        elif up:
            _insert_adapter(builder, c, ChunksToElements(), chunk_side_up=True)
        elif down:
            _insert_adapter(builder, c, ElementsToChunks(), chunk_side_up=False)
    return len(switched)


def _regions(conns: List[Connection], capable: dict) -> List[dict]:
    """The connected groups of chunk-capable logics joined by connections with a capable logic at both
    ends; each as ``{id(logic): (logic, [downstream logics in the group])}``."""
    links = {}
    logics = {}
    for c in conns:
        a, b = c.out_owner, c.in_owner
        if a is not None and b is not None and capable.get(id(a)) and capable.get(id(b)):
            logics[id(a)], logics[id(b)] = a, b
            links.setdefault(id(a), []).append(b)
            links.setdefault(id(b), [])
    neighbours = {k: set() for k in links}
    for k, downs in links.items():
        for b in downs:
            neighbours[k].add(id(b))
            neighbours[id(b)].add(k)
    regions, seen = [], set()
    for start in links:
        if start in seen:
            continue
        seen.add(start)
        todo, members = [start], []
        while todo:
            k = todo.pop()
            members.append(k)
            for n in neighbours[k]:
                if n not in seen:
                    seen.add(n)
                    todo.append(n)
        regions.append({k: (logics[k], links[k]) for k in members})
    return regions


def _supplies(logic) -> bool:
    """Can hand on more than one element at a time by itself: a stage without inlets (a source, an
    island's input boundary), one that pulls ahead of demand (it holds what it pulled) or one that
    emits several elements for one it receives."""
    return not logic._in_ports or getattr(logic, "pulls_ahead", False) or getattr(logic, "expands", False)


def _demands(logic) -> bool:
    """Asks for more than one element at a time by itself: a stage without outlets (a sink, an island's
    output boundary) or one that pulls ahead of demand."""
    return not logic._out_ports or getattr(logic, "pulls_ahead", False)


def _fills_chunks(region: dict) -> bool:
    """Whether a chunk region can move chunks longer than one: a stage that asks for several elements at
    once is downstream (inside the region) of another one that can hand several on. Elsewhere each
    chunk would hold one element - the adapters at the region's borders ask for and pass on one at a
    time - and the region runs element by element instead (the chunk machinery would only cost)."""
    for key, (logic, _) in region.items():
        if not _supplies(logic):
            continue
        seen = {key}
        todo = list(region[key][1])
        while todo:
            down = todo.pop()
            k = id(down)
            if k in seen:
                continue
            seen.add(k)
            if _demands(down):
                return True
            todo.extend(region[k][1])
    return False


def _insert_adapter(builder, conn: Connection, adapter: "_Adapter", chunk_side_up: bool) -> None:
    """``conn`` (upstream -> downstream) becomes upstream -> adapter -> downstream."""
    down, inlet = conn.in_owner, conn.inlet
    conn.in_owner = adapter
    conn.inlet = adapter.in_
    adapter._in_conns[0] = conn
    new = Connection(-1)
    new.out_owner = adapter
    new.outlet = adapter.out
    adapter._out_conns[0] = new
    new.in_owner = down
    new.inlet = inlet
    down._in_conns[inlet.id] = new
    conn.chunked = chunk_side_up
    new.chunked = not chunk_side_up
    builder.extra_conns.append(new)
    builder.logics.append(adapter)


class _Adapter(GraphStageLogic, InHandler, OutHandler):
    stateless = True  # holds nothing between events: one element per pull
    def __init__(self, name: str):
        in_, out = Inlet(f"{name}.in"), Outlet(f"{name}.out")
        shape = FlowShape(in_, out)
        shape.assign_ids()
        super().__init__(shape)
        self.in_, self.out = in_, out
        self.stage_name = name
        self.set_handler(in_, self)
        self.set_handler(out, self)


class ChunksToElements(_Adapter):
    """Chunk upstream, element downstream: one element per pull, asked for as a chunk of one."""

    def __init__(self):
        super().__init__("chunks>elements")

    def chunk_timestamps(self) -> bool:
        return True

    def on_pull(self) -> None:
        conn = self._in_conns[0]
        conn.demand = 1
        self.pull(self.in_)

    def on_push(self) -> None:
        elem = self.grab(self.in_)[0]
        ts = self._ts
        self.push(self.out, elem, ts[0] if ts else None)


class ElementsToChunks(_Adapter):
    """Element upstream, chunk downstream: each element travels on as a chunk of one."""

    def __init__(self):
        super().__init__("elements>chunks")

    def chunk_timestamps(self) -> bool:
        return True

    def on_pull(self) -> None:
        self.pull(self.in_)

    def on_push(self) -> None:
        elem = self.grab(self.in_)
        self.push(self.out, [elem], [self._ts])
