"""Randomized parity of the ``map_concat`` and kill switch chunk forms with the element-wise reference
(``Materializer.local(fusion=False)``): random chains around them, random expansions (lists, empty,
generators failing while iterating, ``None`` outputs, a raising ``fn``), random supervision, random
chunk sizes and random demand. Each stage logs its own user-function calls; under a probe's demand
the logs are identical per stage (a prefix when the stream failed: see DESIGN.md section 9), the
probe sees the same events. Kill switches are used at random points under bounded demand. Signals
interleaved with elements arrive in place and exactly once."""
from __future__ import annotations

import itertools
import random

import pytest

from atoll import Attributes, Flow, Keep, KillSwitches, Materializer, Sink, Source, Supervision
from atoll.stage.signals import Barrier, Signal, Watermark
from atoll.testkit import TestSink
from atoll.testkit.signals import Recording, Scripted, coalesce_watermarks
from test_chunk_parity import StageChain


class Boom(Exception):
    pass


_DECIDERS = [None, Supervision.resuming_decider, Supervision.restarting_decider]


def _supervised(flow, decider):
    return flow if decider is None else flow.with_attributes(Attributes.supervision_strategy(decider))


def _bad(rng, p=0.3):
    return frozenset(rng.randint(0, 40) for _ in range(rng.randint(1, 2))) if rng.random() < p else frozenset()


def _map_concat_fn(rng, i, log, failures=True, productive=False):
    """A random map_concat function logging its calls and iteration steps; ``productive``: every
    element but the ones ``fn`` fails on gives at least one output."""
    kind = rng.choice(["list", "list", "generator", "generator", "none"] + ([] if productive else ["empty_or_long"]))
    k = rng.randint(1, 5)
    least = 1 if productive else 0
    bad = _bad(rng) if failures else frozenset()
    fn_bad = _bad(rng, 0.2) if failures else frozenset()

    def fn(x):
        log.append(x)
        if x in fn_bad:
            raise Boom("fn", i, x)
        if kind == "list":
            return [(x + j) % 41 for j in range(x % k + least)]
        if kind == "empty_or_long":
            return [] if x % 2 else [(x * j) % 41 for j in range(12)]
        if kind == "none" and x in bad:
            return [x, None, x]

        def gen():
            for j in range(x % k + max(least, kind == "none")):
                log.append(("next", x, j))
                if x in bad and j == 1:
                    raise Boom("iterating", i, x)
                yield (x + j) % 41

        return gen()

    return fn


class Chain(StageChain):
    """A random chain of map/filter/map_concat stages (at least one map_concat when ``map_concat``);
    stage ``i`` logs its user-function calls to ``logs[i]``. ``productive``: no filters, and every
    stage turns all but at most two of the values 0..40 into at least one output (the maps are
    bijections mod 41), so a source cycling through them never stops producing."""

    def __init__(self, rng, map_concat=True, failures=True, supervision=True, n=None, productive=False):
        self.logs, self.flows = [], []
        choices = ["map", "map_concat", "identity"] + ([] if productive else ["filter"])
        kinds = [rng.choice(choices) for _ in range(n or rng.randint(1, 4))]
        if map_concat and "map_concat" not in kinds:
            kinds.insert(rng.randrange(len(kinds) + 1), "map_concat")
        for i, kind in enumerate(kinds):
            log: list = []
            self.logs.append(log)
            if kind == "identity":
                self.flows.append(Flow())
                continue
            k = rng.randint(2, 5)
            bad = _bad(rng) if failures else frozenset()
            if kind == "map":
                def fn(x, i=i, k=k, bad=bad, log=log):
                    log.append(x)
                    if x in bad:
                        raise Boom("map", i, x)
                    return (x * k + 1) % 41
            elif kind == "filter":
                def fn(x, i=i, k=k, bad=bad, log=log):
                    log.append(x)
                    if x in bad:
                        raise Boom("filter", i, x)
                    return x % k != 0
            else:
                fn = _map_concat_fn(rng, i, log, failures, productive)
            decider = rng.choice(_DECIDERS) if supervision and rng.random() < 0.5 else None
            self.flows.append(_supervised(getattr(Flow(), kind)(fn), decider))


def _source(rng, read, endless=False):
    data = [rng.randint(0, 40) for _ in range(rng.choice([0, 1, rng.randint(2, 15), rng.randint(15, 120)]))]
    if endless:
        # every value 0..40 in a cycle: with a productive chain the stream never ends on its own
        data = rng.sample(range(41), 41)

    def it():
        xs = itertools.cycle(data) if endless else data
        for j, x in enumerate(xs):
            read.append(j)
            yield x

    return lambda: Source.from_iterator(it)


