"""map_pool's chunk form on Ray (island actor + pool actors): exact order with batches, Resume dropping only
the failing element of a chunk, the bound on held elements, event timestamps through the pool into a
window - each compared with the element-by-element local reference (``Materializer.local(fusion=False)``,
local worker threads). Every test ends with no pool actor alive."""
from __future__ import annotations

import random

import pytest
import ray

from atoll import Aggregate, Attributes, Keep, Materializer, Sink, Source, Supervision
from test_map_pool import CPU, _counted, _emit, assert_no_pool_actor, counter  # noqa: F401 - fixture

RESUME = Attributes.supervision_strategy(Supervision.resuming_decider)


class Boom(Exception):
    pass


class Times10:
    """``x * 10`` (a list for a batch); ``Boom`` for the elements in ``bad`` (a batch: if it holds one)."""

    def __init__(self, bad=()):
        self.bad = frozenset(bad)

    def __call__(self, x):
        if isinstance(x, list):
            if self.bad.intersection(x):
                raise Boom(x[0])
            return [e * 10 for e in x]
        if x in self.bad:
            raise Boom(x)
        return x * 10


def _times10(bad=()):
    return lambda: Times10(bad)


@pytest.mark.parametrize("batch_size", [None, 16])
def test_ordered_results_exact_in_chunks(rmat, batch_size):
    out = Source.from_iterable(range(2000)).map(lambda x: x) \
        .map_pool(_times10(), size=2, batch_size=batch_size, num_cpus=CPU) \
        .map(lambda x: x).run_with(Sink.seq(), rmat).result(120)
    assert out == [x * 10 for x in range(2000)]
    assert_no_pool_actor()


def test_resume_drops_only_the_failing_element_of_a_chunk(rmat):
    bad = {0, 5, 6, 333, 999}
    out = Source.from_iterable(range(1000)).map_pool(_times10(bad), size=2, num_cpus=CPU) \
        .with_attributes(RESUME).run_with(Sink.seq(), rmat).result(120)
    assert out == [x * 10 for x in range(1000) if x not in bad]
    assert_no_pool_actor()


def test_holds_at_most_the_bound(rmat, counter):  # noqa: F811 - the fixture
    n, size, mif, batch = 400, 2, 2, 8
    out = Source.from_iterator(_counted(counter, n)) \
        .map_pool(_times10(), size=size, max_in_flight_per_actor=mif, batch_size=batch, num_cpus=CPU) \
        .map(_emit(counter)).run_with(Sink.seq(), rmat).result(120)
    assert out == [x * 10 for x in range(n)]
    stats = ray.get(ray.get_actor(counter).get.remote())
    assert stats["pulled"] == stats["emitted"] == n
    # as in test_map_pool: the element between the source and the stage may be pulled already, hence + 1
    assert stats["max_held"] <= size * mif * batch + 1
    assert_no_pool_actor()


def _drop_ts(bad):
    return lambda: (lambda e: None if e[1] in bad else (e[0], e[1]))


def _windows(events, mat, bad):
    return (Source.from_iterable(events)
            .with_timestamps(lambda e: e[2], max_out_of_orderness=5)
            .map_pool(_drop_ts(bad), size=2, num_cpus=CPU)
            .tumbling_window(10, key=lambda e: e[0], aggregate=Aggregate.sum(lambda e: e[1]))
            .run_with(Sink.seq(), mat).result(120))


def test_event_timestamps_travel_with_the_elements(rmat):
    rng = random.Random(11)
    events, ts = [], 0
    for i in range(300):
        ts += rng.randint(0, 3)
        events.append((rng.choice("ab"), i, ts - rng.randint(0, 4)))
    bad = frozenset({3, 50, 51})
    local = Materializer.local(fusion=False)
    try:
        want = _windows(events, local, bad)
    finally:
        local.shutdown()
    assert want
    assert _windows(events, rmat, bad) == want
    assert_no_pool_actor()
