"""Per-logic fast-path closures for ``push``/``pull``/``grab`` (the per-element port calls).

``GraphStageLogic._bind_port_calls`` installs them on each logic when it attaches to an interpreter.
Each closure takes only the plain case (the port's state is exactly its one protocol bit, the element
is not ``None``) and hands every other case to the class method (``base``), so errors and edge cases
stay exactly the class method's. A logic with one port of a kind gets a closure over that port and
its connection: one identity test replaces the port-id lookup. Constants are closure cells, read as
fast as locals.
"""
from __future__ import annotations

from ._connection import EMPTY, IN_READY, OUT_READY, PULLING, PUSHING


def make_push(logic, interpreter, outs, ports, base):
    """``push(out, elem, ts=None)`` for ``logic``; ``base`` is the class method."""
    queue, enqueue = interpreter.queue, interpreter.enqueue
    out_ready, pushing = OUT_READY, PUSHING
    if len(outs) == 1 and outs[0] is not None and ports[0] is not None:
        port0, conn0 = ports[0], outs[0]

        def push(out, elem, ts=None):
            if out is port0 and conn0.state == out_ready and elem is not None:
                conn0.state = pushing
                conn0.slot = elem
                if interpreter.chased is None and not queue:
                    interpreter.chased = conn0  # event chasing: dispatched right after this handler
                else:
                    enqueue(conn0)
            else:
                base(logic, out, elem, ts)
    else:
        def push(out, elem, ts=None):
            conn = outs[out.id]
            try:
                st = conn.state
            except AttributeError:
                return base(logic, out, elem, ts)
            if st == out_ready and elem is not None:
                conn.state = pushing
                conn.slot = elem
                if interpreter.chased is None and not queue:
                    interpreter.chased = conn
                else:
                    enqueue(conn)
            else:
                base(logic, out, elem, ts)

    push.port_fast_path = True
    return push


def make_pull(logic, interpreter, ins, ports, base):
    """``pull(in_)`` for ``logic``; ``base`` is the class method."""
    queue, enqueue = interpreter.queue, interpreter.enqueue
    in_ready, pulling = IN_READY, PULLING
    if len(ins) == 1 and ins[0] is not None and ports[0] is not None:
        port0, conn0 = ports[0], ins[0]

        def pull(in_):
            if in_ is port0 and conn0.state == in_ready:
                conn0.state = pulling
                if interpreter.chased is None and not queue:
                    interpreter.chased = conn0
                else:
                    enqueue(conn0)
            else:
                base(logic, in_)
    else:
        def pull(in_):
            conn = ins[in_.id]
            try:
                st = conn.state
            except AttributeError:
                return base(logic, in_)
            if st == in_ready:
                conn.state = pulling
                if interpreter.chased is None and not queue:
                    interpreter.chased = conn
                else:
                    enqueue(conn)
            else:
                base(logic, in_)

    pull.port_fast_path = True
    return pull


def make_grab(logic, ins, ports, base):
    """``grab(in_)`` for ``logic``; ``base`` is the class method."""
    in_ready, empty = IN_READY, EMPTY
    if len(ins) == 1 and ins[0] is not None and ports[0] is not None:
        port0, conn0 = ports[0], ins[0]

        def grab(in_):
            if in_ is port0:
                elem = conn0.slot
                if elem is not empty and conn0.state == in_ready:
                    conn0.slot = empty
                    return elem
            return base(logic, in_)
    else:
        def grab(in_):
            conn = ins[in_.id]
            try:
                elem = conn.slot
            except AttributeError:
                return base(logic, in_)
            if conn.state == in_ready and elem is not empty:
                conn.slot = empty
                return elem
            return base(logic, in_)

    grab.port_fast_path = True
    return grab


# ---------------------------------------------------------------------- fused handlers
# A built-in logic whose per-element handler is a port call or two around one computation (a range
# source's ``on_pull``, a fold's ``on_push``) may run a closure that inlines those calls' plain case: it
# saves two or three Python calls per element where the logic runs element by element (its neighbours
# have no chunk form). The closure is installed as the instance's ``on_push``/``on_pull`` (so a handler
# set again later, by a checkpoint pause for instance, finds it too) and as the connection's.

def fusable(logic, cls, name: str, *calls) -> bool:
    """Whether ``logic`` may run a fused form of ``cls``'s handler ``name``: its class does not override
    it, and every port call in ``calls`` is a fast-path closure (not a stamped event-time form)."""
    if getattr(type(logic), name, None) is not getattr(cls, name):
        return False
    for call in calls:
        if not getattr(call, "port_fast_path", False):
            return False
    return True


def install_on_push(logic, conn, fused) -> None:
    """Make ``fused`` ``logic``'s ``on_push`` (None: the class method again) and ``conn``'s, if the logic
    handles ``conn``'s inlet itself."""
    try:
        del logic.on_push  # an earlier attachment's closure
    except AttributeError:
        pass
    if fused is not None:
        logic.on_push = fused
    if conn is not None and conn.in_handler is logic:
        conn.on_push = logic.on_push


def install_on_pull(logic, conn, fused) -> None:
    """Make ``fused`` ``logic``'s ``on_pull`` (None: the class method again) and ``conn``'s, if the logic
    handles ``conn``'s outlet itself."""
    try:
        del logic.on_pull
    except AttributeError:
        pass
    if fused is not None:
        logic.on_pull = fused
    if conn is not None and conn.out_handler is logic:
        conn.on_pull = logic.on_pull
