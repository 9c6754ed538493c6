"""Live counters of one window operator (its materialized value)."""
from __future__ import annotations

import math
from typing import Any, Dict


class WindowStats:
    """Counters updated in place by the running window operator; read them at any time.

    ``late_dropped``/``late_diverted``: elements all of whose windows had expired; ``partially_late``: elements
    dropped from some but not all of their (sliding) windows; ``open_windows``: window states held now;
    ``watermark``: the operator's current watermark.

    On ``Materializer.ray()`` the value is a handle to the counters in the island's actor: each counter
    read asks the actor for its live value, and ``snapshot()`` reads them all at one moment (after the
    graph ended both answer from the final counts).
    """

    __slots__ = ("late_dropped", "late_diverted", "partially_late", "open_windows", "watermark")
    __atoll_remote_fields__ = __slots__

    def __init__(self) -> None:
        self.late_dropped = 0
        self.late_diverted = 0
        self.partially_late = 0
        self.open_windows = 0
        self.watermark: Any = -math.inf

    def snapshot(self) -> Dict[str, Any]:
        """A plain dict copy of the counters at this moment."""
        return {name: getattr(self, name) for name in self.__slots__}

    def __atoll_detach__(self) -> "WindowStats":
        """The final copy a Ray island leaves behind for its driver-side handle."""
        copy = WindowStats()
        for name in self.__slots__:
            setattr(copy, name, getattr(self, name))
        return copy

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"WindowStats({fields})"
