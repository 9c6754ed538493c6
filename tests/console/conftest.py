"""Graphs for the console tests: the demo's shape (a source island, an aggregating island, a sink) on the
local materializer, running until cancelled."""
from __future__ import annotations

import threading

import pytest

from atoll import Aggregate, Keep, Sink, Source


def _stamp(i: int) -> dict:
    return {"user_id": i % 7, "ts_ms": i * 50}


def demo_like(n: int = None):
    """``enrich`` -> ``aggregate`` (event-time windows) -> a sink island, as the demo; infinite when ``n`` is None."""
    src = Source.repeat(1).zip_with_index().map(lambda p: p[1]) if n is None else Source.range(0, n)
    return (src.map(_stamp).island(name="enrich")
            .with_timestamps(lambda e: e["ts_ms"], max_out_of_orderness=1_000)
            .tumbling_window(60_000, key=lambda e: e["user_id"], aggregate=Aggregate.count())
            .island(name="aggregate")
            .to_mat(Sink.ignore(), Keep.right))


@pytest.fixture
def no_leaked_threads():
    before = set(threading.enumerate())
    yield
    def leaked():
        return [t for t in threading.enumerate() if t not in before and t.is_alive()
                and t.name.startswith(("atoll-console", "atoll-metrics", "atoll-progress"))]
    for t in leaked():
        t.join(timeout=10)
    assert not leaked()
