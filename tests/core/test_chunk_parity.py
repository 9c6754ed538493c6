"""Chunk connections must behave exactly like the element-by-element reference (``fusion=False``).

Per-element semantics are compared on random graphs: the same elements in the same order, the same
completion/failure, nothing made beyond demand, supervision decided per element. Each stage logs its
own user-function calls: under a probe's demand the logs are identical per stage; under unbounded
demand (a fold/seq sink) they are identical when the run succeeds, and when it fails the unfused log
of each stage is a prefix of the chunked one (an upstream stage may have processed up to one chunk
beyond the element where a downstream stage failed). Interleaving *across* stages is not compared:
a chunk goes through stage 1 entirely before stage 2 sees it.
"""
from __future__ import annotations

import random
import time

import pytest

from atoll import (
    Attributes,
    Broadcast,
    ClosedShape,
    Flow,
    GraphDSL,
    Keep,
    Materializer,
    RunnableGraph,
    Sink,
    Source,
    Supervision,
    Zip,
    ZipWith,
)
from atoll.errors import PortStateError
from atoll.testkit import TestSink, TestSource


class Boom(Exception):
    pass


_DECIDERS = {
    "stop": None,
    "resume": Supervision.resuming_decider,
    "restart": Supervision.restarting_decider,
}


def _supervised(graph, decider):
    if decider is None:
        return graph
    if not hasattr(graph, "with_attributes"):  # a bare GraphStage (a junction): wrap it in a graph
        stage = graph
        graph = GraphDSL.create(lambda b: b.add(stage))
    return graph.with_attributes(Attributes.supervision_strategy(decider))


def _random_decider(rng: random.Random, p: float = 0.4):
    return _DECIDERS[rng.choice(["resume", "restart"])] if rng.random() < p else None


def _bad_values(rng: random.Random, p: float = 0.3) -> frozenset:
    """The values a stage fails on (small ints, which random data and maps produce)."""
    if rng.random() < p:
        return frozenset(rng.randint(0, 60) for _ in range(rng.randint(1, 2)))
    return frozenset()


# ---------------------------------------------------------------------------------------------- random linear chains
class StageChain:
    """Flows applied in order (``flows``), each stage logging its user-function calls to ``logs[i]``."""

    def clear(self):
        for log in self.logs:
            log.clear()

    def snapshot(self):
        return [list(log) for log in self.logs]

    def apply(self, src):
        for flow in self.flows:
            src = src.via(flow)
        return src


class Chain(StageChain):
    """A random chain of map/filter/filter_not/map_concat/identity stages; stage ``i`` logs its
    user-function calls to ``logs[i]``. Failure values, ``None`` results and supervision are random."""

    def __init__(self, rng: random.Random, generators: bool = False, supervision: bool = True,
                 failures: bool = True):
        self.logs: list = []
        self.flows: list = []
        for i in range(rng.randint(1, 6)):
            kind = rng.choice(["map", "filter", "filter_not", "map_concat", "map", "identity"])
            k = rng.randint(2, 5)
            bad = _bad_values(rng) if failures else frozenset()
            none_on = rng.randint(0, 60) if failures and kind == "map" and rng.random() < 0.15 else -1
            log: list = []
            self.logs.append(log)
            if kind == "identity":
                self.flows.append(Flow())
                continue
            if kind == "map":
                def fn(x, i=i, k=k, bad=bad, log=log, none_on=none_on):
                    log.append(x)
                    if x in bad:
                        raise Boom("map", i, x)
                    if x == none_on:
                        return None
                    return x * k % 61
            elif kind in ("filter", "filter_not"):
                def fn(x, i=i, k=k, bad=bad, log=log):
                    log.append(x)
                    if x in bad:
                        raise Boom("filter", i, x)
                    return x % k == 0
            elif generators and rng.random() < 0.5:
                def fn(x, i=i, k=k, bad=bad, log=log):
                    log.append(x)

                    def gen():
                        for j in range(x % k):
                            log.append(("next", x, j))
                            if x in bad and j == 1:
                                raise Boom("iterating", i, x)
                            yield x + j

                    return gen()
            else:
                def fn(x, i=i, k=k, bad=bad, log=log):
                    log.append(x)
                    if x in bad:
                        raise Boom("map_concat", i, x)
                    return [(x + j) % 61 for j in range(x % k)]
            flow = getattr(Flow(), kind)(fn)
            self.flows.append(_supervised(flow, _random_decider(rng) if supervision else None))


