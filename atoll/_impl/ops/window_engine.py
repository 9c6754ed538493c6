"""The event-time window engine: assignment, lateness, firing and expiry of windows, free of any interpreter.

The window GraphStage feeds it elements with their timestamps, watermarks, the end of the stream and
processing-time ticks (``element``, ``advance``, ``early``, ``end``), and pushes what they append to two parallel
lists: ``recs`` gets ``Window`` results and, when late elements are diverted, ``Late`` records, in emission order;
``stamps`` gets each one's timestamp (the window's ``max_timestamp``, the late element's timestamp). Two lists and
no pair per result: the stage pushes them on as a chunk and its timestamps as they are. ``on_element``,
``on_watermark``, ``fire_early`` and ``on_end`` are the same steps appending ``(record, timestamp)`` pairs to one
``out`` list (for tests and tools driving an engine by hand). Semantics: section 1.5 of the
event-time spec (watermark ``W``: no element with a timestamp ``< W`` follows). ``WindowEngine(...)`` builds the
engine specialised for the window shape: tumbling and per-window sliding (``window_engine_fixed``), pane-based
sliding (same module), sessions (``window_engine_session``).
"""
from __future__ import annotations

import copy
import math
import operator
from abc import ABC, abstractmethod
from typing import Any, Callable, List, Optional, Tuple

from ...errors import StreamError, TooManyWindowsError
from ...windowing import Aggregate, Late, Session, Sliding, Tumbling, WindowStats, validate_window_options
from ...windowing.records import make_window

INF = math.inf
_INVERTIBLE = ("Aggregate.sum", "Aggregate.count")

#: What ``out`` receives in the paired form: ``(record, timestamp)`` pairs.
Out = List[Tuple[Any, Any]]
#: The split form: records, and their timestamps in a parallel list.
Recs = List[Any]
Stamps = List[Any]


def max_timestamp(end: Any) -> Any:
    """The last timestamp of a window ending (exclusively) at ``end``."""
    return end - 1 if isinstance(end, int) else math.nextafter(end, -INF)


