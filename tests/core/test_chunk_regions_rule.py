"""Which chunk regions stay chunked (``atoll._impl.islands.chunking``), and that the choice changes no output.

A region of chunk-capable logics runs its chunk form only if a chunk in it can hold more than one
element: a stage that asks for several elements at once (a sink, a stage that pulls ahead of demand)
sits downstream of one that can hand several on (a source, a stage that pulls ahead or expands).
Between element stages (user stages without a chunk form) the adapters at a region's borders ask for
and pass on one element at a time, so such a region runs element by element instead.

The rule tests build one island from the stages' logics and run the negotiation on it; the parity
tests run random chains that mix element stages with built-in ones, chunked and unfused (the
reference), under a probe's random demand and into a seq sink: the same events and the same user
calls per stage.
"""
from __future__ import annotations

import random

import pytest

from atoll import Flow, FlowShape, GraphStage, GraphStageLogic, InHandler, Inlet, Materializer, OutHandler, Outlet, Sink, Source
from atoll._impl.islands.chunking import ChunksToElements, ElementsToChunks, negotiate_chunks
from atoll._impl.islands.island_builder import IslandBuilder
from atoll._impl.ops.aggregate import Fold, Grouped
from atoll._impl.ops.buffer import Buffer, OverflowStrategy
from atoll._impl.ops.sinks import FoldSink
from atoll._impl.ops.sources import RangeSource
from atoll._impl.ops.transform import Map, MapConcat
from atoll.testkit import TestSink

from interpreter_kit import create_logic


class _Custom(GraphStage):
    """A map-like user stage without a chunk form, logging its calls."""

    def __init__(self, fn=lambda x: x, log=None):
        self.in_ = Inlet("custom.in")
        self.out = Outlet("custom.out")
        self.shape = FlowShape(self.in_, self.out)
        self.fn = fn
        self.log = log

    def create_logic(self, attributes):
        stage = self

        class Logic(GraphStageLogic, InHandler, OutHandler):
            def __init__(self):
                super().__init__(stage.shape)
                self.set_handlers(stage.in_, stage.out, self)

            def on_push(self):
                x = self.grab(stage.in_)
                if stage.log is not None:
                    stage.log.append(x)
                self.push(stage.out, stage.fn(x))

            def on_pull(self):
                self.pull(stage.in_)

        return Logic()


def _negotiate(*stages):
    """One island of ``stages`` in a line, negotiated; returns (per stage: whether a chunk connection touches
    it, how many adapters were added)."""
    b = IslandBuilder("rule")
    logics = [create_logic(s)[0] for s in stages]
    for lg in logics:
        b.add_logic(lg)
    for slot, (a, c) in enumerate(zip(logics, logics[1:])):
        b.assign_port(a._out_ports[0], slot, a)
        b.assign_port(c._in_ports[0], slot, c)
    negotiate_chunks(b, 64)
    conns = b.slot_conns + b.extra_conns
    chunked = [any(c.chunked for c in conns if c.out_owner is lg or c.in_owner is lg) for lg in logics]
    adapters = [lg for lg in b.logics if isinstance(lg, (ChunksToElements, ElementsToChunks))]
    return chunked, len(adapters)


def _src(n=10):
    return RangeSource(0, n)


def _fold():
    return FoldSink(0, lambda a, b: a + b)


def _map():
    return Map(lambda x: x + 1)


def _buffer():
    return Buffer(16, OverflowStrategy.backpressure)


def _map_concat():
    return MapConcat(lambda x: [x, x])


# ------------------------------------------------------------------ the rule
def test_a_region_between_element_stages_runs_element_by_element():
    # range -> map -> custom -> map -> fold: two regions, each with one end at an element stage
    chunked, adapters = _negotiate(_src(), _map(), _Custom(), _map(), _fold())
    assert chunked == [False] * 5 and adapters == 0


def test_a_region_from_a_source_to_a_sink_stays_chunked():
    chunked, adapters = _negotiate(_src(), _map(), _map(), _fold())
    assert chunked == [True] * 4 and adapters == 0


@pytest.mark.parametrize("pulls_ahead", ["buffer", "grouped", "fold"])
def test_a_source_feeding_a_stage_that_pulls_ahead_stays_chunked(pulls_ahead):
    op = {"buffer": _buffer, "grouped": lambda: Grouped(4), "fold": lambda: Fold(0, lambda a, b: a + b)}[pulls_ahead]
    chunked, adapters = _negotiate(_src(), _map(), op(), _Custom(), _Custom())
    assert chunked == [True, True, True, False, False] and adapters == 1


