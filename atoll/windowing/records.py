"""What window operators emit: ``Window`` results and, when late elements are diverted, ``Late`` records."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Tuple


@dataclass(frozen=True, slots=True)
class Window:
    """One firing of the window ``[start, end)`` of ``key``.

    ``timing`` is ``"early"``, ``"on_time"`` or ``"late"``; ``superseded`` lists the ``(start, end)`` of windows
    emitted before that this one replaces (merged sessions), so an upserting sink can retract them.
    Slotted (no ``__dict__``): a record costs one object, which matters to the garbage collector when a sink keeps
    many of them.
    """

    key: Any
    start: Any
    end: Any
    value: Any
    timing: str = "on_time"
    superseded: Tuple[Tuple[Any, Any], ...] = ()

    @property
    def max_timestamp(self):
        """The last timestamp inside the window (``end`` minus one tick): the result's own event time."""
        end = self.end
        if isinstance(end, int):
            return end - 1
        return math.nextafter(end, -math.inf)


_new = object.__new__
_set_key, _set_start, _set_end, _set_value, _set_timing, _set_superseded = (
    Window.__dict__[name].__set__ for name in ("key", "start", "end", "value", "timing", "superseded"))


def make_window(key: Any, start: Any, end: Any, value: Any, timing: str = "on_time",
                superseded: Tuple[Tuple[Any, Any], ...] = ()) -> Window:
    """``Window(key, start, end, value, timing, superseded)`` built without the dataclass ``__init__`` (six frozen
    ``__setattr__`` calls): the engines' per-window path. The record is the same in every respect."""
    w = _new(Window)
    _set_key(w, key)
    _set_start(w, start)
    _set_end(w, end)
    _set_value(w, value)
    _set_timing(w, timing)
    _set_superseded(w, superseded)
    return w


@dataclass(frozen=True, slots=True)
class Late:
    """An element none of whose windows accepted it any more: its value, its timestamp, the watermark then."""

    value: Any
    timestamp: Any
    watermark: Any