class WindowEngine(ABC):
    """One window operator's state machine; constructing it returns the subclass for the window shape.

    ``key=None`` puts every element under the key ``None``. ``divert_late=True`` emits ``Late`` records for late
    elements (the stage routes them to ``late_to``); ``on_late="fail"`` raises ``StreamError`` instead and wins over
    diverting. ``early_every`` is only the promise that ``fire_early`` will be called (it rules out the pane path);
    the ticks themselves come from the stage. ``stats`` is the ``WindowStats`` to keep current (a new one if None).

    Engines are slotted (here and in every subclass): the per-element and per-window paths read a dozen
    attributes of ``self``, and a slot read stays a fixed-offset load whatever the number of attributes (an
    instance dict stops sharing its keys past 30 of them, and every read then hashes the name).
    """

    __slots__ = ("name", "spec", "_key", "_create", "_add", "_merge", "_result", "_aggregate_pure", "_lateness",
                 "_accumulate", "_early_count", "_early_every", "_fail", "_divert", "_max_open", "stats", "watermark",
                 "_seq", "_invertible")

    def __new__(cls, name: str, spec: Any, *args: Any, **kwargs: Any) -> "WindowEngine":
        if cls is WindowEngine:
            from .window_engine_fixed import FixedWindowEngine, TumblingEngine
            from .window_engine_panes import EarlyPaneSlidingEngine, PaneSlidingEngine
            from .window_engine_session import SessionEngine
            if isinstance(spec, Tumbling):
                cls = TumblingEngine
            elif isinstance(spec, Sliding):
                if PaneSlidingEngine.applies(spec, *args, **kwargs):
                    cls = PaneSlidingEngine
                elif EarlyPaneSlidingEngine.applies(spec, *args, **kwargs):
                    cls = EarlyPaneSlidingEngine  # processing-time early firings, accumulating
                else:
                    cls = FixedWindowEngine
            elif isinstance(spec, Session):
                cls = SessionEngine
            else:
                raise TypeError(f"{name}: the window must be Tumbling, Sliding or Session, got {type(spec).__name__}")
        return object.__new__(cls)

    def __init__(self, name: str, spec: Any, key: Optional[Callable[[Any], Any]], aggregate: Aggregate, *,
                 allowed_lateness: Any = 0, accumulate: bool = True, early_count: Optional[int] = None,
                 early_every: Optional[float] = None, on_late: str = "drop", divert_late: bool = False,
                 max_open_windows: Optional[int] = None, stats: Optional[WindowStats] = None):
        validate_window_options(name, spec, key, aggregate, allowed_lateness, early_count, early_every, on_late,
                                max_open_windows)
        self.name = name
        self.spec = spec
        self._key = key
        self._create = aggregate.create
        self._add = aggregate.add
        self._merge = aggregate.merge
        self._result = aggregate.result
        self._aggregate_pure = getattr(aggregate, "_pure", False)
        # the helpers whose merge is ``+`` over the accumulators, so that ``-`` undoes it (exactly on ints)
        self._invertible = (self._aggregate_pure and getattr(aggregate, "name", None) in _INVERTIBLE
                            and aggregate.merge is operator.add)
        self._lateness = allowed_lateness
        self._accumulate = bool(accumulate)
        self._early_count = early_count
        self._early_every = early_every
        self._fail = on_late == "fail"
        self._divert = bool(divert_late)
        self._max_open = max_open_windows
        self.stats = stats if stats is not None else WindowStats()
        self.watermark: Any = -INF
        self.stats.watermark = -INF
        self.stats.open_windows = 0
        self._seq = 0
        self._init_state()

    # ------------------------------------------------------------------------------------------ subclass hooks
    @abstractmethod
    def _init_state(self) -> None:
        """Start with no windows."""

    @abstractmethod
    def element(self, elem: Any, ts: Any, recs: Recs, stamps: Stamps) -> None:
        """Put ``elem`` (event time ``ts``) into its windows; late firings, early firings and late records go to
        ``recs``/``stamps``."""

    @abstractmethod
    def advance(self, w: Any, recs: Recs, stamps: Stamps) -> None:
        """Advance to watermark ``w`` (a value not above the current one is ignored): fire the windows ending at or
        before ``w`` in ``(end, start, creation)`` order, then drop the expired ones."""

    @abstractmethod
    def early(self, recs: Recs, stamps: Stamps) -> None:
        """Processing-time early firing: every unfired window with elements since its last firing fires ``early``."""

    @abstractmethod
    def _state(self) -> Any:
        """The windows as plain data (deep-copied by the caller)."""

    @abstractmethod
    def _load(self, state: Any) -> None:
        """Rebuild the windows from ``_state()`` data, into a reset engine."""

    # ------------------------------------------------------------------------------------------ shared
    def end(self, recs: Recs, stamps: Stamps) -> None:
        """End of stream (``W = +inf``): every unfired window fires, then no state is left."""
        self.advance(INF, recs, stamps)

    # the paired form: the same steps, ``(record, timestamp)`` pairs appended to ``out``
    def on_element(self, elem: Any, ts: Any, out: Out) -> None:
        recs: Recs = []
        stamps: Stamps = []
        try:
            self.element(elem, ts, recs, stamps)
        finally:
            out.extend(zip(recs, stamps))

    def on_watermark(self, w: Any, out: Out) -> None:
        recs: Recs = []
        stamps: Stamps = []
        try:
            self.advance(w, recs, stamps)
        finally:
            out.extend(zip(recs, stamps))

    def fire_early(self, out: Out) -> None:
        recs: Recs = []
        stamps: Stamps = []
        try:
            self.early(recs, stamps)
        finally:
            out.extend(zip(recs, stamps))

    def on_end(self, out: Out) -> None:
        recs: Recs = []
        stamps: Stamps = []
        try:
            self.end(recs, stamps)
        finally:
            out.extend(zip(recs, stamps))

    def open_windows(self) -> int:
        """How many window states are held now (windows, or sessions)."""
        return self.stats.open_windows

    def snapshot_state(self) -> dict:
        """A picklable deep copy of the state (watermark included) for a checkpoint."""
        return copy.deepcopy({"engine": type(self).__name__, "watermark": self.watermark, "seq": self._seq,
                              "state": self._state()})

    def restore_state(self, state: dict) -> None:
        """Replace the whole state by a ``snapshot_state()`` of an engine built the same way (it is copied)."""
        if state.get("engine") != type(self).__name__:
            raise StreamError(f"{self.name}: cannot restore a {state.get('engine')} snapshot into "
                              f"a {type(self).__name__}")
        state = copy.deepcopy(state)
        self.reset_state()
        self.watermark = self.stats.watermark = state["watermark"]
        self._seq = state["seq"]
        self._load(state["state"])

    def reset_state(self) -> None:
        """Forget every window (no firing); only the watermark is kept."""
        self.stats.open_windows = 0
        self._init_state()

    def _emit(self, key: Any, start: Any, end: Any, acc: Any, timing: str, recs: Recs, stamps: Stamps,
              superseded: Tuple = ()) -> None:
        result = self._result
        recs.append(make_window(key, start, end, acc if result is None else result(acc), timing, superseded))
        stamps.append(max_timestamp(end))

    def _late(self, elem: Any, ts: Any, recs: Recs, stamps: Stamps) -> None:
        if self._fail:
            raise StreamError(f"{self.name}: late element with timestamp {ts!r}: all its windows expired at "
                              f"watermark {self.watermark!r} (allowed_lateness={self._lateness!r})")
        if self._divert:
            self.stats.late_diverted += 1
            recs.append(Late(elem, ts, self.watermark))
            stamps.append(ts)
        else:
            self.stats.late_dropped += 1

    def _opened(self, n: int, key: Any, start: Any, end: Any) -> None:
        """Count ``n`` new window states, failing first if that passes ``max_open_windows``."""
        total = self.stats.open_windows + n
        if self._max_open is not None and total > self._max_open:
            raise TooManyWindowsError(f"{self.name}: more than max_open_windows={self._max_open} open windows "
                                      f"(opening [{start!r}, {end!r}) of key {key!r})")
        self.stats.open_windows = total

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} W={self.watermark!r} open={self.stats.open_windows}>"
