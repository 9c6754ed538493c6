"""Fused runs must behave exactly like the stages they replace (results, failures, side-effect order)."""
from __future__ import annotations

import random
import time

import pytest

from atoll import Attributes, Keep, Materializer, Sink, Source
from atoll.errors import PortStateError
from atoll.islands.fusion import FusedLoop, FusedRun, generate
from atoll.testkit import TestSink, TestSource


class Boom(Exception):
    pass


def _random_chain(rng: random.Random, log: list, generators: bool = False):
    """A random list of (name, function) operator specs; every call is logged to ``log``. With
    ``generators`` a map_concat may return a generator (logging each element it makes, and failing
    while iterating on 999_998)."""
    specs = []
    for i in range(rng.randint(1, 6)):
        kind = rng.choice(["map", "filter", "filter_not", "map_concat"])
        k = rng.randint(2, 5)
        if kind == "map_concat" and generators and rng.random() < 0.5:
            def fn(x, i=i, k=k):
                log.append(("map_concat", i, x))

                def gen():
                    for j in range(x % k):
                        log.append(("next", i, x, j))
                        if x == 999_998 and j == 1:
                            raise Boom("iterating", i)
                        yield x + j

                return gen()
        elif kind == "map":
            def fn(x, i=i, k=k):
                log.append(("map", i, x))
                if x == 999_999:
                    raise Boom(i)
                return x * k % 1000 + 1
        elif kind in ("filter", "filter_not"):
            def fn(x, i=i, k=k):
                log.append((kind, i, x))
                return x % k == 0
        else:
            def fn(x, i=i, k=k):
                log.append(("map_concat", i, x))
                return [x + j for j in range(x % k)]
        specs.append((kind, fn))
    return specs


def _apply(src, specs):
    for kind, fn in specs:
        src = getattr(src, kind)(fn)
    return src


def _run(specs, data, sink, fusion):
    log = []
    mat = Materializer.local(fusion=fusion)
    try:
        fut = _apply(Source.from_iterable(data), specs).run_with(sink(), mat)
        try:
            return ("ok", fut.result(5))
        except Exception as e:  # noqa: BLE001
            return ("err", type(e), str(e))
    finally:
        mat.shutdown()


@pytest.mark.parametrize("seed", range(40))
def test_random_chains_fused_equal_unfused(seed):
    rng = random.Random(seed)
    data = [rng.randint(0, 50) for _ in range(rng.randint(0, 300))]
    if rng.random() < 0.2 and data:
        data[rng.randrange(len(data))] = 999_999  # a map fails on this one
    shared_log = []
    specs = _random_chain(rng, shared_log)
    for sink in (Sink.seq, lambda: Sink.fold(0, lambda a, b: a * 31 + b)):
        shared_log.clear()
        fused = _run(specs, data, sink, True)
        fused_log = list(shared_log)
        shared_log.clear()
        plain = _run(specs, data, sink, False)
        assert fused == plain
        assert fused_log == shared_log, "side effects must happen in the same order"


def _run_with_demand(specs, log, data, fusion, rng):
    """Run the chain (logging to ``log``) from a logging iterator into a probe that asks for a
    random number of elements in random steps; returns the events and the calls made by then."""
    log.clear()

    def source():
        for j, x in enumerate(data):
            log.append(("source", j))
            yield x

    mat = Materializer.local(fusion=fusion)
    try:
        probe = _apply(Source.from_iterator(source), specs).run_with(TestSink.probe(), mat)
        events = []
        wanted = rng.randint(0, 30)
        while wanted > 0 and (not events or events[-1][0] == "next"):
            n = min(wanted, rng.randint(1, 4))
            wanted -= n
            probe.request(n)
            for _ in range(n):
                ev = probe.expect_event()
                events.append((ev[0], repr(ev[1])) if ev[0] == "error" else ev)
                if ev[0] != "next":
                    break
        probe.expect_no_message(0.02)  # nothing more is made without demand
        calls = list(log)
        if not events or events[-1][0] == "next":
            probe.cancel()
        return events, calls
    finally:
        mat.shutdown()