def _event(ev):
    return (ev[0], type(ev[1]), str(ev[1])) if ev[0] == "error" else ev


def _drive_to_the_end(probe, rng):
    """Random demand steps until the stream completes or fails; the events in order."""
    events = []
    while not events or events[-1][0] == "next":
        n = rng.randint(1, 6)
        probe.request(n)
        for _ in range(n):
            ev = _event(probe.expect_event())
            events.append(ev)
            if ev[0] != "next":
                break
    return events


def _check_logs(chunked_logs, plain_logs, failed):
    for i, (c, p) in enumerate(zip(chunked_logs, plain_logs)):
        if failed:
            assert c[: len(p)] == p, f"stage {i} (0 = source): the unfused calls must be a prefix"
        else:
            assert c == p, f"stage {i} (0 = source): calls differ"


# ============================================================================================ map_concat
@pytest.mark.parametrize("seed", range(80))
def test_random_map_concat_chains_under_demand_chunked_equal_unfused(seed):
    rng = random.Random(70_000 + seed)
    read: list = []
    make_source = _source(rng, read)
    chain = Chain(rng)
    chunk_size = rng.randint(1, 40)
    results = {}
    for fusion in (True, False):
        chain.clear()
        read.clear()
        m = Materializer.local(fusion=fusion, chunk_size=chunk_size)
        try:
            probe = chain.apply(make_source()).run_with(TestSink.probe(), m)
            events = _drive_to_the_end(probe, random.Random(seed * 31))
        finally:
            m.shutdown()
        results[fusion] = (events, [list(read)] + chain.snapshot())
    assert results[True][0] == results[False][0]
    _check_logs(results[True][1], results[False][1], results[False][0][-1][0] == "error")


@pytest.mark.parametrize("seed", range(60))
def test_random_map_concat_chains_cancelled_midway_chunked_equal_unfused(seed):
    # random demand, then cancel (unless the stream ended): every stage made exactly the same calls
    rng = random.Random(71_000 + seed)
    read: list = []
    make_source = _source(rng, read)
    chain = Chain(rng)
    chunk_size = rng.randint(1, 40)
    steps = rng.randint(1, 6)
    results = {}
    for fusion in (True, False):
        chain.clear()
        read.clear()
        drng = random.Random(seed * 17)
        m = Materializer.local(fusion=fusion, chunk_size=chunk_size)
        try:
            probe = chain.apply(make_source()).run_with(TestSink.probe(), m)
            events = []
            for _ in range(steps):
                n = drng.randint(1, 8)
                probe.request(n)
                for _ in range(n):
                    events.append(_event(probe.expect_event()))
                    if events[-1][0] != "next":
                        break
                if events[-1][0] != "next":
                    break
            if events[-1][0] == "next":
                probe.cancel()
        finally:
            m.shutdown()
        results[fusion] = (events, [list(read)] + chain.snapshot())
    assert results[True][0] == results[False][0]
    _check_logs(results[True][1], results[False][1], results[False][0][-1][0] == "error")


def _fold_sink(log):
    def fold(acc, x):
        log.append(x)
        return (acc * 31 + x) % 1_000_003

    return Sink.fold(7, fold)


@pytest.mark.parametrize("seed", range(60))
def test_random_map_concat_chains_into_seq_and_fold_chunked_equal_unfused(seed):
    rng = random.Random(72_000 + seed)
    read: list = []
    make_source = _source(rng, read)
    chain = Chain(rng)
    use_fold = rng.random() < 0.5
    chunk_size = rng.randint(1, 60)
    results = {}
    for fusion in (True, False):
        chain.clear()
        read.clear()
        sink_log: list = []
        m = Materializer.local(fusion=fusion, chunk_size=chunk_size)
        try:
            fut = chain.apply(make_source()).run_with(_fold_sink(sink_log) if use_fold else Sink.seq(), m)
            try:
                out = ("ok", fut.result(10))
            except Exception as e:  # noqa: BLE001
                assert not isinstance(e, TimeoutError), "the stream did not end"
                out = ("err", type(e), str(e))
        finally:
            m.shutdown()
        results[fusion] = (out, [list(read)] + chain.snapshot() + [sink_log])
    assert results[True][0] == results[False][0]
    # under unbounded demand an upstream stage may run up to a chunk past a downstream failure
    _check_logs(results[True][1], results[False][1], results[False][0][0] == "err")


