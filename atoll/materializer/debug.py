"""Debug helpers: print a traversal's commands, and the global slot each port is wired to.

``print_traversal(graph)`` lists the commands in visit order with nesting; ``print_wiring(graph)``
replays the slot assignment (inputs take consecutive slots, outputs are offset-relative) and prints
``out -> slot <- in`` pairs, which is the quickest way to check a builder's relative wiring.
"""
from __future__ import annotations

import sys
from typing import Callable, List, Optional, TextIO

from .traversal import (
    EnterIsland,
    MaterializeAtomic,
    PushAttributes,
    Traversal,
    _ExitIsland,
    _PopAttributes,
    iterate,
)


def _traversal_of(graph) -> Traversal:
    if isinstance(graph, Traversal):
        return graph
    builder = getattr(graph, "builder", None) or getattr(graph, "traversal_builder", None)
    if builder is None:
        raise TypeError(f"cannot get a traversal from {graph!r}")
    return builder.traversal


def traversal_lines(graph) -> List[str]:
    lines = []
    depth = 0
    for cmd in iterate(_traversal_of(graph)):
        if isinstance(cmd, (_ExitIsland, _PopAttributes)):
            depth -= 1
        lines.append("  " * depth + repr(cmd))
        if isinstance(cmd, (EnterIsland, PushAttributes)):
            depth += 1
    return lines


def print_traversal(graph, file: Optional[TextIO] = None) -> None:
    """Print the commands of ``graph``'s traversal (a blueprint or a ``Traversal``)."""
    out = file or sys.stdout
    for line in traversal_lines(graph):
        print(line, file=out)


def wiring_lines(graph) -> List[str]:
    """``stage.port -> global slot`` lines for every port, in visit order."""
    lines = []
    offset = 0
    for cmd in iterate(_traversal_of(graph)):
        if isinstance(cmd, MaterializeAtomic):
            module = cmd.module
            base = offset
            for in_ in module.shape.inlets:
                lines.append(f"{module!r}.{in_.name} (in)  = slot {offset}")
                offset += 1
            for out in module.shape.outlets:
                lines.append(f"{module!r}.{out.name} (out) -> slot {base + cmd.out_to_slots[out.id]}")
    return lines


def print_wiring(graph, file: Optional[TextIO] = None) -> None:
    """Print the global slot of every port of ``graph``'s traversal."""
    out = file or sys.stdout
    for line in wiring_lines(graph):
        print(line, file=out)


def stderr_debug() -> Callable[[str], None]:
    """A ``debug`` callback for ``phased.materialize`` that prints every materializer step."""
    return lambda msg: print(msg, file=sys.stderr)