@pytest.mark.parametrize("seed", range(30))
def test_random_chains_under_demand_fused_equal_unfused(seed):
    # a fused run calls user code only as far as demand reaches, in the same order, and fails at the
    # same point: the source iterator, the operators and map_concat's iterables all log their calls
    rng = random.Random(seed)
    data = [rng.randint(0, 50) for _ in range(rng.randint(0, 40))]
    if rng.random() < 0.3 and data:
        data[rng.randrange(len(data))] = rng.choice([999_999, 999_998])
    log = []
    specs = _random_chain(rng, log, generators=True)
    plain = _run_with_demand(specs, log, data, False, random.Random(seed))
    fused = _run_with_demand(specs, log, data, True, random.Random(seed))
    assert fused == plain


def test_closed_loop_is_fused_into_one_stage(mat):
    g = Source.range(0, 100).map(lambda x: x + 1).filter(lambda x: x % 2).to_mat(Sink.seq(), Keep.right)
    fut = g.run(mat)
    assert fut.result(3) == list(range(1, 101, 2))
    # the materializer really fused it (introspect through a fresh local build)
    from atoll.islands.fusion import fuse
    from atoll.islands.island_builder import IslandBuilder
    from atoll.islands.local_phase import create_stage
    from atoll.materializer import phased

    class Phase:
        name = "p"

        def __init__(self):
            self.b = IslandBuilder("p")

        def materialize_atomic(self, module, attrs):
            logic, m = create_stage(module, attrs)
            self.b.add_logic(logic)
            return logic, m

        def assign_port(self, port, slot, logic):
            self.b.assign_port(port, slot, logic)

        def create_publisher(self, out, logic):  # pragma: no cover - single island
            raise AssertionError

        def take_publisher(self, slot, pub, attrs):  # pragma: no cover - single island
            raise AssertionError

        def on_island_ready(self):
            pass

    p = Phase()
    phased.materialize(g.builder.traversal, lambda t, a, i: p, Materializer.local().settings.top_attributes())
    assert fuse(p.b) == 1
    assert len(p.b.logics) == 1 and isinstance(p.b.logics[0], FusedLoop)


def test_none_from_fused_map_fails_with_port_error(mat):
    fut = Source.range(0, 5).map(lambda x: x).map(lambda x: None if x == 3 else x).run_with(Sink.seq(), mat)
    with pytest.raises(PortStateError, match="must not be None"):
        fut.result(3)


def test_fused_flow_between_probes_keeps_demand_and_order(mat):
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


def test_fused_flow_failure_emits_earlier_outputs_first(mat):
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


def test_fused_failure_after_outputs_waits_for_the_demand_of_an_island_boundary(mat):
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


def test_fused_run_after_an_island_boundary_applies_user_functions_only_for_demand(mat):
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
    assert calls == [("a", 0), ("b", 0), ("a", 1), ("b", 1)]  # not the whole chunk the channel brought
    probe.cancel()


def test_fused_run_before_an_island_boundary_makes_only_what_the_channel_asks_for(mat):
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


@pytest.mark.parametrize("lazy", [False, True], ids=["map", "map_concat"])
def test_fused_run_into_a_sink_finishes_its_buffered_input_after_upstream_completed(mat, lazy):
    # a chunk from the channel takes several turns (slow operator): upstream completes meanwhile, and
    # the run (whose every port is closed then) must still work through the rest of it
    def slow(x):
        time.sleep(0.0002)
        return x * 2

    src = Source.range(0, 300).island().map(slow)
    if lazy:
        src = src.map_concat(lambda x: [x])
    sink = Sink.fold(0, lambda a, b: a + b).add_attributes(Attributes.input_buffer(64, 64))
    assert src.run_with(sink, mat).result(10) == 2 * sum(range(300))


def test_fused_source_does_not_read_ahead(mat):
    pulled = []

    def gen():
        for i in range(100):
            pulled.append(i)
            yield i

    sink = Source.from_iterator(gen).map(lambda x: x + 1).filter(lambda x: x % 2 == 0).run_with(TestSink.probe(), mat)
    sink.request(2)
    sink.expect_next(2, 4)
    sink.expect_no_message(0.05)
    assert max(pulled) <= 4  # iterator prefetch is at most one element beyond what was needed
    sink.cancel()


def test_generated_code_is_inspectable():
    fn = generate([("map", abs), ("filter", bool, False), ("map_concat", list)], ["m", "f", "c"], "out", chunked=True)
    assert "for x in chunk:" in fn.source and "for x in f2(x):" in fn.source


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
