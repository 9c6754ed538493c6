"""Shared checks of the chunk-form operator tests: every run compared with ``Materializer.local(fusion=False)``
(element connections only), between a chunked source and sink (several chunk sizes) and between probes with
random demand. Outcomes are ``("ok", value)`` or ``("err", exception)``; ``same`` compares them."""
from __future__ import annotations

import random

from atoll import Attributes, Flow, Keep, Materializer, Sink, Source
from atoll.stage.signals import Signal
from atoll.stage.supervision import Supervision
from atoll.testkit import TestSink
from atoll.testkit.signals import Recording, Scripted, coalesce_watermarks

CHUNK_SETTINGS = [dict(chunk_size=1), dict(chunk_size=3), dict(chunk_size=1024)]


class Boom(Exception):
    def __eq__(self, other):
        return type(other) is type(self) and other.args == self.args

    def __hash__(self):
        return hash(self.args)


def resuming(exc):
    return Supervision.RESUME


def restarting(exc):
    return Supervision.RESTART


def outcome(graph, **settings):
    """("ok", value) or ("err", exception) of running ``graph`` (materializing a future)."""
    m = Materializer.local(**settings)
    try:
        fut = graph.run(m)
        try:
            return ("ok", fut.result(10))
        except Exception as e:  # noqa: BLE001
            return ("err", e)
    finally:
        m.shutdown()


def same(a, b) -> bool:
    """Two outcomes are equal; failures by exception type and arguments."""
    if a[0] == "err" and b[0] == "err":
        return type(a[1]) is type(b[1]) and a[1].args == b[1].args
    return a == b


def check_chunked(op, data, decider=None, pre=None, post=None, sink=Sink.seq):
    """``op`` between a chunked source and ``sink`` (after ``post``): same outcome as the element-only run."""

    def graph():
        src = Source.from_iterable(list(data))
        if pre is not None:
            src = src.via(pre())
        flow = op(Flow())
        if decider is not None:
            flow = flow.with_attributes(Attributes.supervision_strategy(decider))
        g = src.via(flow)
        if post is not None:
            g = g.via(post())
        return g.to_mat(sink(), Keep.right)

    want = outcome(graph(), fusion=False)
    for s in CHUNK_SETTINGS:
        got = outcome(graph(), **s)
        assert same(got, want), (s, got, want)
    return want


def drive(graph_fn, seed, **settings):
    """Run ``graph_fn()`` (ending in a probe) with random demand; the events in order."""
    rng = random.Random(seed)
    m = Materializer.local(**settings)
    try:
        probe = graph_fn().run(m)
        events = []
        outstanding = 0
        while True:
            if outstanding == 0:
                k = rng.randint(1, 4)
                probe.request(k)
                outstanding += k
            ev = probe.expect_event()
            if ev[0] == "next":
                events.append(ev)
                outstanding -= 1
            elif ev[0] == "complete":
                events.append(ev)
                return events
            else:
                events.append(("error", type(ev[1]), ev[1].args))
                return events
    finally:
        m.shutdown()


def check_probes(op, data, decider=None, seeds=range(4)):
    """``op`` between chunk-capable neighbours, driven by a probe with random demand."""

    def graph():
        flow = op(Flow())
        if decider is not None:
            flow = flow.with_attributes(Attributes.supervision_strategy(decider))
        return (Source.from_iterable(list(data)).map(lambda x: x).via(flow).map(lambda x: x)
                .to_mat(TestSink.probe(), Keep.right))

    for seed in seeds:
        want = drive(graph, seed, fusion=False)
        for s in CHUNK_SETTINGS:
            assert drive(graph, seed, **s) == want, s


def check(op, data, decider=None):
    check_probes(op, data, decider)
    return check_chunked(op, data, decider)


def check_signals(op, items):
    """Elements and signals through ``op`` into a recording sink: every chunk run logs exactly what the element
    run logs (so no signal comes before an output made of elements that arrived before it); returns that log."""

    def graph(sink_chunk):
        return Source.from_graph(Scripted(items)).via(op(Flow())).to_mat(Recording(sink_chunk), Keep.right)

    want = outcome(graph(1), fusion=False)
    assert want[0] == "ok", want
    want = (want[0], coalesce_watermarks(want[1]))
    for s in CHUNK_SETTINGS:
        for sink_chunk in (1, 2, 100):
            got = outcome(graph(sink_chunk), **s)
            got = (got[0], coalesce_watermarks(got[1]) if got[0] == "ok" else got[1])
            assert got == want, (s, sink_chunk, got, want)
    return want[1]


def signals_of(log):
    return [x for x in log if isinstance(x, Signal)]
