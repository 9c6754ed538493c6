"""How many elements a stage with a chunk form asks for per pull, adapted to its cost per element.

A chunk is handled in one interpreter event, and an island's thread serves nothing else meanwhile (kill
switches, channel messages, timers). So a stage that calls user code sizes its pulls so that one chunk
takes about ``TARGET`` seconds of its own work: it starts small, doubles while chunks stay quick,
and shrinks to what fits the target when they do not (one element at a time for a slow function). Asking
for fewer elements than downstream wants is always allowed; the per-element semantics do not change.
"""
from __future__ import annotations

from time import perf_counter

TARGET = 0.004  # seconds of one stage's work per chunk
START = 16


class ChunkBudget:
    __slots__ = ("size", "limit")

    def __init__(self, limit: int):
        self.limit = max(1, limit)
        self.size = min(START, self.limit)

    def update(self, n: int, seconds: float) -> None:
        """``n`` elements of the last chunk took ``seconds`` of this stage's work."""
        if seconds > TARGET:
            self.size = max(1, min(self.size, int(n * TARGET / seconds)))
        elif seconds < TARGET / 2 and self.size < self.limit:
            self.size = min(self.limit, self.size * 2)  # (a short chunk, e.g. after a filter, still says "cheap")


now = perf_counter  # real time on purpose: the budget bounds CPU time per event, not stream semantics
