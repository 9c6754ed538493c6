"""Passes over an assembled island before its interpreter is built: the one place both materializers call.

``prepare_island(builder, settings)`` runs every build-time rewrite of an island - today the chunk
negotiation of the kernel (``atoll._impl.islands.chunking``) - so that the local materializer and the Ray
island actor assemble islands the same way. ``settings.fusion`` (``Materializer.local(fusion=False)``)
turns chunks off: every connection then moves one element per event, the reference the randomized
parity tests compare against. In a graph with event time every logic is switched to carry timestamps
(``GraphStageLogic.enable_event_time``) after the chunk negotiation, adapters included.
"""
from __future__ import annotations

from .chunking import DEFAULT_CHUNK_SIZE, negotiate_chunks


def prepare_island(builder, settings, event_time: bool = False) -> None:
    """Rewrite ``builder``'s island in place according to the materializer ``settings``. With
    ``event_time`` (the graph holds an event-time stage) only chunk forms that carry timestamps run
    chunked, and every logic then carries a timestamp beside each element."""
    if settings.fusion:
        negotiate_chunks(builder, getattr(settings, "chunk_size", DEFAULT_CHUNK_SIZE), event_time)
    if event_time:
        for logic in builder.logics:
            logic.enable_event_time()
