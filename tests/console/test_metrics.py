"""Per-island metrics: the sampler records the right names and tags, and its thread ends with the graphs.

Read back through the recorder seam (``atoll.metrics.enable(recorder=...)``), which receives exactly the calls
made on ``ray.util.metrics`` by the default ``RayRecorder``; Ray's Prometheus export itself is not read here."""
from __future__ import annotations

import threading

from atoll import metrics
from atoll.materializer import graph_registry

from .conftest import demo_like


class MemoryRecorder:
    def __init__(self):
        self.lock = threading.Lock()
        self.counters = {}
        self.gauges = {}
        self.changed = threading.Condition(self.lock)

    def counter(self, name, value, tags):
        with self.lock:
            key = (name, tags["graph"], tags["island"])
            self.counters[key] = self.counters.get(key, 0) + value
            self.changed.notify_all()

    def gauge(self, name, value, tags):
        with self.lock:
            self.gauges[(name, tags["graph"], tags["island"])] = value
            self.changed.notify_all()


def test_metrics_names_tags_and_thread_end(mat, no_leaked_threads):
    rec = MemoryRecorder()
    metrics.enable(interval=0.05, recorder=rec)
    try:
        done = demo_like(20_000).run(mat)
        graph = graph_registry.graphs()[-1].graph
        done.result(timeout=60)
        assert graph.wait(10)
        thread = metrics.sampler_thread()
        if thread is not None:
            thread.join(timeout=10)  # it ends once no graph runs (after recording the final figures)
            assert not thread.is_alive()
        g = graph.name
        assert rec.counters[(metrics.ELEMENTS_IN, g, "aggregate")] == 20_000
        assert rec.counters[(metrics.ELEMENTS_OUT, g, "enrich")] == 20_000
        assert rec.counters[(metrics.ELEMENTS_IN, g, "enrich")] == 20_000  # its range source counts
        assert (metrics.DEMAND, g, "enrich") in rec.gauges
        assert 0.0 <= rec.gauges[(metrics.BUFFER_FILL, g, "aggregate")] <= 1.0
        assert not any(k[0] == metrics.FAILURES for k in rec.counters)
    finally:
        metrics.disable()
    assert metrics.sampler_thread() is None


class _DyingGraph:
    """A graph handle whose island died (as a Ray island actor that was killed reports it)."""

    id = -7
    name = "dying"

    def __init__(self):
        from concurrent.futures import Future

        self.completion = Future()
        self.state = "running"

    @property
    def is_running(self):
        return not self.completion.done()

    def islands(self):
        return [{"name": "worker", "state": self.state, "restarts": 2 if self.state == "died" else 0}]


def test_died_island_counts_a_failure_and_restarts(no_leaked_threads):
    rec = MemoryRecorder()
    metrics.enable(interval=0.05, recorder=rec)
    try:
        g = _DyingGraph()
        graph_registry.graph_started(None, g)
        g.state = "died"
        with rec.changed:
            assert rec.changed.wait_for(lambda: (metrics.FAILURES, "dying", "worker") in rec.counters, timeout=10)
        g.completion.set_result(None)
        thread = metrics.sampler_thread()
        if thread is not None:
            thread.join(timeout=10)
        assert rec.counters[(metrics.FAILURES, "dying", "worker")] == 1
        assert rec.counters[(metrics.RESTARTS, "dying", "worker")] == 2
    finally:
        metrics.disable()
        graph_registry.clear_ended()
