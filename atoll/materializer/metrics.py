"""Per-island metrics through ``ray.util.metrics`` (Ray's Prometheus endpoint and dashboard).

``atoll.metrics.enable(interval=1.0)`` (or ``ATOLL_METRICS=1`` in the environment, read on ``import atoll``)
starts recording: one shared sampler thread on the driver reads ``islands()`` of every running graph
(``graph_registry``) each ``interval`` seconds and records, tagged ``graph`` and ``island``:

==============================  =======  =====================================================
``atoll_island_elements_in``    Counter  elements received (input channels, else own sources)
``atoll_island_elements_out``   Counter  elements sent through output channels
``atoll_island_buffer_fill``    Gauge    input buffers' fill, 0..1
``atoll_island_demand``         Gauge    demand outstanding from downstream (elements)
``atoll_island_failures``       Counter  the island ended failed or died
``atoll_island_restarts``       Counter  restarts reported by the island (``restarts`` in its info)
==============================  =======  =====================================================

(Prometheus shows them with Ray's ``ray_`` prefix, counters with ``_total``.) The thread runs only while a
graph runs: it ends after the last running graph ended (its final figures recorded) and starts again with
the next one; ``disable()`` stops it. A recorder other than Ray's (``enable(recorder=...)``) receives the
same calls: ``counter(name, value, tags)`` and ``gauge(name, value, tags)``.
"""
from __future__ import annotations

import logging
import os
import threading
from typing import Any, Dict, Optional, Tuple

from . import graph_registry

log = logging.getLogger("atoll.metrics")

ELEMENTS_IN = "atoll_island_elements_in"
ELEMENTS_OUT = "atoll_island_elements_out"
BUFFER_FILL = "atoll_island_buffer_fill"
DEMAND = "atoll_island_demand"
FAILURES = "atoll_island_failures"
RESTARTS = "atoll_island_restarts"
TAG_KEYS = ("graph", "island")

_DESCRIPTIONS = {
    ELEMENTS_IN: "Elements an Atoll island received (input channels, else its own sources)",
    ELEMENTS_OUT: "Elements an Atoll island sent through its output channels",
    BUFFER_FILL: "Fill of an Atoll island's input buffers (0..1)",
    DEMAND: "Demand outstanding from downstream of an Atoll island (elements)",
    FAILURES: "Atoll islands that ended failed or died",
    RESTARTS: "Restarts of an Atoll island",
}
COUNTERS = (ELEMENTS_IN, ELEMENTS_OUT, FAILURES, RESTARTS)
GAUGES = (BUFFER_FILL, DEMAND)


class RayRecorder:
    """Records into ``ray.util.metrics`` (created on first use; nothing recorded while Ray is not up)."""

    def __init__(self):
        self._metrics: Dict[str, Any] = {}

    def _get(self, name: str):
        m = self._metrics.get(name)
        if m is None:
            import ray
            from ray.util import metrics as rm

            if not ray.is_initialized():
                return None
            cls = rm.Counter if name in COUNTERS else rm.Gauge
            m = self._metrics[name] = cls(name, description=_DESCRIPTIONS[name], tag_keys=TAG_KEYS)
        return m

    def counter(self, name: str, value: float, tags: Dict[str, str]) -> None:
        m = self._get(name)
        if m is not None and value > 0:
            m.inc(value, tags=tags)

    def gauge(self, name: str, value: float, tags: Dict[str, str]) -> None:
        m = self._get(name)
        if m is not None:
            m.set(value, tags=tags)


