"""The chunk path of event time equals the element path: random out-of-order streams with late elements,
through with_timestamps and every window kind, give the same windows, late records and counters with
fusion off (one element per event) and with chunks of any size - lateness must not depend on how the
stream was cut into chunks."""
from __future__ import annotations

import random

import pytest

from atoll import Aggregate, Flow, Keep, Materializer, Sink, Source
from atoll.stage.signals import Signal
from atoll.testkit.signals import Recording


def _events(rng: random.Random, n: int):
    """(key, value, ts): mostly ascending with disorder, some elements far behind (late)."""
    out, ts = [], 0
    for i in range(n):
        ts += rng.randint(0, 4)
        t = ts - rng.randint(0, 6)
        if rng.random() < 0.08:
            t = ts - rng.randint(10, 40)  # late for most bounds below
        out.append((rng.choice("abc"), rng.randint(1, 9), t))
    return out


def _window(rng: random.Random):
    kind = rng.choice(["tumbling", "sliding", "session"])
    lateness = rng.choice([0, 0, 5, 12])
    agg = Aggregate.sum(lambda e: e[1])
    key = (lambda e: e[0]) if rng.random() < 0.8 else None
    size = rng.choice([5, 10, 16])
    slide = rng.choice([s for s in (1, 2, 5, 8) if s <= size])
    gap = rng.choice([3, 7])
    if kind == "tumbling":
        return lambda f, late: f.tumbling_window(size, key=key, aggregate=agg, allowed_lateness=lateness,
                                                 late_to=late, combine=Keep.both), kind
    if kind == "sliding":
        return lambda f, late: f.sliding_window(size, slide, key=key, aggregate=agg,
                                                allowed_lateness=lateness, late_to=late, combine=Keep.both), kind
    return lambda f, late: f.session_window(gap, key=key, aggregate=agg, allowed_lateness=lateness,
                                            late_to=late, combine=Keep.both), kind




def _run(events, bound, op, settings):
    late = Sink.seq()
    m = Materializer.local(**settings)
    try:
        graph = (Source.from_iterator(lambda: iter(events))
                 .with_timestamps(lambda e: e[2], max_out_of_orderness=bound)
                 .via_mat(op(Flow(), late), Keep.right)
                 .to_mat(Sink.seq(), Keep.both))
        (stats, late_f), out_f = graph.run(m)
        return out_f.result(10), late_f.result(10), stats.snapshot()
    finally:
        m.shutdown()


@pytest.mark.parametrize("seed", range(30))
def test_windows_chunked_equal_element_wise(seed):
    rng = random.Random(91_000 + seed)
    events = _events(rng, rng.randint(0, 120))
    bound = rng.choice([0, 3, 8])
    op, kind = _window(rng)
    want = _run(events, bound, op, dict(fusion=False))
    for chunk in (1, 2, 7, 1024):
        got = _run(events, bound, op, dict(chunk_size=chunk))
        assert got == want, (kind, bound, chunk)


def _timestamps_log(items, bound, settings):
    m = Materializer.local(**settings)
    try:
        g = (Source.from_iterator(lambda: iter(items)).with_timestamps(lambda x: x, max_out_of_orderness=bound)
             .to_mat(Recording(), Keep.right))
        return g.run(m).result(10)
    finally:
        m.shutdown()


@pytest.mark.parametrize("seed", range(20))
def test_with_timestamps_chunked_delays_watermarks_only_where_no_element_lies_behind(seed):
    """The chunk form emits the element form's watermarks, some later (coalesced); but an element behind
    the element-wise watermark meets exactly that watermark before it."""
    rng = random.Random(55_000 + seed)
    items, t = [], 0
    for _ in range(rng.randint(1, 80)):
        t += rng.randint(0, 3)
        items.append(max(0, t - rng.randint(0, 12)))
    bound = rng.choice([0, 2, 5])
    want = _timestamps_log(items, bound, dict(fusion=False))
    for chunk in (1, 3, 1024):
        got = _timestamps_log(items, bound, dict(chunk_size=chunk))
        assert [x for x in got if not isinstance(x, Signal)] == items
        marks = [x.timestamp for x in got if isinstance(x, Signal)]
        assert marks == sorted(set(marks)) and set(marks) <= {x.timestamp for x in want if isinstance(x, Signal)}
        if marks or any(isinstance(x, Signal) for x in want):
            assert marks[-1] == max(x.timestamp for x in want if isinstance(x, Signal))
        # the watermark each element meets is the element-wise one wherever the element lies behind it
        def seen(log):
            w, out = None, []
            for x in log:
                if isinstance(x, Signal):
                    w = x.timestamp
                else:
                    out.append(w)
            return out
        for x, w_chunk, w_elem in zip(items, seen(got), seen(want)):
            if w_elem is not None and x < w_elem:
                assert w_chunk == w_elem, (x, w_chunk, w_elem)


def _run_through_stateless(events, bound, settings):
    from atoll import Attributes, Supervision

    def shift(e):
        if e[1] == 7:
            raise ValueError("seven")
        return (e[0], e[1] * 10, e[2])

    m = Materializer.local(**settings)
    try:
        mid = (Flow().map(shift).filter(lambda e: e[1] != 30).filter_not(lambda e: e[1] == 50)
               .with_attributes(Attributes.supervision_strategy(Supervision.resuming_decider)))
        graph = (Source.from_iterator(lambda: iter(events))
                 .with_timestamps(lambda e: e[2], max_out_of_orderness=bound)
                 .via(mid)
                 .tumbling_window(10, key=lambda e: e[0], aggregate=Aggregate.collect())
                 .to_mat(Sink.seq(), Keep.both))
        stats, out = graph.run(m)
        return out.result(10), stats.snapshot()
    finally:
        m.shutdown()


@pytest.mark.parametrize("seed", range(10))
def test_map_and_filter_keep_each_elements_timestamp_on_chunks(seed):
    rng = random.Random(33_000 + seed)
    events = _events(rng, rng.randint(1, 150))
    bound = rng.choice([0, 4])
    want = _run_through_stateless(events, bound, dict(fusion=False))
    assert sum(len(w.value) for w in want[0]) > 0
    for chunk in (1, 5, 1024):
        assert _run_through_stateless(events, bound, dict(chunk_size=chunk)) == want, chunk


@pytest.mark.parametrize("settings", [dict(fusion=False), dict(chunk_size=4)])
def test_the_timestamp_function_runs_once_per_element_whatever_it_returns(settings):
    import numpy as np

    calls = []

    def ts(x):
        calls.append(x)
        if x == 3:
            raise ValueError("no time")
        return np.int64(x * 10) if x % 2 else float(x * 10)

    m = Materializer.local(**settings)
    try:
        fut = Source.from_iterator(lambda: iter(range(6))).with_timestamps(ts).run_with(Sink.seq(), m)
        with pytest.raises(Exception) as info:
            fut.result(10)
    finally:
        m.shutdown()
    assert type(info.value).__name__ == "MissingTimestampError" and "element #3" in str(info.value)
    assert isinstance(info.value.__cause__, ValueError)
    assert calls == [0, 1, 2, 3]