def test_a_stage_that_pulls_ahead_feeding_a_sink_stays_chunked():
    chunked, adapters = _negotiate(_src(), _Custom(), _map(), _buffer(), _map(), _fold())
    assert chunked == [False, False, True, True, True, True] and adapters == 1


def test_a_stage_that_pulls_ahead_alone_between_element_stages_runs_element_by_element():
    chunked, adapters = _negotiate(_src(), _Custom(), _map(), _buffer(), _map(),
                                   _Custom(), _fold())
    assert chunked == [False] * 7 and adapters == 0


def test_an_expanding_stage_feeding_a_sink_stays_chunked():
    chunked, adapters = _negotiate(_src(), _Custom(), _map_concat(), _map(), _fold())
    assert chunked == [False, False, True, True, True] and adapters == 1


def test_an_expanding_stage_before_an_element_stage_runs_element_by_element():
    chunked, adapters = _negotiate(_src(), _Custom(), _map_concat(), _map(), _Custom(),
                                   _fold())
    assert chunked == [False] * 6 and adapters == 0


def test_a_sink_upstream_of_nothing_that_supplies_runs_element_by_element():
    # custom -> map -> fold: the fold asks for many, but the map gets them one at a time
    chunked, adapters = _negotiate(_src(), _Custom(), _map(), _fold())
    assert chunked == [False] * 4 and adapters == 0


# ------------------------------------------------------------------ outputs unchanged
def _random_chain(rng: random.Random, logs: list):
    """A random chain of custom element stages and built-in ones (some pulling ahead or expanding)."""
    flows = []
    for i in range(rng.randint(2, 7)):
        kind = rng.choice(["custom", "custom", "map", "filter", "map_concat", "buffer", "grouped", "drop"])
        log: list = []
        logs.append(log)
        k = rng.randint(2, 5)
        if kind == "custom":
            flows.append(Flow.from_graph(_Custom(lambda x, k=k: x * k % 61, log)))
        elif kind == "map":
            flows.append(Flow().map(lambda x, k=k, log=log: (log.append(x), x * k % 61)[1]))
        elif kind == "filter":
            flows.append(Flow().filter(lambda x, k=k, log=log: (log.append(x), x % k != 0)[1]))
        elif kind == "map_concat":
            flows.append(Flow().map_concat(lambda x, k=k, log=log: (log.append(x), [(x + j) % 61 for j in range(x % k)])[1]))
        elif kind == "buffer":
            flows.append(Flow().buffer(rng.randint(1, 8), OverflowStrategy.backpressure))
        elif kind == "grouped":
            flows.append(Flow().grouped(k).map(lambda g, log=log: (log.append(list(g)), sum(g) % 61)[1]))
        else:
            flows.append(Flow().drop(k))
    return flows


def _apply(src, flows):
    for f in flows:
        src = src.via(f)
    return src


@pytest.mark.parametrize("seed", range(40))
def test_random_chains_with_element_stages_into_seq_equal_unfused(seed):
    rng = random.Random(seed)
    n = rng.choice([0, 1, rng.randint(2, 30), rng.randint(30, 200)])
    results = {}
    for fusion in (True, False):
        logs: list = []
        flows = _random_chain(random.Random(seed), logs)
        mat = Materializer.local(fusion=fusion, chunk_size=rng.randint(1, 40) if fusion else 1024)
        try:
            got = _apply(Source.range(0, n), flows).run_with(Sink.seq(), mat).result(10)
        finally:
            mat.shutdown()
        results[fusion] = (got, logs)
    assert results[True] == results[False]


@pytest.mark.parametrize("seed", range(40))
def test_random_chains_with_element_stages_under_demand_equal_unfused(seed):
    rng = random.Random(1000 + seed)
    n = rng.choice([0, 1, rng.randint(2, 30), rng.randint(30, 200)])
    results = {}
    for fusion in (True, False):
        logs: list = []
        flows = _random_chain(random.Random(1000 + seed), logs)
        mat = Materializer.local(fusion=fusion)
        try:
            probe = _apply(Source.range(0, n), flows).run_with(TestSink.probe(), mat)
            demand = random.Random(seed)
            events = []
            for _ in range(demand.randint(1, 8)):
                k = demand.randint(1, 5)
                probe.request(k)
                for _ in range(k):
                    ev = probe.expect_event()
                    events.append(ev)
                    if ev[0] != "next":
                        break
                if events and events[-1][0] != "next":
                    break
            snapshot = [list(log) for log in logs]
            if not events or events[-1][0] == "next":
                probe.cancel()
        finally:
            mat.shutdown()
        results[fusion] = (events, snapshot)
    assert results[True] == results[False]
