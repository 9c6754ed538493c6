"""The event time the kernel keeps for a stage, saved at a checkpoint cut beside the stage's own state.

Two things belong to the kernel rather than to an operator: a stage's ``EventClock`` (the watermark it heard and
sent on, its watermark hold, its armed event timers: ``GraphStageLogic.on_watermark`` and friends) and, on a stage
with several inlets, the fan-in alignment (the watermark valve's per-inlet watermarks and idle flags, the keys of
other ordered signal kinds, the unordered signals some inlets delivered). Without them a restored stage heard time
start again from ``-inf``: a custom stage lost its event timers, and a ``Merge`` feeding a window waited for every
input to repeat a watermark, so the window met its elements under an older watermark than before the cut. Blocking
signals (barriers) are never saved: inside an island there are none, and a cut never holds one half aligned.
"""
from __future__ import annotations

from typing import Any, Optional

from ...stage.signal_alignment import FanInAlignment
from ...stage.watermark_valve import WatermarkValve
from ..ops.base import event_clock_state, restore_event_clock

#: the snapshot key of a stage's kernel event time: ``(EVENT_TIME, stage key)``
EVENT_TIME = "event_time"


def event_time_state(logic) -> Optional[dict]:
    """What the kernel holds of ``logic``'s event time (``None``: nothing, the stage never heard a signal)."""
    clock = event_clock_state(logic) if logic._event_clock is not None else None
    alignment = _alignment_state(logic._alignment)
    if clock is None and alignment is None:
        return None
    return {"clock": clock, "alignment": alignment}


def restore_event_time_state(logic, state: dict) -> None:
    """Give ``logic`` back what ``event_time_state`` saved (before its own ``restore_from_snapshot``)."""
    if state.get("clock") is not None:
        restore_event_clock(logic, state["clock"])
    saved = state.get("alignment")
    if saved is None:
        return
    alignment = logic._alignment
    if alignment is None:
        alignment = logic._alignment = FanInAlignment(logic)
    alignment.marks = {kind: list(keys) for kind, keys in saved["marks"].items()}
    alignment.forwarded = dict(saved["forwarded"])
    alignment.pending = {sig: list(seen) for sig, seen in saved["pending"]}
    valve = saved["valve"]
    if valve is not None:
        marks, idle, aligned, last, output_idle = valve
        v = alignment.valve = WatermarkValve(logic, len(marks), alignment.feedback)
        v.marks, v.idle, v.aligned = list(marks), list(idle), list(aligned)
        v.last, v.output_idle = last, output_idle


def _alignment_state(alignment: Optional[FanInAlignment]) -> Optional[dict]:
    if alignment is None:
        return None
    valve = alignment.valve
    pending = [(sig, list(seen)) for sig, seen in alignment.pending.items() if not type(sig).blocks_input]
    if valve is None and not alignment.marks and not pending:
        return None
    return {
        "valve": None if valve is None else (list(valve.marks), list(valve.idle), list(valve.aligned), valve.last,
                                             valve.output_idle),
        "marks": {kind: list(keys) for kind, keys in alignment.marks.items()},
        "forwarded": dict(alignment.forwarded),
        "pending": pending,
    }


def is_event_time_key(key: Any) -> bool:
    return type(key) is tuple and len(key) == 2 and key[0] == EVENT_TIME