def _random_source(rng: random.Random, source_log: list):
    """(factory of a fresh Source, description): a list, an iterator factory (logging its reads) or a range."""
    kind = rng.choice(["list", "iterator", "range"])
    n = rng.choice([0, 1, rng.randint(2, 20), rng.randint(20, 300)])
    if kind == "range":
        start = rng.randint(0, 10)
        return (lambda: Source.range(start, start + n)), kind
    data = [rng.randint(0, 60) for _ in range(n)]
    if kind == "list":
        return (lambda: Source.from_iterable(data)), kind

    def it():
        for j, x in enumerate(data):
            source_log.append(j)
            yield x

    return (lambda: Source.from_iterator(it)), kind


def _outcome(fut):
    try:
        return ("ok", fut.result(10))
    except Exception as e:  # noqa: BLE001
        assert not isinstance(e, TimeoutError), "the stream did not end"
        return ("err", type(e), str(e))


def _random_sink(rng: random.Random, sink_log: list):
    kind = rng.choice(["seq", "fold", "fold"])
    if kind == "seq":
        return Sink.seq, kind
    bad = _bad_values(rng, 0.25)
    decider = _random_decider(rng, 0.5)

    def fold(acc, x):
        sink_log.append(x)
        if x in bad:
            raise Boom("fold", x)
        return (acc * 31 + x) % 1_000_003

    return (lambda: _supervised(Sink.fold(7, fold), decider)), kind


def _check_logs(chunked_logs, plain_logs, chunked_out, plain_out):
    assert len(chunked_logs) == len(plain_logs)
    for i, (c, p) in enumerate(zip(chunked_logs, plain_logs)):
        if plain_out[0] == "ok":
            assert c == p, f"stage {i}: the chunked calls differ from the unfused ones"
        else:
            assert c[: len(p)] == p, f"stage {i}: the unfused calls must be a prefix of the chunked ones"


@pytest.mark.parametrize("seed", range(150))
def test_random_chains_into_seq_and_fold_chunked_equal_unfused(seed):
    rng = random.Random(seed)
    source_log, sink_log = [], []
    make_source, _ = _random_source(rng, source_log)
    chain = Chain(rng, generators=rng.random() < 0.3)
    make_sink, _ = _random_sink(rng, sink_log)
    chunk_size = rng.randint(1, 50)
    results = {}
    for fusion in (True, False):
        chain.clear()
        source_log.clear()
        sink_log.clear()
        mat = Materializer.local(fusion=fusion, chunk_size=chunk_size)
        try:
            out = _outcome(chain.apply(make_source()).run_with(make_sink(), mat))
        finally:
            mat.shutdown()
        results[fusion] = (out, [list(source_log)] + chain.snapshot() + [list(sink_log)])
    (c_out, c_logs), (p_out, p_logs) = results[True], results[False]
    assert c_out == p_out
    _check_logs(c_logs, p_logs, c_out, p_out)


def _probe_events(probe, rng: random.Random):
    """Ask a random number of elements in random steps (cancelling sometimes); the events seen."""
    events = []
    wanted = rng.randint(0, 40)
    while wanted > 0 and (not events or events[-1][0] == "next"):
        n = min(wanted, rng.randint(1, 6))
        wanted -= n
        probe.request(n)
        for _ in range(n):
            ev = probe.expect_event()
            events.append(_event(ev))
            if ev[0] != "next":
                break
    if not events or events[-1][0] == "next":  # completion or failure may come without demand
        try:
            probe.expect_no_message(0.01)  # but no element is made without demand
        except AssertionError:
            ev = probe.expect_event()
            assert ev[0] != "next", f"an element beyond demand: {ev!r}"
            events.append(_event(ev))
    return events


