"""The driver's list of running and recent graphs, for consoles and metrics.

Every graph a materializer registers (``Materializer._register``) is noted here with the blueprint it was
run from (``RunnableGraph.run`` names it for the duration of the call, on the calling thread), so that a
console can draw it. Running graphs are always listed; of the ended ones, the ``RECENT`` latest stay. Code
that wants to hear about new graphs (the metrics sampler) adds a listener.

An ended graph's entry holds nothing of its run's data: the graph's handle has let its interpreters go
(``RunningGraphBase._release``), and its blueprint, which may hold the user's data (``Source.from_iterable(rows)``),
is then held weakly: the drawing of an ended graph is there while its owner still has the blueprint, or if a
console drew it before.
"""
from __future__ import annotations

import contextlib
import logging
import threading
import time
import weakref
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
    ``RunnableGraph.run``; a weak reference once the graph ended), its materializer, when it started and ended
    (``time.time()``)."""

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
        blueprint = self.blueprint
        if isinstance(blueprint, weakref.ref):
            blueprint = blueprint()
        if self._drawing is None and blueprint is not None:
            from .graph_drawing import describe

            try:
                self._drawing = describe(blueprint, self.graph.name)
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

    def done(_f=None) -> None:
        if entry.ended is None:
            entry.ended = time.time()
        blueprint = entry.blueprint
        if blueprint is not None and not isinstance(blueprint, weakref.ref):
            try:
                entry.blueprint = weakref.ref(blueprint)
            except TypeError:   # (a blueprint type that cannot be weakly referred to: no drawing once ended)
                entry.blueprint = None

    add_cleanup = getattr(graph, "add_cleanup", None)
    if add_cleanup is not None:
        add_cleanup(done)   # before the graph's completion: a caller waiting for it finds the entry ended
    completion = getattr(graph, "completion", None)
    if completion is not None:
        completion.add_done_callback(done)   # (a graph that finished before it was registered)
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
