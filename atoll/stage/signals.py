"""Control signals: typed in-band items that travel between elements on the kernel's signal lane.

A signal is not an element. It is never handed to user functions, needs no demand, and keeps its
place among the elements of a connection, of a chunk stream and of a channel frame: whatever was
pushed before it arrives before it, whatever was pushed after it arrives after it. A stage hears a
signal in ``GraphStageLogic.on_signal``, whose default forwards it to every outlet after the
elements the stage still has to emit there. A stage with several inlets hears a signal once, after
the shared fan-in alignment (``atoll.stage.signal_alignment``) decided that every live inlet
delivered it.

New kinds subclass ``Signal`` (frozen, picklable: they cross islands) and choose the alignment:
``blocks_input`` (an inlet that delivered the signal is held until every live inlet did, the rule
for checkpoint barriers) and ``ordered`` (signals compare by ``order_key``; fan-in forwards the
minimum over the live inlets when it advances, the rule for watermarks). A kind with neither is
forwarded once every live inlet delivered an equal signal. ``Watermark`` and ``Idle`` go through
the fan-in's watermark valve (``atoll.stage.watermark_valve``) instead.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar


class Signal:
    """Base of every control signal."""

    __slots__ = ()

    #: a fan-in holds back the inlet that delivered this signal until every live inlet delivered it
    blocks_input: ClassVar[bool] = False
    #: signals of this kind are ordered by ``order_key``; fan-in forwards the minimum over its inlets
    ordered: ClassVar[bool] = False
    #: a newer signal of this kind replaces one still waiting right before it on a connection (no
    #: element between them), so a slow consumer holds at most one (watermarks: latest wins)
    coalesce: ClassVar[bool] = False

    def order_key(self) -> Any:
        raise TypeError(f"{type(self).__name__} is not an ordered signal")

    def with_order_key(self, key: Any) -> "Signal":
        raise TypeError(f"{type(self).__name__} is not an ordered signal")


@dataclass(frozen=True, slots=True)
class Watermark(Signal):
    """Event time has reached ``timestamp``: no element with a smaller timestamp follows (except late ones)."""

    timestamp: int

    ordered: ClassVar[bool] = True
    coalesce: ClassVar[bool] = True

    def order_key(self) -> int:
        return self.timestamp

    def with_order_key(self, key: int) -> "Watermark":
        return Watermark(key)


@dataclass(frozen=True, slots=True)
class Idle(Signal):
    """The stream is idle: no elements for a while (``with_timestamps(idle_timeout=...)``). A fan-in
    leaves an idle input out of its watermark until that input sends a watermark again; the next
    watermark on the stream makes it active."""

    coalesce: ClassVar[bool] = True

    def __repr__(self) -> str:
        return "Idle"


#: the one idle marker (all ``Idle()`` are equal)
IDLE = Idle()


@dataclass(frozen=True, slots=True)
class Barrier(Signal):
    """Checkpoint barrier ``checkpoint_id``: every element before it belongs to that checkpoint."""

    checkpoint_id: int

    blocks_input: ClassVar[bool] = True


def require_signal(where: str, signal: Any) -> None:
    """Raise a ``TypeError`` naming ``where`` unless ``signal`` is a ``Signal``."""
    if not isinstance(signal, Signal):
        raise TypeError(f"{where}: a control signal must be an atoll Signal (Watermark, Barrier, ...), got {signal!r}")