def _event(ev):
    return (ev[0], type(ev[1]), str(ev[1])) if ev[0] == "error" else ev


@pytest.mark.parametrize("seed", range(120))
def test_random_chains_under_demand_chunked_equal_unfused(seed):
    # under a probe's demand every stage calls its user function exactly as unfused: the same calls
    # (the source iterator's reads included), no more, and the same events at the probe
    rng = random.Random(seed)
    source_log = []
    make_source, _ = _random_source(rng, source_log)
    chain = Chain(rng, generators=True)
    chunk_size = rng.randint(1, 50)
    cancel = rng.random() < 0.3
    results = {}
    for fusion in (True, False):
        chain.clear()
        source_log.clear()
        mat = Materializer.local(fusion=fusion, chunk_size=chunk_size)
        try:
            probe = chain.apply(make_source()).run_with(TestSink.probe(), mat)
            events = _probe_events(probe, random.Random(seed * 7919))
            logs = [list(source_log)] + chain.snapshot()
            if not events or events[-1][0] == "next":
                probe.cancel()
                if cancel:  # after a cancellation nothing more is called
                    probe.expect_no_message(0.01)
                    assert [list(source_log)] + chain.snapshot() == logs
        finally:
            mat.shutdown()
        results[fusion] = (events, logs)
    assert results[True][0] == results[False][0]
    _check_demand_logs(results[True], results[False])


def _check_demand_logs(chunked, plain):
    """Under a probe's demand the per-stage calls are identical; when a stage failed (Stop), an
    upstream stage may have gone on to the end of the chunk it was working on, within the demand
    outstanding then (see ``test_upstream_calls_stop_at_a_downstream_failure_under_bounded_demand``):
    the unfused calls are then a prefix of the chunked ones."""
    events = plain[0]
    failed = bool(events) and events[-1][0] == "error"
    for i, (c, p) in enumerate(zip(chunked[1], plain[1])):
        if failed:
            assert c[: len(p)] == p, f"stage {i} (0 = source): the unfused calls must be a prefix"
        else:
            assert c == p, f"stage {i} (0 = source): calls differ"


@pytest.mark.parametrize("seed", range(80))
def test_random_failures_and_supervision_on_map_filter_fold(seed):
    # denser failures than above, every stage supervised at random: results and per-stage calls equal
    rng = random.Random(1000 + seed)
    data = [rng.randint(0, 30) for _ in range(rng.randint(1, 200))]
    specs = []
    for i in range(rng.randint(1, 4)):
        kind = rng.choice(["map", "filter", "filter_not"])
        bad = frozenset(rng.sample(range(31), rng.randint(1, 4)))
        specs.append((kind, bad, rng.choice(list(_DECIDERS)), rng.randint(2, 4)))
    fold_bad = frozenset(rng.sample(range(31), rng.randint(0, 3)))
    fold_decider = rng.choice(list(_DECIDERS))
    chunk_size = rng.randint(1, 20)

    def run(fusion):
        logs = [[] for _ in range(len(specs) + 1)]
        src = Source.from_iterable(data)
        for i, (kind, bad, decider, k) in enumerate(specs):
            def fn(x, bad=bad, log=logs[i], kind=kind, k=k):
                log.append(x)
                if x in bad:
                    raise Boom(kind, x)
                return (x * k + 1) % 31 if kind == "map" else x % k != 0

            src = src.via(_supervised(getattr(Flow(), kind)(fn), _DECIDERS[decider]))

        def fold(acc, x):
            logs[-1].append(x)
            if x in fold_bad:
                raise Boom("fold", x)
            return acc + [x]

        sink = _supervised(Sink.fold([], fold), _DECIDERS[fold_decider])
        mat = Materializer.local(fusion=fusion, chunk_size=chunk_size)
        try:
            return _outcome(src.run_with(sink, mat)), logs
        finally:
            mat.shutdown()

    (c_out, c_logs), (p_out, p_logs) = run(True), run(False)
    assert c_out == p_out
    _check_logs(c_logs, p_logs, c_out, p_out)


