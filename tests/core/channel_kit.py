"""Fakes and comparisons shared by the channel and codec tests: a recording stand-in for a peer island's actor,
and an equality that also checks types (and float signs, nan) all the way down."""
from __future__ import annotations

import math
import queue
from types import SimpleNamespace

from atoll._impl.islands.boundaries import FrameSignals, FrameTimestamps


class RecordingActor:
    """Stands in for a peer island's actor: every ``method.remote(*args)`` is queued as (method, args)."""

    def __init__(self):
        self.calls: queue.Queue = queue.Queue()

    def __getattr__(self, name):
        calls = self.calls
        return SimpleNamespace(remote=lambda *args: calls.put((name, args)))

def same(a, b) -> bool:
    """``a`` and ``b`` equal with the same types all the way down, dict keys in the same order."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(ka, kb) for ka, kb in zip(a, b)) and all(
            same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, float):
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, (FrameSignals, FrameTimestamps)):
        return same(getattr(a, a.__slots__[0]), getattr(b, b.__slots__[0]))
    return a == b