# ============================================================================================ kill switch
@pytest.mark.parametrize("seed", range(60))
def test_random_kill_switch_under_demand_chunked_equal_unfused(seed):
    # endless source -> chain -> switch -> chain -> probe; after random demand steps (everything asked
    # for has arrived, so the stream is idle) the switch is shut down or aborted, then what the stages
    # after it still hold is asked for
    rng = random.Random(73_000 + seed)
    read: list = []
    make_source = _source(rng, read, endless=True)
    pre = Chain(rng, map_concat=rng.random() < 0.5, failures=rng.random() < 0.3, productive=True)
    post = Chain(rng, map_concat=False, failures=rng.random() < 0.3, n=rng.randint(1, 2), productive=True)
    shared = rng.random() < 0.5
    abort = rng.random() < 0.5
    chunk_size = rng.randint(1, 40)
    steps = rng.randint(0, 5)
    results = {}
    for fusion in (True, False):
        pre.clear()
        post.clear()
        read.clear()
        drng = random.Random(seed * 13)
        m = Materializer.local(fusion=fusion, chunk_size=chunk_size)
        try:
            if shared:
                switch = KillSwitches.shared(f"random-{seed}")
                probe = post.apply(pre.apply(make_source()).via(switch.flow())).run_with(TestSink.probe(), m)
            else:
                switch, probe = post.apply(pre.apply(make_source()).via_mat(KillSwitches.single(), Keep.right)) \
                    .to_mat(TestSink.probe(), Keep.both).run(m)
            events = []
            for _ in range(steps):
                n = drng.randint(1, 8)
                probe.request(n)
                for _ in range(n):
                    events.append(_event(probe.expect_event()))
                    if events[-1][0] != "next":
                        break
                if events[-1][0] != "next":
                    break
            if not events or events[-1][0] == "next":
                if abort:
                    switch.abort(Boom("abort", seed))
                else:
                    switch.shutdown()
                # a stage after the switch may still hold outputs (map_concat): they need demand
                probe.request(1000)
                events.append(_event(probe.expect_event()))
                while events[-1][0] == "next":
                    events.append(_event(probe.expect_event()))
        finally:
            m.shutdown()
        results[fusion] = (events, [list(read)] + pre.snapshot() + post.snapshot())
    events = results[False][0]
    assert events[-1][0] in ("complete", "error")
    assert results[True][0] == events
    # exact calls, unless a stage failed (Stop) before the switch was used
    _check_logs(results[True][1], results[False][1], events[-1][0] == "error" and "abort" not in events[-1][2])


# ============================================================================================ signals
def _random_items(rng):
    items, ts, cp = [], 0, 0
    for _ in range(rng.randint(0, 40)):
        r = rng.random()
        if r < 0.15:
            ts += rng.randint(0, 3)
            items.append(Watermark(ts))
        elif r < 0.22:
            cp += 1
            items.append(Barrier(cp))
        else:
            items.append(rng.randint(0, 40))
    return items


@pytest.mark.parametrize("seed", range(60))
def test_random_signals_through_map_concat_and_kill_switch_arrive_in_place_once(seed):
    rng = random.Random(74_000 + seed)
    items = _random_items(rng)
    k = rng.randint(1, 5)
    bad = _bad(rng, 0.4)
    generator = rng.random() < 0.5
    decider = rng.choice(_DECIDERS[1:]) if bad else None
    with_switch = rng.random() < 0.5

    def expand(x):
        out = [(x + j) % 41 for j in range(x % k)]
        return out[:1] if x in bad else out  # the failing element's outputs before its failure

    def fn(x):
        if not generator:
            if x in bad:
                def failing():
                    yield from expand(x)
                    raise Boom("iterating", x)
                return failing()
            return expand(x)

        def gen():
            for j, y in enumerate((x + j) % 41 for j in range(x % k)):
                if x in bad and j == 1:
                    raise Boom("iterating", x)
                yield y
            if x in bad and x % k <= 1:
                raise Boom("iterating", x)
        return gen()

    want = []
    for x in items:
        want += [x] if isinstance(x, Signal) else expand(x)

    def graph(sink_chunk):
        flow = _supervised(Flow().map_concat(fn), decider)
        src = Source.from_graph(Scripted(items)).via(flow)
        if with_switch:
            src = src.via(KillSwitches.single())
        return src.to_mat(Recording(sink_chunk), Keep.right)

    for settings in (dict(fusion=False), dict(chunk_size=rng.randint(1, 5)), dict(chunk_size=1024)):
        m = Materializer.local(**settings)
        try:
            got = graph(rng.randint(1, 6)).run(m).result(10)
        finally:
            m.shutdown()
        assert coalesce_watermarks(got) == coalesce_watermarks(want), (settings, items)