@pytest.mark.parametrize("decider,expected", [
    ("stop", ("err", Boom, "('map', 3)")),
    ("resume", ("ok", [1, 2, 4, 5, 1, 2, 4, 5])),
    ("restart", ("ok", [1, 2, 4, 5, 1, 2, 4, 5])),
])
@pytest.mark.parametrize("chunk_size", [1, 3, 1024])
def test_map_supervision_in_a_chunk(decider, expected, chunk_size):
    def f(x):
        if x == 3:
            raise Boom("map", 3)
        return x

    flow = _supervised(Flow().map(f), _DECIDERS[decider])
    mat = Materializer.local(chunk_size=chunk_size)
    try:
        out = _outcome(Source.from_iterable([1, 2, 3, 4, 5] * 2).via(flow).run_with(Sink.seq(), mat))
    finally:
        mat.shutdown()
    assert out == expected


# ---------------------------------------------------------------------------------------------- junctions
def _junction_graph(rng: random.Random, logs: list, islands: bool = False):
    """Source -> Broadcast(n) -> 1-2 maps per branch (random failures) -> Zip or ZipWith(n) (random
    failures and supervision);
    returns (build(sink) -> RunnableGraph, description). ``logs`` receives one list per map."""
    n = rng.randint(2, 3)
    use_zip = n == 2 and rng.random() < 0.4
    data = [rng.randint(0, 60) for _ in range(rng.choice([0, 1, rng.randint(2, 30), rng.randint(30, 300)]))]
    branches = []
    # failures in any branch: the failure at the earliest element wins, chunked as unfused (DESIGN.md
    # section 9, bug 2; tests/core/test_chunk_parity_junctions.py)
    for b in range(n):
        flow = Flow()
        for m in range(rng.randint(1, 2)):
            bad = _bad_values(rng, 0.4)
            k = rng.randint(1, 5)
            log: list = []
            logs.append(log)

            def fn(x, b=b, m=m, k=k, bad=bad, log=log):
                log.append(x)
                if x in bad:
                    raise Boom("branch", b, m, x)
                return (x * k + b) % 61

            # Stop only: a branch dropping an element (Resume) would misalign Broadcast and Zip, a
            # deadlock both chunked and unfused
            flow = flow.map(fn)
        if islands:
            flow = flow.island()
        branches.append(flow)
    zip_bad = _bad_values(rng, 0.2) if not use_zip else frozenset()
    zip_decider = _random_decider(rng, 0.5)

    def combine(*xs):
        if xs[0] in zip_bad:
            raise Boom("zip", xs)
        return sum(xs) * 3 + xs[-1]

    def build(sink):
        def graph(b, s):
            bcast = b.add(Broadcast(n))
            if use_zip:
                zip_ = b.add(Zip())
            else:
                zip_ = b.add(_supervised(ZipWith(combine, n), zip_decider))
            Source.from_iterable(data) >> bcast.in_
            for i, flow in enumerate(branches):
                bcast.out(i) >> flow >> zip_.ins[i]
            zip_.out >> s.in_
            return ClosedShape

        return RunnableGraph.from_graph(GraphDSL.create(graph, sink))

    return build


def _fold_sink():
    return Sink.fold(0, lambda acc, x: (acc * 31 + hash(x)) % 1_000_003)


