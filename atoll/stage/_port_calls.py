"""Per-logic fast paths for ``push``/``pull``/``grab`` (the per-element port calls).

``GraphStageLogic._bind_port_calls`` installs them on each logic when it attaches to an interpreter.
Each takes only the plain case (the port's state is exactly its one protocol bit, the element is not
``None``) and hands every other case to the class method (``base``), so errors and edge cases stay
exactly the class method's (``GraphStageLogic``'s, which ``logic`` registers with ``fall_back_to``). A logic
with one port of a kind gets ``OnePort``'s calls, over that port and its connection (one identity test replaces
the port-id lookup); a logic with several, ``ByPortId``'s. One object serves a logic's inlets (``pull`` and
``grab``), another its outlets (``push``).

They are bound methods of functions shared by every logic, not closures made per logic: a call site in
a handler that serves several logics of one class (three ``map``s, three instances of a user's stage)
then always calls the same function, which CPython 3.11 specializes (with a closure per logic the site
sees a new function object each time and falls back to the generic call, ~3% of a custom stage chain).
"""
from __future__ import annotations

from ._connection import EMPTY, IN_READY, OUT_READY, PULLING, PUSHING

#: the class whose ``push``/``pull``/``grab`` take every case but the plain one (``GraphStageLogic``)
_Base = None


def fall_back_to(cls) -> None:
    """Hand the cases other than the plain one to ``cls``'s port calls (called once, by ``stage.logic``)."""
    global _Base
    _Base = cls


class _PortCalls:
    """What every port call needs: the logic, its interpreter and that one's event queue."""

    __slots__ = ("logic", "interpreter", "queue", "enqueue")

    def __init__(self, logic, interpreter):
        self.logic = logic
        self.interpreter = interpreter
        self.queue = interpreter.queue
        self.enqueue = interpreter.enqueue


class OnePort(_PortCalls):
    """The port calls of a logic's only port of a kind: ``port`` and its connection ``conn``."""

    __slots__ = ("port", "conn")

    def __init__(self, logic, interpreter, port, conn):
        super().__init__(logic, interpreter)
        self.port = port
        self.conn = conn

    def push(self, out, elem, ts=None):
        conn = self.conn
        if out is self.port and conn.state == OUT_READY and elem is not None:
            conn.state = PUSHING
            conn.slot = elem
            interpreter = self.interpreter
            if interpreter.chased is None and not self.queue:
                interpreter.chased = conn  # event chasing: dispatched right after this handler
            else:
                self.enqueue(conn)
        else:
            _Base.push(self.logic, out, elem, ts)

    def pull(self, in_):
        conn = self.conn
        if in_ is self.port and conn.state == IN_READY:
            conn.state = PULLING
            interpreter = self.interpreter
            if interpreter.chased is None and not self.queue:
                interpreter.chased = conn
            else:
                self.enqueue(conn)
        else:
            _Base.pull(self.logic, in_)

    def grab(self, in_):
        if in_ is self.port:
            conn = self.conn
            elem = conn.slot
            if elem is not EMPTY and conn.state == IN_READY:
                conn.slot = EMPTY
                return elem
        return _Base.grab(self.logic, in_)

    push.port_fast_path = pull.port_fast_path = grab.port_fast_path = True


class ByPortId(_PortCalls):
    """The port calls of a logic with several ports of a kind: ``conns`` indexed by port id (None where a port
    is not wired: its calls go to the class method, which says so)."""

    __slots__ = ("conns",)

    def __init__(self, logic, interpreter, conns):
        super().__init__(logic, interpreter)
        self.conns = conns

    def push(self, out, elem, ts=None):
        conn = self.conns[out.id]
        try:
            st = conn.state
        except AttributeError:
            return _Base.push(self.logic, out, elem, ts)
        if st == OUT_READY and elem is not None:
            conn.state = PUSHING
            conn.slot = elem
            interpreter = self.interpreter
            if interpreter.chased is None and not self.queue:
                interpreter.chased = conn
            else:
                self.enqueue(conn)
        else:
            _Base.push(self.logic, out, elem, ts)

    def pull(self, in_):
        conn = self.conns[in_.id]
        try:
            st = conn.state
        except AttributeError:
            return _Base.pull(self.logic, in_)
        if st == IN_READY:
            conn.state = PULLING
            interpreter = self.interpreter
            if interpreter.chased is None and not self.queue:
                interpreter.chased = conn
            else:
                self.enqueue(conn)
        else:
            _Base.pull(self.logic, in_)

    def grab(self, in_):
        conn = self.conns[in_.id]
        try:
            elem = conn.slot
        except AttributeError:
            return _Base.grab(self.logic, in_)
        if conn.state == IN_READY and elem is not EMPTY:
            conn.slot = EMPTY
            return elem
        return _Base.grab(self.logic, in_)

    push.port_fast_path = pull.port_fast_path = grab.port_fast_path = True


def port_calls(logic, interpreter, conns, ports) -> _PortCalls:
    """The port calls over ``conns`` (a logic's inlet or outlet connections, by port id) and ``ports``."""
    if len(conns) == 1 and conns[0] is not None and ports[0] is not None:
        return OnePort(logic, interpreter, ports[0], conns[0])
    return ByPortId(logic, interpreter, conns)


# ---------------------------------------------------------------------- fused handlers
# A built-in logic whose per-element handler is a port call or two around one computation (a range
# source's ``on_pull``, a fold's ``on_push``) may run a closure that inlines those calls' plain case: it
# saves two or three Python calls per element where the logic runs element by element (its neighbours
# have no chunk form). The closure is installed as the instance's ``on_push``/``on_pull`` (so a handler
# set again later, by a checkpoint pause for instance, finds it too) and as the connection's.

def fusable(logic, cls, name: str, *calls) -> bool:
    """Whether ``logic`` may run a fused form of ``cls``'s handler ``name``: its class does not override
    it, and every port call in ``calls`` is a fast path (not a stamped event-time form)."""
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
