"""map_pool's chunk form (local worker threads): it runs between chunk-capable neighbours, and keeps the
element form's contract exactly - output order (ordered), the bound on held elements, supervision per
element (Resume drops the failing element only, also inside a chunk), event timestamps, the place of
control signals. Every run is compared with ``Materializer.local(fusion=False)``, where map_pool runs
element by element."""
from __future__ import annotations

import random
import threading

import pytest
from chunk_kit import CHUNK_SETTINGS, Boom, check_chunked, check_signals, drive, outcome, resuming, same

from atoll import Aggregate, Attributes, Flow, Keep, Materializer, Sink, Source, Supervision
from atoll._impl.ops import pool_map
from atoll.stage.signals import Watermark

W = Watermark


@pytest.fixture
def chunked_logics(monkeypatch):
    """The map_pool logics the chunk negotiation switched to the chunk form."""
    switched = []
    orig = pool_map._MapPoolLogic.enable_chunks

    def spy(self, chunk_size):
        switched.append(self)
        orig(self, chunk_size)

    monkeypatch.setattr(pool_map._MapPoolLogic, "enable_chunks", spy)
    return switched


class Jittery:
    """``x * 10`` after a random short pause, so that calls complete out of order; raises ``Boom(x)`` for
    the elements in ``bad``; ``None`` for the elements in ``none``."""

    def __init__(self, seed: int = 0, bad=(), none=()):
        self.rng = random.Random(seed)
        self.bad = frozenset(bad)
        self.none = frozenset(none)
        self.lock = threading.Lock()

    def _one(self, x):
        if x in self.bad:
            raise Boom(x)
        return None if x in self.none else x * 10

    def __call__(self, x):
        with self.lock:
            pause = self.rng.random() * 0.002
        threading.Event().wait(pause)  # completion order only: nothing waits for it
        if isinstance(x, list):
            if any(e in self.bad for e in x):
                raise Boom(x[0])
            return [None if e in self.none else e * 10 for e in x]
        return self._one(x)


def _model(seed=0, bad=(), none=()):
    return lambda: Jittery(seed, bad, none)


DATA = list(range(200))


@pytest.mark.parametrize("batch_size", [None, 1, 7, 64])
@pytest.mark.parametrize("size", [1, 3])
def test_ordered_output_is_exact_and_the_chunk_form_runs(chunked_logics, batch_size, size):
    want = check_chunked(lambda f: f.map_pool(_model(size), size=size, batch_size=batch_size), DATA)
    assert want == ("ok", [x * 10 for x in DATA])
    assert chunked_logics and all(lg.chunked for lg in chunked_logics)


@pytest.mark.parametrize("batch_size", [None, 5])
def test_unordered_emits_every_result_once(chunked_logics, batch_size):
    for s in CHUNK_SETTINGS:
        got = outcome(Source.from_iterable(DATA).map_pool(_model(2), size=3, ordered=False, batch_size=batch_size)
                      .to_mat(Sink.seq(), Keep.right), **s)
        assert got[0] == "ok" and sorted(got[1]) == [x * 10 for x in DATA], s
    assert chunked_logics


def test_none_results_are_dropped_inside_a_chunk(chunked_logics):
    none = {0, 3, 4, 5, 99, 199}
    want = check_chunked(lambda f: f.map_pool(_model(1, none=none), size=2, batch_size=4), DATA)
    assert want == ("ok", [x * 10 for x in DATA if x not in none])
    assert chunked_logics


@pytest.mark.parametrize("size,mif,batch", [(1, 1, None), (2, 2, None), (2, 2, 8), (3, 1, 16)])
def test_never_holds_more_than_the_bound(chunked_logics, size, mif, batch):
    """Pulled minus emitted, counted by chunk-form maps right around the stage, never passes
    ``size * max_in_flight_per_actor * (batch_size or 1)``."""
    bound = size * mif * (batch or 1)
    for s in CHUNK_SETTINGS:
        count = {"in": 0, "out": 0, "max": 0}
        lock = threading.Lock()

        def pulled(x):
            with lock:
                count["in"] += 1
                count["max"] = max(count["max"], count["in"] - count["out"])
            return x

        def emitted(x):
            with lock:
                count["out"] += 1
            return x

        got = outcome(Source.from_iterable(range(300)).map(pulled)
                      .map_pool(_model(5), size=size, max_in_flight_per_actor=mif, batch_size=batch)
                      .map(emitted).to_mat(Sink.seq(), Keep.right), **s)
        assert got == ("ok", [x * 10 for x in range(300)]), s
        assert 1 <= count["max"] <= bound, (s, count, bound)
    assert chunked_logics