@pytest.mark.parametrize("seed", range(100))
def test_junctions_chunked_equal_unfused(seed):
    rng = random.Random(5000 + seed)
    logs: list = []
    build = _junction_graph(rng, logs)
    sink = rng.choice([Sink.seq, _fold_sink])
    chunk_size = rng.randint(1, 50)
    results = {}
    for fusion in (True, False):
        for log in logs:
            log.clear()
        mat = Materializer.local(fusion=fusion, chunk_size=chunk_size)
        try:
            out = _outcome(build(sink()).run(mat))
        finally:
            mat.shutdown()
        results[fusion] = (out, [list(log) for log in logs])
    (c_out, c_logs), (p_out, p_logs) = results[True], results[False]
    assert c_out == p_out
    _check_logs(c_logs, p_logs, c_out, p_out)


@pytest.mark.parametrize("seed", range(80))
def test_junctions_under_demand_chunked_equal_unfused(seed):
    rng = random.Random(7000 + seed)
    logs: list = []
    build = _junction_graph(rng, logs)
    chunk_size = rng.randint(1, 50)
    results = {}
    for fusion in (True, False):
        for log in logs:
            log.clear()
        mat = Materializer.local(fusion=fusion, chunk_size=chunk_size)
        try:
            probe = build(TestSink.probe()).run(mat)
            events = _probe_events(probe, random.Random(seed))
            calls = [list(log) for log in logs]
            if not events or events[-1][0] == "next":
                probe.cancel()
        finally:
            mat.shutdown()
        results[fusion] = (events, calls)
    assert results[True][0] == results[False][0]
    _check_demand_logs(results[True], results[False])


def _fail_at(n):
    def f(x):
        if x == n:
            raise Boom("failed at", n)
        return x

    return f


# ---------------------------------------------------------------------------------------------- ported from the fused-loop tests
def test_none_from_a_map_fails_with_port_error(mat):
    fut = Source.range(0, 5).map(lambda x: x).map(lambda x: None if x == 3 else x).run_with(Sink.seq(), mat)
    with pytest.raises(PortStateError, match="must not be None"):
        fut.result(3)


def test_none_from_a_map_after_the_elements_before_it(mat):
    probe = Source.range(0, 5).map(lambda x: x).map(lambda x: None if x == 3 else x).run_with(TestSink.probe(), mat)
    probe.request(10)
    probe.expect_next_n([0, 1, 2])
    with pytest.raises(PortStateError, match="must not be None"):
        raise probe.expect_error()


def test_flow_between_probes_keeps_demand_and_order(mat):
    src, sink = (
        TestSource.probe()
        .map(lambda x: x * 2)
        .filter(lambda x: x % 3 != 0)
        .map_concat(lambda x: [x, -x])
        .to_mat(TestSink.probe(), Keep.both)
        .run(mat)
    )
    sink.request(3)
    src.send_next(1)  # -> 2 -> [2, -2]
    sink.expect_next(2, -2)
    src.send_next(3)  # -> 6, filtered out
    src.send_next(4)  # -> 8 -> [8, -8]
    sink.expect_next(8)
    sink.expect_no_message(0.05)
    sink.request(1)
    sink.expect_next(-8)
    src.send_complete()
    sink.expect_complete()


def test_chunked_flow_between_probes_keeps_demand_and_order(mat):
    src, sink = (
        TestSource.probe()
        .map(lambda x: x * 2)
        .filter(lambda x: x % 3 != 0)
        .map(lambda x: x + 1)
        .to_mat(TestSink.probe(), Keep.both)
        .run(mat)
    )
    sink.request(2)
    src.send_next(1)  # -> 2 -> 3
    sink.expect_next(3)
    src.send_next(3)  # -> 6, filtered out
    src.send_next(4)  # -> 8 -> 9
    sink.expect_next(9)
    src.send_next(5)  # no demand: stays in the probe source's hands
    sink.expect_no_message(0.05)
    sink.request(1)
    sink.expect_next(11)
    src.send_complete()
    sink.expect_complete()


