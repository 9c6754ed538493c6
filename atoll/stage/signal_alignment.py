"""The shared fan-in layer of the signal lane: a stage with several inlets hears a signal once.

Every junction (and any custom stage with several inlets) gets one ``FanInAlignment`` the first time
a signal reaches it. The rules, by the signal's kind (see ``atoll.stage.signals``):

* watermarks and idle markers: the watermark valve (``atoll.stage.watermark_valve``): the minimum
  over the active, aligned, live inlets, idle inlets and a cycle's feedback inlets left out;
* other ordered kinds: each inlet's latest key is kept; once every live inlet delivered one,
  the stage hears the minimum whenever it advances;
* other kinds: the stage hears the signal once every live inlet delivered an equal one; a kind with
  ``blocks_input`` (barriers) also holds each inlet that delivered it - its next elements, signals and
  completion wait in the connection - until the signal is complete (aligned checkpoints).

"Live" means not yet closed: an inlet that completed, failed or was cancelled no longer holds a
signal back, and its closing may itself complete an alignment.
"""
from __future__ import annotations

from typing import Any, Dict, List

from ._connection import HELD, IN_CLOSED, OUT_CLOSED, PUSHING, SIGNAL
from .signals import Idle, Watermark
from .watermark_valve import WatermarkValve


class FanInAlignment:
    __slots__ = ("logic", "pending", "marks", "forwarded", "valve", "feedback")

    def __init__(self, logic, feedback=()):
        self.logic = logic
        #: inlets the watermark valve leaves out: feedback inputs of a cycle (``_impl.islands.feedback``)
        self.feedback = feedback
        self.pending: Dict[Any, List[bool]] = {}  # unordered signal -> which inlets delivered it
        self.marks: Dict[type, List[Any]] = {}  # ordered kind -> each inlet's latest key (None: none yet)
        self.forwarded: Dict[type, Any] = {}  # ordered kind -> the last key the stage heard
        self.valve = None  # watermarks and idle markers (created with the first of them)

    def _live(self) -> List[bool]:
        return [not (c.state & IN_CLOSED) for c in self.logic._in_conns]

    def on_signal(self, idx: int, signal) -> None:
        """Inlet ``idx`` delivered ``signal``."""
        kind = type(signal)
        if kind is Watermark or kind is Idle:
            valve = self.valve
            if valve is None:
                valve = self.valve = WatermarkValve(self.logic, len(self.logic._in_conns), self.feedback)
            if kind is Watermark:
                valve.on_watermark(idx, signal.timestamp)
            else:
                valve.on_idle(idx)
            return
        if kind.ordered:
            marks = self.marks.get(kind)
            if marks is None:
                marks = self.marks[kind] = [None] * len(self.logic._in_conns)
            key = signal.order_key()
            if marks[idx] is None or key > marks[idx]:
                marks[idx] = key
                self._advance(kind, signal)
            return
        seen = self.pending.get(signal)
        if seen is None:
            seen = self.pending[signal] = [False] * len(self.logic._in_conns)
        seen[idx] = True
        if not self._complete(signal, seen) and kind.blocks_input:
            conn = self.logic._in_conns[idx]
            conn.state |= HELD

    def on_inlet_closed(self) -> None:
        """An inlet closed: alignments it held back may be complete now."""
        if self.valve is not None:
            self.valve.on_inlet_closed()
        for kind, marks in list(self.marks.items()):
            self._advance(kind, None)
        for signal, seen in list(self.pending.items()):
            self._complete(signal, seen)

    def _advance(self, kind, sample) -> None:
        marks = self.marks[kind]
        live = self._live()
        keys = [m for m, alive in zip(marks, live) if alive]
        if not keys or any(k is None for k in keys):
            return
        low = min(keys)
        last = self.forwarded.get(kind)
        if last is None or low > last:
            self.forwarded[kind] = low
            if sample is None or sample.order_key() != low:
                sample = _sample_of(kind, marks, low, sample)
            self.logic.on_signal(sample)

    def _complete(self, signal, seen: List[bool]) -> bool:
        live = self._live()
        if not all(s or not alive for s, alive in zip(seen, live)):
            return False
        del self.pending[signal]
        logic = self.logic
        if type(signal).blocks_input:
            interp = logic._interpreter
            for i, conn in enumerate(logic._in_conns):
                st = conn.state
                if st & HELD:
                    conn.state = st & ~HELD
                    if st & (PUSHING | SIGNAL | OUT_CLOSED) and not st & IN_CLOSED:
                        interp.enqueue(conn)  # what waited behind the signal goes on
        logic.on_signal(signal)
        return True


def _sample_of(kind, marks, low, sample):
    """A signal of ``kind`` carrying key ``low``."""
    if sample is not None:
        return sample.with_order_key(low)
    # ordered kinds are built from their key (Watermark(ts)), as ``with_order_key`` documents
    return kind(low)
