"""Chunk negotiation: before an island starts, decide which of its connections carry lists of elements.

A logic with a chunk form (``GraphStageLogic.chunk_capable()``) runs it when at least one of its
neighbours in the island has one too; a connection between two such logics carries chunks: the pull
says how many elements it accepts (``pull_chunk``), the push brings a non-empty list of at most that
many (``push_chunk``). Where a chunk logic meets an element logic, an adapter stage converts, asking
for exactly one element per element pull, so demand, order and completion stay the per-element ones.
A logic whose neighbours all lack a chunk form stays element-wise (adapters would only cost).

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
    for c in conns:
        a, b = c.out_owner, c.in_owner
        if a is not None and b is not None and capable.get(id(a)) and capable.get(id(b)):
            chunked.add(id(a))
            chunked.add(id(b))
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
