"""The one-pass phased materializer: walks a traversal once and hands every atom to its island's phase.

Three stacks drive the walk, as in Pekko's ``PhasedFusingActorMaterializer``: the traversal stack
(to follow ``Concat`` nodes), the attribute stack and the materialized-value stack. Wiring of ports
to slots is delegated to ``IslandTracking``; building islands to the ``PhaseIsland`` plugins.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

from ..markers import NotUsed
from ..stage.attributes import Attributes
from . import mat_values
from .driver_prep import DriverContext, prepare
from .island_tracking import IslandTracking
from .traversal import (
    Compose,
    Concat,
    EmptyTraversal,
    EnterIsland,
    MaterializeAtomic,
    PushAttributes,
    Transform,
    Traversal,
    _ExitIsland,
    _Pop,
    _PopAttributes,
    _PushNotUsed,
)


def materialize(
    traversal: Traversal,
    make_phase: Callable[[Any, Attributes, int], Any],
    top_attributes: Attributes,
    debug: Optional[Callable[[str], None]] = None,
    driver: Optional[DriverContext] = None,
) -> Tuple[Any, List[Any]]:
    """Walk ``traversal``; return ``(materialized value, phases)``. Every phase's
    ``on_island_ready`` has been called when this returns. The value may still be pending
    (see ``mat_values``) when islands report their values later. Stages that ask for driver-side
    preparation (``driver_prep``) are prepared with ``driver``."""
    tracking = IslandTracking(make_phase, top_attributes, debug)
    traversal_stack: List[Traversal] = []
    attributes_stack: List[Attributes] = [top_attributes]
    mat_stack: List[Any] = []
    deferred: List[Any] = []  # every function of the traversal still waiting for a pending value

    def apply(fn, *args):
        value = mat_values.apply(fn, *args)
        if type(value) is mat_values.DeferredValue:
            deferred.append(value)
        return value

    current = traversal
    while True:
        t = type(current)
        nxt = EmptyTraversal
        if t is MaterializeAtomic:
            phase = tracking.current_phase
            module, finish = prepare(current.module, driver, phase)
            attrs = attributes_stack[-1]
            handle, mat = phase.materialize_atomic(module, attrs)
            mat_stack.append(mat if finish is None else apply(finish, mat))
            offset = tracking.current_global_offset
            shape = module.shape
            if debug:
                debug(f"materialize {module!r} at offset {offset} in {phase.name}")
            for in_ in shape.inlets:
                tracking.wire_in(in_, handle)
            slots = current.out_to_slots
            for out in shape.outlets:
                tracking.wire_out(out, offset + slots[out.id], handle)
        elif t is Concat:
            if current.next is not EmptyTraversal:
                traversal_stack.append(current.next)
            nxt = current.first
        elif t is _PushNotUsed:
            mat_stack.append(NotUsed)
        elif t is _Pop:
            mat_stack.pop()
        elif t is Transform:
            mat_stack.append(apply(current.fn, mat_stack.pop()))
        elif t is Compose:
            second = mat_stack.pop()
            first = mat_stack.pop()
            if current.reverse:
                mat_stack.append(apply(current.fn, second, first))
            else:
                mat_stack.append(apply(current.fn, first, second))
        elif t is PushAttributes:
            attributes_stack.append(attributes_stack[-1].and_(current.attributes))
        elif t is _PopAttributes:
            attributes_stack.pop()
        elif t is EnterIsland:
            tracking.enter_island(current.tag, attributes_stack[-1])
        elif t is _ExitIsland:
            tracking.exit_island()
        current = nxt
        if current is EmptyTraversal:
            if not traversal_stack:
                break
            current = traversal_stack.pop()
    tracking.check_done()
    for phase in tracking.phases:
        phase.on_island_ready()
    if len(mat_stack) != 1:
        raise RuntimeError(f"materialized-value stack ends with {len(mat_stack)} values instead of 1")
    return mat_values.keep_every(mat_stack[0], deferred), tracking.phases
