"""Event time for stages that combine several elements into one (spec 1.2: the combined output carries
the **max** of its inputs' timestamps).

Everything here runs only in graphs with event time: the stages install these hooks from
``enable_event_time`` (instance attributes replacing ``grab``/``push``/the combining function), so a
graph without event time runs the plain methods and pays nothing.
"""
from __future__ import annotations

from collections import deque
from itertools import islice
from typing import Any, Callable, Iterable, NamedTuple, Optional

from ...stage.logic import GraphStageLogic


def later(a: Any, b: Any) -> Any:
    """The larger of two timestamps, either of which may be None (no timestamp)."""
    if a is None:
        return b
    if b is None or b <= a:
        return a
    return b


def latest(stamps: Iterable[Any]) -> Optional[Any]:
    """The largest timestamp in ``stamps`` (None entries ignored; None when there is none)."""
    best = None
    for t in stamps:
        if t is not None and (best is None or t > best):
            best = t
    return best


class Timed(NamedTuple):
    """Checkpoint state with the timestamp that goes with it (event-time graphs only; plain graphs save the
    state alone, as before)."""

    state: Any
    ts: Any


class LatestPerInput:
    """Mixin for fan-in logics whose output combines the element grabbed last from each input (``Zip``,
    ``ZipWith``, ``ZipLatest``, ``MergeLatest``): the output carries the max of those elements' timestamps.
    The timestamps are kept per input at ``grab``, so an element waiting ungrabbed in a port never counts."""

    in_stamps = None

    def enable_event_time(self) -> None:
        super().enable_event_time()
        self.in_stamps = [None] * len(self._in_conns)
        self.grab = self._grab_latest
        self.push = self._push_latest

    def _grab_latest(self, in_) -> Any:
        elem = GraphStageLogic._grab_stamped(self, in_)
        self.in_stamps[in_.id] = self._ts
        return elem

    def _push_latest(self, out, elem: Any, ts: Any = None) -> None:
        GraphStageLogic._push_stamped(self, out, elem, latest(self.in_stamps) if ts is None else ts)


class SuffixStamps:
    """Mixin for one-input logics whose output is a list made of the last elements received (``grouped``,
    ``grouped_weighted``, ``sliding``, ``take_last``), kept in ``self.buf``: ``stamps`` holds the timestamps
    of the elements received, oldest first, at least one per element of ``buf``; an output list of ``k``
    elements carries the max of the last ``k`` timestamps; after a push only ``len(buf)`` are kept."""

    stamps = None

    def new_stamps(self) -> deque:
        return deque()

    def enable_event_time(self) -> None:
        super().enable_event_time()
        self.stamps = self.new_stamps()
        self.grab = self._grab_suffix
        self.push = self._push_suffix

    def suffix_ts(self, k: int) -> Any:
        """The max timestamp of the last ``k`` elements received."""
        st = self.stamps
        return latest(islice(st, max(0, len(st) - k), None))

    def _grab_suffix(self, in_) -> Any:
        elem = GraphStageLogic._grab_stamped(self, in_)
        self.stamps.append(self._ts)
        return elem

    def stamp_state(self) -> Any:
        """The timestamps as checkpoint data (None outside event time)."""
        return None if self.stamps is None else list(self.stamps)

    def restore_stamp_state(self, state: Any) -> None:
        if self.stamps is not None:
            self.stamps.clear()
            self.stamps.extend(state)

    def _push_suffix(self, out, elem: Any, ts: Any = None) -> None:
        GraphStageLogic._push_stamped(self, out, elem, self.suffix_ts(len(elem)) if ts is None else ts)
        st = self.stamps
        for _ in range(len(st) - len(self.buf)):
            st.popleft()


class FoldedMax:
    """Mixin for accumulating logics (``fold``, ``fold_while``, ``reduce``): ``acc_ts`` is the max timestamp
    of the elements folded into ``acc`` so far, kept by wrapping ``self.fn`` (an element whose ``fn`` raised
    was not folded and does not count). The logic pushes its result with ``ts=self.acc_ts`` and resets
    ``acc_ts`` with the accumulator."""

    acc_ts = None

    def timed(self, state: Any) -> Any:
        """``state`` for a checkpoint, with ``acc_ts`` when there is one."""
        return state if self.acc_ts is None else Timed(state, self.acc_ts)

    def untimed(self, state: Any) -> Any:
        """The state saved by ``timed``; ``acc_ts`` restored on the way."""
        if type(state) is Timed:
            self.acc_ts = state.ts
            return state.state
        return state

    def enable_event_time(self) -> None:
        super().enable_event_time()
        fn: Callable[[Any, Any], Any] = self.fn

        def folded(acc, x):
            acc = fn(acc, x)
            self.acc_ts = later(self.acc_ts, self._ts)
            return acc

        self.fn = folded
