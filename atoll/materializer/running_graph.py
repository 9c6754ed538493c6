"""RunningGraph: the driver's handle on one materialized graph (for an operator's console).

It lists the graph's islands with their state, waits for all of them to end, and cancels the whole
graph with a cause (every stage fails with it, so every future of the graph fails with it too).
"""
from __future__ import annotations

import itertools
import logging
import threading
from concurrent.futures import Future
from typing import Any, Callable, List, Optional

from ..errors import AbruptTerminationError
from ..markers import Done

_graph_ids = itertools.count(1)
log = logging.getLogger(__name__)


class RunningGraph:
    def __init__(self, name: str, islands: List[Any], on_end: Optional[Callable[["RunningGraph"], None]] = None,
                 cleanups: Optional[List[Callable[[], None]]] = None):
        self.id = next(_graph_ids)
        self.name = name
        self._islands = list(islands)
        self._remaining = len(self._islands)
        self._lock = threading.Lock()
        self._on_end = on_end
        self._cleanups: List[Callable[[], None]] = list(cleanups or ())
        self.completion: Future = Future()
        self.completion.set_running_or_notify_cancel()
        if self._remaining == 0:
            self._finish()

    def __repr__(self):
        state = "ended" if self.completion.done() else "running"
        return f"RunningGraph({self.name}, {len(self._islands)} islands, {state})"

    def island_ended(self, island) -> None:
        """Called by each island's host when it stopped."""
        with self._lock:
            self._remaining -= 1
            last = self._remaining == 0
        if last:
            self._finish()

    def add_cleanup(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` when every island has ended (before ``completion`` is set)."""
        self._cleanups.append(fn)

    def _finish(self) -> None:
        for fn in self._cleanups:
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - a failed clean-up must not hide the graph's outcome
                log.error("cleanup of graph %s failed: %r", self.name, e)
        errors = [i.error for i in self._islands if getattr(i, "error", None) is not None]
        if errors:
            self.completion.set_exception(errors[0])
        else:
            self.completion.set_result(Done)
        if self._on_end is not None:
            self._on_end(self)

    @property
    def is_running(self) -> bool:
        return not self.completion.done()

    def cancel(self, cause: Optional[BaseException] = None) -> None:
        """Fail every stage of every island with ``cause`` (default: ``AbruptTerminationError``)."""
        if cause is None:
            cause = AbruptTerminationError(f"graph {self.name} was cancelled")
        for island in self._islands:
            island.cancel(cause)

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Block until every island ended; True if they did within ``timeout`` seconds."""
        try:
            self.completion.exception(timeout)
            return True
        except TimeoutError:
            return False

    def islands(self) -> List[dict]:
        """Name, state and placement of each island."""
        return [i.info() for i in self._islands]