class _Sampler:
    def __init__(self, interval: float, recorder: Any):
        self.interval = interval
        self.recorder = recorder
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.thread: Optional[threading.Thread] = None
        #: (graph id, island) -> (elements in, elements out, restarts, failure recorded)
        self.last: Dict[Tuple[int, str], Tuple[int, int, int, bool]] = {}

    def ensure_running(self) -> None:
        with self.lock:
            if self.stop_event.is_set() or (self.thread is not None and self.thread.is_alive()):
                return
            self.thread = threading.Thread(target=self._run, name="atoll-metrics", daemon=True)
            self.thread.start()

    def _run(self) -> None:
        watched: Dict[int, graph_registry.GraphEntry] = {}
        while True:
            for e in graph_registry.graphs():
                if e.ended is None:
                    watched.setdefault(e.id, e)
            if not watched:
                with self.lock:  # exit, unless a graph started meanwhile (it then starts a new thread)
                    if not any(e.ended is None for e in graph_registry.graphs()):
                        self.thread = None
                        return
                continue
            for gid, e in list(watched.items()):
                ended = not e.graph.is_running
                self.sample(e)
                if ended:  # its last figures are in
                    del watched[gid]
                    for key in [k for k in self.last if k[0] == gid]:
                        del self.last[key]
            if self.stop_event.wait(self.interval):
                return

    def sample(self, entry: graph_registry.GraphEntry) -> None:
        try:
            infos = entry.graph.islands()
        except Exception as ex:  # noqa: BLE001 - try again next time
            log.debug("metrics: islands() of %s failed: %r", entry.name, ex)
            return
        rec = self.recorder
        for info in infos:
            island = str(info.get("name", "?"))
            tags = {"graph": entry.name, "island": island}
            key = (entry.id, island)
            has_inputs = bool(info.get("inputs")) or bool(info.get("elements_in"))
            n_in = info.get("elements_in", 0) if has_inputs else info.get("source_elements", 0)
            n_out = info.get("elements_out", 0)
            restarts = info.get("restarts", 0) or 0
            p_in, p_out, p_restarts, failed = self.last.get(key, (0, 0, 0, False))
            if "elements_in" in info or "source_elements" in info:  # figures of a live island
                rec.counter(ELEMENTS_IN, max(0, n_in - p_in), tags)
                rec.counter(ELEMENTS_OUT, max(0, n_out - p_out), tags)
                if info.get("buffer_fill") is not None:
                    rec.gauge(BUFFER_FILL, float(info["buffer_fill"]), tags)
                rec.gauge(DEMAND, float(info.get("demand", 0) or 0), tags)
            else:  # an ended Ray island reports its state only: keep the counts
                n_in, n_out = p_in, p_out
            if restarts > p_restarts:
                rec.counter(RESTARTS, restarts - p_restarts, tags)
            if not failed and info.get("state") in ("failed", "died"):
                rec.counter(FAILURES, 1, tags)
                failed = True
            self.last[key] = (n_in, n_out, max(restarts, p_restarts), failed)

    def stop(self) -> None:
        self.stop_event.set()
        with self.lock:
            t = self.thread
        if t is not None:
            t.join(timeout=10)


_sampler: Optional[_Sampler] = None
_lock = threading.Lock()


def _on_graph(entry: graph_registry.GraphEntry) -> None:
    s = _sampler
    if s is not None:
        s.ensure_running()


def enable(interval: float = 1.0, recorder: Any = None) -> None:
    """Record every running graph's per-island metrics every ``interval`` seconds (replaces an earlier
    ``enable``). ``recorder``: where to (default ``RayRecorder()``: ``ray.util.metrics``)."""
    global _sampler
    disable()
    with _lock:
        _sampler = _Sampler(interval, recorder if recorder is not None else RayRecorder())
        graph_registry.add_listener(_on_graph)
        _sampler.ensure_running()


def disable() -> None:
    """Stop recording (the sampler thread is joined)."""
    global _sampler
    with _lock:
        s, _sampler = _sampler, None
        graph_registry.remove_listener(_on_graph)
    if s is not None:
        s.stop()


def enabled() -> bool:
    return _sampler is not None


def sampler_thread() -> Optional[threading.Thread]:
    """The sampler's thread while it runs (tests check that it ends)."""
    s = _sampler
    return None if s is None else s.thread


if os.environ.get("ATOLL_METRICS", "") not in ("", "0"):
    enable()