def test_resume_drops_only_the_failing_element_inside_a_chunk(chunked_logics):
    bad = {0, 17, 18, 100, 199}
    want = check_chunked(lambda f: f.map_pool(_model(3, bad=bad), size=2), DATA, decider=resuming)
    assert want == ("ok", [x * 10 for x in DATA if x not in bad])
    assert chunked_logics


def test_resume_with_batches_drops_the_failed_batch_only(chunked_logics):
    """A batch is one call of ``fn``: its failure drops its elements (as in the element form), never the
    rest of the chunk it came in."""
    want = check_chunked(lambda f: f.map_pool(_model(3, bad={10}), size=1, batch_size=4), range(20),
                         decider=resuming)
    assert want == ("ok", [x * 10 for x in range(20) if not 8 <= x < 12])


def test_stop_fails_the_stream_with_the_elements_error(chunked_logics):
    for s in CHUNK_SETTINGS:
        got = outcome(Source.from_iterable(DATA).map_pool(_model(4, bad={50}), size=2)
                      .to_mat(Sink.seq(), Keep.right), **s)
        assert got[0] == "err" and same(got, ("err", Boom(50))), s
    assert chunked_logics


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("batch_size,bad,none", [(None, {7, 8}, set()), (3, set(), {7, 30})])
def test_random_downstream_demand(seed, batch_size, bad, none):
    """A probe behind chunk-form maps asks for 1..4 at a time: same events as element by element."""

    def graph():
        from atoll.testkit import TestSink

        return (Source.from_iterable(range(40)).map(lambda x: x)
                .map_pool(_model(seed, bad=bad, none=none), size=2, batch_size=batch_size)
                .with_attributes(Attributes.supervision_strategy(Supervision.resuming_decider))
                .map(lambda x: x).to_mat(TestSink.probe(), Keep.right))

    want = drive(graph, seed, fusion=False)
    assert [e[1] for e in want if e[0] == "next"] == [x * 10 for x in range(40) if x not in bad | none]
    for s in CHUNK_SETTINGS:
        assert drive(graph, seed, **s) == want, s


@pytest.mark.parametrize("ordered", [True, False])
def test_signals_stay_between_the_elements_they_came_between(chunked_logics, ordered):
    items = [W(0), 1, 2, W(5), 3, 4, 5, W(7), 6, 7, 8, 9, 10, W(11), W(12), 11, W(13)]
    # unordered on one worker with one call in flight completes in arrival order: deterministic
    log = check_signals(lambda f: f.map_pool(_model(6), size=1 if not ordered else 3,
                                             max_in_flight_per_actor=1 if not ordered else 2, ordered=ordered),
                        items)
    assert [x for x in log if not isinstance(x, W)] == [x * 10 for x in items if not isinstance(x, W)]
    assert chunked_logics


def _windows(events, settings, bad=()):
    m = Materializer.local(**settings)
    try:
        g = (Source.from_iterator(lambda: iter(events))
             .with_timestamps(lambda e: e[2], max_out_of_orderness=5)
             .map_pool(lambda: (lambda e: None if e[1] in bad else (e[0], e[1])), size=2, batch_size=None)
             .tumbling_window(10, key=lambda e: e[0], aggregate=Aggregate.sum(lambda e: e[1]))
             .to_mat(Sink.seq(), Keep.right))
        return g.run(m).result(10)
    finally:
        m.shutdown()


def test_event_timestamps_travel_with_the_elements(chunked_logics):
    """The model drops the timestamp from the element; the windows after it still see each element's own
    timestamp (and a dropped element drops its own)."""
    rng = random.Random(7)
    events, ts = [], 0
    for i in range(150):
        ts += rng.randint(0, 3)
        events.append((rng.choice("ab"), i, ts - rng.randint(0, 4)))
    for bad in ((), (3, 50, 51)):
        want = _windows(events, dict(fusion=False), bad)
        assert want
        for s in CHUNK_SETTINGS:
            assert _windows(events, s, bad) == want, (s, bad)
    assert chunked_logics
