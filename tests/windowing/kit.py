"""Drives a WindowEngine through a script of events and returns what it emitted, for exact comparisons."""
from __future__ import annotations

from typing import Any, List, Tuple

from atoll._impl.ops.window_engine import WindowEngine
from atoll.windowing import Window


def el(value: Any, ts: Any = None) -> Tuple:
    """An element whose timestamp is itself unless given."""
    return ("e", value, value if ts is None else ts)


def wm(w: Any) -> Tuple:
    return ("w", w)


END = ("end",)
EARLY = ("early",)


def drive(engine: WindowEngine, script) -> List[Tuple[Any, Any]]:
    out: List[Tuple[Any, Any]] = []
    for step in script:
        if step[0] == "e":
            engine.on_element(step[1], step[2], out)
        elif step[0] == "w":
            engine.on_watermark(step[1], out)
        elif step[0] == "early":
            engine.fire_early(out)
        else:
            engine.on_end(out)
    return out


def win(start: Any, end: Any, value: Any, timing: str = "on_time", key: Any = None, superseded=()) -> Tuple:
    """The expected ``(Window, timestamp)`` pair of an integer window."""
    return (Window(key, start, end, value, timing, tuple(superseded)), end - 1)
