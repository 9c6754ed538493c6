"""Window shapes (``Tumbling``, ``Sliding``, ``Session``) and the build-time checks of a window operator's options.

Every error names the operator (``where``), so a bad argument is reported at graph-building time, not mid-stream.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

from .aggregate import Aggregate


def _number(where: str, what: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{where}: {what} must be an int or float, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"{where}: {what} must be finite, got {value!r}")


def _positive(where: str, what: str, value: Any) -> None:
    _number(where, what, value)
    if value <= 0:
        raise ValueError(f"{where}: {what} must be > 0, got {value!r}")


@dataclass(frozen=True)
class Tumbling:
    """Back-to-back windows ``[offset + k*size, offset + (k+1)*size)``."""

    size: Any
    offset: Any = 0
    where: Optional[str] = field(default=None, compare=False, repr=False, kw_only=True)

    def __post_init__(self) -> None:
        where = self.where or "Tumbling"
        _positive(where, "size", self.size)
        _number(where, "offset", self.offset)


@dataclass(frozen=True)
class Sliding:
    """Windows of length ``size`` starting every ``slide`` (at ``offset + k*slide``), ``0 < slide <= size``."""

    size: Any
    slide: Any
    offset: Any = 0
    where: Optional[str] = field(default=None, compare=False, repr=False, kw_only=True)

    def __post_init__(self) -> None:
        where = self.where or "Sliding"
        _positive(where, "size", self.size)
        _positive(where, "slide", self.slide)
        _number(where, "offset", self.offset)
        if self.slide > self.size:
            raise ValueError(f"{where}: slide ({self.slide!r}) must not exceed size ({self.size!r})")


@dataclass(frozen=True)
class Session:
    """Per-key activity windows: elements less than ``gap`` apart share a session, which ends ``gap`` after its
    last element. Sessions exactly ``gap`` apart stay separate."""

    gap: Any
    where: Optional[str] = field(default=None, compare=False, repr=False, kw_only=True)

    def __post_init__(self) -> None:
        _positive(self.where or "Session", "gap", self.gap)


def _count(where: str, what: str, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{where}: {what} must be None or an int >= 1, got {value!r}")


def validate_window_options(name: str, spec: Any, key: Any, aggregate: Any, allowed_lateness: Any,
                            early_count: Any, early_every: Any, on_late: Any, max_open_windows: Any) -> None:
    """Raise ``TypeError``/``ValueError`` starting with ``name`` for any option a window operator cannot run with."""
    if not isinstance(spec, (Tumbling, Sliding, Session)):
        raise TypeError(f"{name}: the window must be Tumbling, Sliding or Session, got {type(spec).__name__}")
    if key is not None and not callable(key):
        raise TypeError(f"{name}: key must be callable or None, got {type(key).__name__}")
    if not isinstance(aggregate, Aggregate):
        raise TypeError(f"{name}: aggregate must be an Aggregate, got {type(aggregate).__name__}")
    if isinstance(allowed_lateness, bool) or not isinstance(allowed_lateness, (int, float)):
        raise TypeError(f"{name}: allowed_lateness must be an int or float, got {type(allowed_lateness).__name__}")
    if not allowed_lateness >= 0:  # also NaN
        raise ValueError(f"{name}: allowed_lateness must be >= 0, got {allowed_lateness!r}")
    if isinstance(spec, Session) and aggregate.merge is None:
        raise ValueError(f"{name}: session windows merge accumulators: the aggregate needs merge "
                         f"({aggregate.name} has none)")
    if on_late not in ("drop", "fail"):
        raise ValueError(f"{name}: on_late must be 'drop' or 'fail', got {on_late!r}")
    _count(name, "early_count", early_count)
    _count(name, "max_open_windows", max_open_windows)
    if early_every is not None:
        if isinstance(early_every, bool) or not isinstance(early_every, (int, float)) \
                or not 0 < early_every < math.inf:
            raise ValueError(f"{name}: early_every must be None or a positive number of seconds, got {early_every!r}")
