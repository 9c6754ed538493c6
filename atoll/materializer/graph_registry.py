"""The driver's list of running and recent graphs, for consoles and metrics.

Every graph a materializer registers (``Materializer._register``) is noted here with the blueprint it was
run from (``RunnableGraph.run`` names it for the duration of the call, on the calling thread), so that a
console can draw it. Running graphs are always listed; of the ended ones, the ``RECENT`` latest stay. Code
that wants to hear about new graphs (the metrics sampler) adds a listener.
"""
from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any, Callable, Iterator, List, Optional

log = logging.getLogger(__name__)

#: how many ended graphs stay listed
RECENT = 20

_local = threading.local()
_lock = threading.Lock()
_entries: List["GraphEntry"] = []
_listeners: List[Callable[["GraphEntry"], None]] = []


class GraphEntry:
    """One registered graph: the running handle, its blueprint (None if it was materialized without
    ``RunnableGraph.run``), its materializer, when it started and ended (``time.time()``)."""

    __slots__ = ("graph", "blueprint", "materializer", "started", "ended", "_drawing", "final_islands")

    def __init__(self, graph: Any, blueprint: Any, materializer: Any):
        self.graph = graph
        self.blueprint = blueprint
        self.materializer = materializer
        self.started = time.time()
        self.ended: Optional[float] = None
        self._drawing = None
        #: the last ``islands()`` read after the graph ended (a console's last figures)
        self.final_islands: Optional[List[dict]] = None

    @property
    def name(self) -> str:
        return self.graph.name

    @property
    def id(self) -> int:
        return self.graph.id

    def drawing(self):
        """The blueprint's ``GraphDrawing`` (computed once), or None without a blueprint."""
        if self._drawing is None and self.blueprint is not None:
            from .graph_drawing import describe

            try:
                self._drawing = describe(self.blueprint, self.graph.name)
            except Exception as e:  # noqa: BLE001 - a console must not fail on one graph
                log.warning("cannot draw graph %s: %r", self.graph.name, e)
                self.blueprint = None
        return self._drawing


@contextlib.contextmanager
def materializing(blueprint: Any) -> Iterator[None]:
    """While the block runs, graphs registered on this thread were run from ``blueprint``."""
    previous = getattr(_local, "blueprint", None)
    _local.blueprint = blueprint
    try:
        yield
    finally:
        _local.blueprint = previous


def graph_started(materializer: Any, graph: Any) -> None:
    """A materializer registered ``graph`` (a running graph handle)."""
    entry = GraphEntry(graph, getattr(_local, "blueprint", None), materializer)
    with _lock:
        _entries.append(entry)
        ended = [e for e in _entries if e.ended is not None]
        for old in ended[: max(0, len(ended) - RECENT)]:
            _entries.remove(old)
        listeners = list(_listeners)

    def done(_f) -> None:
        entry.ended = time.time()

    completion = getattr(graph, "completion", None)
    if completion is not None:
        completion.add_done_callback(done)
    for fn in listeners:
        try:
            fn(entry)
        except Exception as e:  # noqa: BLE001 - a listener must not fail a run
            log.error("graph listener %r failed: %r", fn, e)


def graphs() -> List[GraphEntry]:
    """Running and recent graphs, oldest first."""
    with _lock:
        return list(_entries)


def find(graph_id: int) -> Optional[GraphEntry]:
    with _lock:
        for e in _entries:
            if e.graph.id == graph_id:
                return e
    return None


def add_listener(fn: Callable[[GraphEntry], None]) -> None:
    """Call ``fn(entry)`` for every graph registered from now on."""
    with _lock:
        _listeners.append(fn)


def remove_listener(fn: Callable[[GraphEntry], None]) -> None:
    with _lock:
        if fn in _listeners:
            _listeners.remove(fn)


def clear_ended() -> None:
    """Forget the graphs that ended (tests)."""
    with _lock:
        _entries[:] = [e for e in _entries if e.ended is None]
