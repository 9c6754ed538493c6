"""TimeOps: operators that read the host's clock - grouping within a time, throttling, delays and timeouts
(Pekko's timer-driven operators)."""
from __future__ import annotations


class TimeOps:
    """Mixin for Source and Flow."""

    __slots__ = ()