def test_failure_emits_earlier_outputs_first(mat):
    def f(x):
        if x == 2:
            raise Boom("two")
        return [x, x]

    src, sink = TestSource.probe().map(lambda x: x).map_concat(f).to_mat(TestSink.probe(), Keep.both).run(mat)
    sink.request(10)
    src.send_next(1)
    sink.expect_next(1, 1)
    src.send_next(2)
    assert isinstance(sink.expect_error(), Boom)
    assert isinstance(src.expect_cancellation(), Boom)


def test_failure_in_a_chunk_emits_the_elements_before_it_first(mat):
    def f(x):
        if x == 5:
            raise Boom("five")
        return x

    fut = Source.range(0, 100).map(lambda x: x).map(f).map(lambda x: x).run_with(Sink.seq(), mat)
    with pytest.raises(Boom):
        fut.result(3)
    probe = Source.range(0, 100).map(lambda x: x).map(f).run_with(TestSink.probe(), mat)
    probe.request(100)
    probe.expect_next_n([0, 1, 2, 3, 4])
    assert isinstance(probe.expect_error(), Boom)


def test_failure_after_outputs_waits_for_the_demand_of_an_island_boundary(mat):
    # the outputs made before the failure go out as the channel's demand allows, then the failure
    def expand(x):
        yield from range(1, 11)
        raise Boom("after ten")

    probe = (
        Source.from_iterable([1])
        .map(lambda x: x)
        .map_concat(expand)
        .island()
        .run_with(TestSink.probe().add_attributes(Attributes.input_buffer(2, 2)), mat)
    )
    probe.request(20)
    probe.expect_next_n(list(range(1, 11)))
    assert isinstance(probe.expect_error(), Boom)


def test_map_failure_in_a_chunk_before_an_island_boundary_comes_after_its_elements(mat):
    def f(x):
        if x == 7:
            raise Boom("seven")
        return x

    probe = (
        Source.range(0, 100)
        .map(f)
        .map(lambda x: x)
        .island()
        .run_with(TestSink.probe().add_attributes(Attributes.input_buffer(4, 4)), mat)
    )
    probe.request(20)
    probe.expect_next_n(list(range(7)))
    assert isinstance(probe.expect_error(), Boom)


def test_after_an_island_boundary_user_functions_are_applied_only_for_demand(mat):
    calls = []
    probe = (
        Source.from_iterable(range(100))
        .island()
        .map(lambda x: calls.append(("a", x)) or x)
        .map(lambda x: calls.append(("b", x)) or x)
        .run_with(TestSink.probe(), mat)
    )
    probe.request(2)
    probe.expect_next(0, 1)
    probe.expect_no_message(0.05)
    # not the whole chunk the channel brought (per-stage order; across stages it may interleave)
    assert [c for c in calls if c[0] == "a"] == [("a", 0), ("a", 1)]
    assert [c for c in calls if c[0] == "b"] == [("b", 0), ("b", 1)]
    probe.cancel()


def test_before_an_island_boundary_only_what_the_channel_asks_for_is_made(mat):
    calls = []
    probe = (
        Source.from_iterable(range(100))
        .map(lambda x: calls.append(("a", x)) or x)
        .map_concat(lambda x: calls.append(("c", x)) or [x, x])
        .map(lambda x: calls.append(("b", x)) or x)
        .island()
        .run_with(TestSink.probe().add_attributes(Attributes.input_buffer(4, 4)), mat)
    )
    probe.request(1)
    probe.expect_next(0)
    probe.expect_no_message(0.05)
    # the channel asked for 4 elements: two inputs' worth, as the unfused stages make
    assert calls == [("a", 0), ("c", 0), ("b", 0), ("b", 0), ("a", 1), ("c", 1), ("b", 1), ("b", 1)]
    probe.cancel()


