"""The interpreter's connection record and its port-state bit flags (Pekko's ``GraphInterpreter.Connection``).

A connection joins one outlet to one inlet inside an island. ``state`` holds one-hot protocol bits
(``IN_READY`` -> ``PULLING`` -> ``OUT_READY`` -> ``PUSHING`` -> ``IN_READY``) plus closure bits; every
transition is an XOR flip, and an event is queued at most once per connection, so the whole protocol
is a few integer operations per element.
"""
from __future__ import annotations

IN_READY = 1
PULLING = 2
PUSHING = 4
OUT_READY = 8
IN_CLOSED = 16
OUT_CLOSED = 32
IN_FAILED = 64
SIGNAL = 128  # control signals wait on the connection (``signals``); diverts the dispatch to the slow path
HELD = 256  # a fan-in holds this inlet until a blocking signal is aligned: nothing is delivered meanwhile

PULL_START_FLIP = IN_READY ^ PULLING  # 3
PULL_END_FLIP = PULLING ^ OUT_READY  # 10
PUSH_START_FLIP = OUT_READY ^ PUSHING  # 12
PUSH_END_FLIP = PUSHING ^ IN_READY  # 5

# Hot-path masks, precomputed (Python does not fold ``A | B`` of module constants): a port call or an
# event takes its fast path when ``state & MASK`` equals the one protocol bit named after the ``==``.
PULL_MASK = IN_READY | IN_CLOSED | OUT_CLOSED  # == IN_READY: a pull may start
PUSH_MASK = OUT_READY | OUT_CLOSED | IN_CLOSED  # == OUT_READY: a push may start
GRAB_MASK = IN_READY | IN_FAILED | IN_CLOSED  # == IN_READY: an open inlet
PUSH_EVENT_MASK = PUSHING | IN_CLOSED | OUT_CLOSED | SIGNAL | HELD  # == PUSHING: a plain push event
PULL_EVENT_MASK = PULLING | OUT_CLOSED | IN_CLOSED | SIGNAL  # == PULLING: a plain pull event

KEEP_GOING_FLAG = 0x4000000
KEEP_GOING_MASK = 0x3FFFFFF


class _Empty:
    __slots__ = ()

    def __repr__(self):
        return "Empty"


#: Marker for "no element in the slot"; elements themselves may never be ``None``.
EMPTY = _Empty()


class Failed:
    """Slot content after upstream failed: the cause plus an element still waiting to be grabbed."""

    __slots__ = ("ex", "previous")

    def __init__(self, ex: BaseException, previous):
        self.ex = ex
        self.previous = previous

    def __repr__(self):
        return f"Failed({self.ex!r}, {self.previous!r})"


class Cancelled:
    """Slot content after downstream cancelled: the cancellation cause."""

    __slots__ = ("cause",)

    def __init__(self, cause: BaseException):
        self.cause = cause

    def __repr__(self):
        return f"Cancelled({self.cause!r})"


#: ``Connection.end`` kinds
END_COMPLETED = "completed"
END_FAILED = "failed"
END_CANCELLED = "cancelled"


class Connection:
    """One in-island edge: owners, handlers, port state and the element slot."""

    __slots__ = (
        "id", "in_owner", "out_owner", "in_handler", "out_handler", "state", "slot", "inlet", "outlet",
        "demand", "chunked", "signals", "signals_before", "on_push", "on_pull", "ts", "end",
    )

    def __init__(self, id: int):
        self.id = id
        #: chunk connections (``chunked``): the slot holds a list of elements, and ``demand`` is the most
        #: elements the pending pull accepts (set by ``pull_chunk``); element connections keep 1
        self.demand = 1
        self.chunked = False
        #: control signals travelling on this connection (see ``atoll.stage.signals``), oldest first;
        #: the first ``signals_before`` of them precede the element in flight
        self.signals = None
        self.signals_before = 0
        self.in_owner = None
        self.out_owner = None
        self.in_handler = None
        self.out_handler = None
        #: the handlers' ``on_push`` / ``on_pull``, bound once (the hot path calls them per event)
        self.on_push = None
        self.on_pull = None
        self.state = IN_READY
        self.slot = EMPTY
        #: event-time graphs only: the timestamp of the element in ``slot`` (a list of them, one per
        #: element, on a chunk connection), or None; never read in graphs without event time
        self.ts = None
        self.inlet = None
        self.outlet = None
        #: how the connection closed first, and from which side: None while open, else ``(END_COMPLETED, None)``
        #: or ``(END_FAILED, exc)`` (upstream closed it) or ``(END_CANCELLED, cause)`` (downstream did). A checkpoint
        #: records it for the stages that finished, so that a restore closes their ports as they were closed
        self.end = None

    def set_in_handler(self, handler) -> None:
        self.in_handler = handler
        self.on_push = handler.on_push

    def set_out_handler(self, handler) -> None:
        self.out_handler = handler
        self.on_pull = handler.on_pull

    def __repr__(self):
        return (
            f"Connection({self.id}, {self.out_owner!r}.{getattr(self.outlet, 'name', '?')} -> "
            f"{self.in_owner!r}.{getattr(self.inlet, 'name', '?')}, state={describe_state(self.state)})"
        )


def describe_state(state: int) -> str:
    """Human-readable port state, for debug output."""
    names = []
    for bit, name in (
        (IN_READY, "InReady"),
        (PULLING, "Pulling"),
        (PUSHING, "Pushing"),
        (OUT_READY, "OutReady"),
        (IN_CLOSED, "InClosed"),
        (OUT_CLOSED, "OutClosed"),
        (IN_FAILED, "InFailed"),
        (SIGNAL, "Signal"),
        (HELD, "Held"),
    ):
        if state & bit:
            names.append(name)
    return "|".join(names) or "0"
