"""Live counters of one window operator (its materialized value)."""
from __future__ import annotations

import math
from typing import Any, Dict


class WindowStats:
    """Counters updated in place by the running window operator; read them at any time.

    ``late_dropped``/``late_diverted``: elements all of whose windows had expired; ``partially_late``: elements
    dropped from some but not all of their (sliding) windows; ``open_windows``: window states held now;
    ``watermark``: the operator's current watermark.
    """

    __slots__ = ("late_dropped", "late_diverted", "partially_late", "open_windows", "watermark")

    def __init__(self) -> None:
        self.late_dropped = 0
        self.late_diverted = 0
        self.partially_late = 0
        self.open_windows = 0
        self.watermark: Any = -math.inf

    def snapshot(self) -> Dict[str, Any]:
        """A plain dict copy of the counters at this moment."""
        return {name: getattr(self, name) for name in self.__slots__}

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"WindowStats({fields})"