def test_before_an_island_boundary_a_chunked_run_makes_only_what_the_channel_asks_for(mat):
    calls = []
    probe = (
        Source.from_iterable(range(100))
        .map(lambda x: calls.append(("a", x)) or x)
        .filter(lambda x: calls.append(("f", x)) or x % 2 == 0)
        .map(lambda x: calls.append(("b", x)) or x)
        .island()
        .run_with(TestSink.probe().add_attributes(Attributes.input_buffer(4, 4)), mat)
    )
    probe.request(1)
    probe.expect_next(0)
    probe.expect_no_message(0.05)
    b_calls = [x for k, x in calls if k == "b"]
    a_calls = [x for k, x in calls if k == "a"]
    # the channel asked for 4 elements: 4 passing ones (0, 2, 4, 6) and no element beyond the 4th
    assert b_calls == [0, 2, 4, 6]
    assert a_calls == list(range(7))
    probe.cancel()


@pytest.mark.parametrize("lazy", [False, True], ids=["map", "map_concat"])
def test_sink_finishes_its_buffered_input_after_upstream_completed(mat, lazy):
    # a chunk from the channel takes several turns (slow operator): upstream completes meanwhile, and
    # the sink must still work through the rest of it
    def slow(x):
        time.sleep(0.0002)
        return x * 2

    src = Source.range(0, 300).island().map(slow)
    if lazy:
        src = src.map_concat(lambda x: [x])
    sink = Sink.fold(0, lambda a, b: a + b).add_attributes(Attributes.input_buffer(64, 64))
    assert src.run_with(sink, mat).result(10) == 2 * sum(range(300))


def test_source_does_not_read_ahead(mat):
    pulled = []

    def gen():
        for i in range(100):
            pulled.append(i)
            yield i

    sink = Source.from_iterator(gen).map(lambda x: x + 1).filter(lambda x: x % 2 == 0).run_with(TestSink.probe(), mat)
    sink.request(2)
    sink.expect_next(2, 4)
    sink.expect_no_message(0.05)
    assert pulled == [0, 1, 2, 3]  # exactly what was needed
    sink.cancel()


def test_request_n_reaches_the_source_as_exactly_n(mat):
    pulled = []

    def gen():
        for i in range(100):
            pulled.append(i)
            yield i

    probe = Source.from_iterator(gen).map(lambda x: x).map(lambda x: x * 2).run_with(TestSink.probe(), mat)
    for n in (1, 3, 5):
        before = len(pulled)
        probe.request(n)
        probe.expect_next_n(n)
        probe.expect_no_message(0.02)
        assert len(pulled) - before == n
    probe.cancel()


@pytest.mark.parametrize("kind", ["source", "sink", "flow"])
def test_runs_cut_by_probes_behave_like_stages(mat, kind):
    # source->flows, flows->sink and flows->flows runs appear when a probe cuts the chain
    if kind == "source":
        g = Source.range(0, 3).map(lambda x: x).map(lambda x: x + 1).to_mat(TestSink.probe(), Keep.right)
        probe = g.run(mat)
        assert probe.to_strict() == [1, 2, 3]
    elif kind == "sink":
        src, fut = TestSource.probe().map(lambda x: x + 1).to_mat(Sink.seq(), Keep.both).run(mat)
        src.send_next_many(1, 2).send_complete()
        assert fut.result(3) == [2, 3]
    else:
        src, sink = TestSource.probe().map(lambda x: x + 1).map(lambda x: x * 3).to_mat(TestSink.probe(), Keep.both).run(mat)
        sink.request(2)
        src.send_next_many(1, 2)
        sink.expect_next(6, 9)
        src.send_complete()
        sink.expect_complete()


def test_closed_loop_gives_the_same_result_chunked_and_unfused():
    g = Source.range(0, 100).map(lambda x: x + 1).filter(lambda x: x % 2).to_mat(Sink.seq(), Keep.right)
    for settings in ({}, {"fusion": False}, {"chunk_size": 1}, {"chunk_size": 7}):
        m = Materializer.local(**settings)
        try:
            assert g.run(m).result(3) == list(range(1, 101, 2))
        finally:
            m.shutdown()
