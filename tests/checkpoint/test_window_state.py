"""Event-time pipelines restore exactly (Flink's EventTimeWindowCheckpointingITCase shape): a range source
stamped by ``with_timestamps`` into tumbling, sliding and session windows, with allowed lateness and a late
outlet, checkpointed at several points, fused and unfused: the restored output (windows and late records)
equals the failure-free run."""
from __future__ import annotations

import pytest

from atoll import Aggregate, Materializer, Sink, Source
from atoll.testkit.round_trip import checkpoint_round_trip

N = 240


def _event(i):
    """(timestamp, key, value): timestamps out of order by up to 6, every 17th element 40 behind (late)."""
    ts = 3 * i + (i * 7) % 13 - 6
    if i % 17 == 16:
        ts -= 40
    return (ts, "k%d" % (i % 3), i)


def _ts(e):
    return e[0]


def _key(e):
    return e[1]


def _value(e):
    return e[2]


def _events():
    return Source.range(0, N).map(_event).with_timestamps(_ts, max_out_of_orderness=6)


def _tumbling():
    return _events().tumbling_window(20, key=_key, aggregate=Aggregate.sum(_value))


def _tumbling_lateness():
    return _events().tumbling_window(20, key=_key, aggregate=Aggregate.collect(), allowed_lateness=25)


def _sliding():
    return _events().sliding_window(30, 10, key=_key, aggregate=Aggregate.count())


def _sliding_panes():
    return _events().sliding_window(30, 10, key=_key, aggregate=Aggregate.sum(_value), allowed_lateness=15)


def _session():
    return _events().filter(lambda e: e[2] % 11 not in (4, 5, 6)).session_window(
        8, key=_key, aggregate=Aggregate.collect(), allowed_lateness=10)


def _global_tumbling():
    return _events().tumbling_window(50, aggregate=Aggregate.count()).map(lambda w: (w.start, w.value))


BLUEPRINTS = {
    "tumbling": _tumbling,
    "tumbling_lateness": _tumbling_lateness,
    "sliding": _sliding,
    "sliding_panes": _sliding_panes,
    "session": _session,
    "global_tumbling": _global_tumbling,
}


def _count(make) -> int:
    m = Materializer.local()
    try:
        return len(make().run_with(Sink.seq(), m).result(10))
    finally:
        m.shutdown()


COUNTS = {name: _count(make) for name, make in BLUEPRINTS.items()}
CASES = [(name, at) for name in sorted(BLUEPRINTS)
         for at in sorted({0, 1, COUNTS[name] // 3, 2 * COUNTS[name] // 3, COUNTS[name] - 1})]


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("name,at", CASES)
def test_window_round_trip(name, at, fusion, tmp_path):
    expected, got = checkpoint_round_trip(BLUEPRINTS[name], at=at, storage=str(tmp_path), fusion=fusion)
    assert got == expected and len(expected) > 5


# ---------------------------------------------------------------------------------------------- late outlet
class _LateFutures:
    """Keeps the late sink's future of each run (``combine`` of the window's ``late_to``)."""

    def __init__(self):
        self.futures = []

    def __call__(self, stats, late):
        self.futures.append(late)
        return stats


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("at", [0, 7, 40])
def test_late_outlet_round_trip(at, fusion, tmp_path):
    kept = _LateFutures()

    def make():
        return _events().tumbling_window(20, key=_key, aggregate=Aggregate.count(), allowed_lateness=10,
                                         late_to=Sink.seq(), combine=kept)

    expected, got = checkpoint_round_trip(make, at=at, storage=str(tmp_path), fusion=fusion)
    assert got == expected
    # runs: uninterrupted, checkpointed (stopped), restored: the restored late records equal the first run's
    lates = [f.result(10) for f in (kept.futures[0], kept.futures[2])]
    assert lates[0] == lates[1] and len(lates[0]) > 3


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("at", [0, 5, 30])
def test_partitioned_assigner_round_trip(at, fusion, tmp_path):
    def make():
        return (Source.range(0, N).map(_event)
                .with_timestamps(_ts, max_out_of_orderness=6, partition=_key, watermark_granularity=5)
                .tumbling_window(20, key=_key, aggregate=Aggregate.count()))

    expected, got = checkpoint_round_trip(make, at=at, storage=str(tmp_path), fusion=fusion)
    assert got == expected
