"""Passes over an assembled island before its interpreter is built: the one place both materializers call.

``prepare_island(builder, settings)`` runs every build-time rewrite of an island (today: the chunk
negotiation of the kernel) so that the local materializer and the Ray island actor assemble islands
the same way.
"""
from __future__ import annotations


def prepare_island(builder, settings) -> None:
    """Rewrite ``builder``'s island in place according to the materializer ``settings``."""
    if settings.fusion:
        from .fusion import fuse

        fuse(builder)
