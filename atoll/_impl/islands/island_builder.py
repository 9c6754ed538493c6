"""IslandBuilder: assembles one island's interpreter tables from the materializer's calls.

It is the in-island half of Pekko's ``GraphStageIsland``: stages are appended to the logic list,
ports are wired to connections indexed by island-local slot, and island boundaries (channel ends)
are added as extra logics. ``build`` checks that every port has a handler and a peer, then creates
the ``GraphInterpreter``.
"""
from __future__ import annotations

from typing import Any, List

from ...errors import IllegalStateError
from ...stage.ports import Inlet
from ...stage._connection import Connection
from .interpreter import GraphInterpreter


class IslandBuilder:
    def __init__(self, name: str):
        self.name = name
        self.logics: List[Any] = []
        self.slot_conns: List[Connection] = []
        self.extra_conns: List[Connection] = []

    def add_logic(self, logic) -> None:
        self.logics.append(logic)

    def _conn(self, slot: int) -> Connection:
        conns = self.slot_conns
        while len(conns) <= slot:
            conns.append(Connection(len(conns)))
        return conns[slot]

    def assign_port(self, port, slot: int, logic) -> None:
        conn = self._conn(slot)
        if isinstance(port, Inlet):
            conn.in_owner = logic
            conn.inlet = port
            logic._in_conns[port.id] = conn
        else:
            conn.out_owner = logic
            conn.outlet = port
            logic._out_conns[port.id] = conn

    def consumer_at(self, slot: int):
        """The logic whose inlet sits at ``slot`` (known once that inlet was visited)."""
        if slot < len(self.slot_conns):
            return self.slot_conns[slot].in_owner
        return None

    def add_output_boundary(self, out, logic, boundary) -> None:
        """``out`` of ``logic`` leaves the island through ``boundary``."""
        self.logics.append(boundary)
        conn = Connection(-1)
        conn.out_owner = logic
        conn.outlet = out
        logic._out_conns[out.id] = conn
        conn.in_owner = boundary
        conn.inlet = boundary.in_
        boundary._in_conns[0] = conn
        self.extra_conns.append(conn)

    def add_input_boundary(self, slot: int, boundary) -> None:
        """The inlet at ``slot`` is fed from another island through ``boundary``."""
        self.logics.append(boundary)
        self.assign_port(boundary.out, slot, boundary)

    def connections(self) -> List[Connection]:
        conns = self.slot_conns + self.extra_conns
        for i, c in enumerate(conns):
            c.id = i
        return conns

    def build(self, host, materializer=None) -> GraphInterpreter:
        conns = self.connections()
        for c in conns:
            if c.in_owner is None:
                raise IllegalStateError(f"island {self.name}: {c.outlet} of stage [{c.out_owner}] is not connected")
            if c.out_owner is None:
                raise IllegalStateError(f"island {self.name}: {c.inlet} of stage [{c.in_owner}] is not connected")
            handler = c.in_owner._in_handlers[c.inlet.id]
            if handler is None:
                raise IllegalStateError(f"No handler defined in stage [{c.in_owner}] for in port [{c.inlet.name}]")
            c.set_in_handler(handler)
            handler = c.out_owner._out_handlers[c.outlet.id]
            if handler is None:
                raise IllegalStateError(f"No handler defined in stage [{c.out_owner}] for out port [{c.outlet.name}]")
            c.set_out_handler(handler)
        for logic in self.logics:
            for i, c in enumerate(logic._in_conns):
                if c is None:
                    raise IllegalStateError(f"island {self.name}: inlet #{i} of stage [{logic}] is not connected")
            for i, c in enumerate(logic._out_conns):
                if c is None:
                    raise IllegalStateError(f"island {self.name}: outlet #{i} of stage [{logic}] is not connected")
        settings = getattr(materializer, "settings", None)
        return GraphInterpreter(self.logics, conns, host, materializer, self.name,
                                fuzzing=getattr(settings, "fuzzing", None))
