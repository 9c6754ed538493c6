"""Chunk forms of the slicing, aggregating, buffering and junction operators keep the per-element
semantics: every run is compared with ``Materializer.local(fusion=False)`` (element connections
only), between a chunked source and sink (several chunk sizes) and between probes with random
demand; supervision (Resume/Restart) and the place of control signals are checked too."""
from __future__ import annotations

import pickle

import pytest

from atoll import Attributes, Flow, Keep, Materializer, OverflowStrategy, Sink, Source
from atoll.stage.signals import Signal, Watermark
from atoll.testkit import TestSink
from atoll.testkit.signals import Recording, Scripted
from atoll.testkit.signals import coalesce_watermarks
from chunk_kit import (
    CHUNK_SETTINGS,
    Boom,
    check,
    check_chunked,
    check_signals,
    drive,
    restarting,
    resuming,
    signals_of,
)

W = Watermark


SIGNAL_ITEMS = [W(0), 1, 2, W(5), 3, 4, 5, W(7), 6, 7, 8, 9, 10, W(11), W(12), 11, W(13)]


DATA = list(range(1, 41))


# ---------------------------------------------------------------------------------------------- take / drop
@pytest.mark.parametrize("n", [0, 1, 5, 40, 100])
def test_take(n):
    assert check(lambda f: f.take(n), DATA) == ("ok", DATA[:n])


def test_take_pulls_at_most_min_of_demand_and_remaining():
    pulled = []
    m = Materializer.local(chunk_size=1024)
    try:
        fut = (Source.from_iterable(DATA).map(lambda x: pulled.append(x) or x).take(3)
               .to_mat(Sink.seq(), Keep.right).run(m))
        assert fut.result(10) == [1, 2, 3]
    finally:
        m.shutdown()
    assert pulled == [1, 2, 3]


@pytest.mark.parametrize("n", [0, 1, 5, 40, 100])
def test_drop(n):
    assert check(lambda f: f.drop(n), DATA) == ("ok", DATA[n:])


def _pred(limit, bad=()):
    def p(x):
        if x in bad:
            raise Boom(x)
        return x < limit
    return p


@pytest.mark.parametrize("inclusive", [False, True])
@pytest.mark.parametrize("limit", [1, 7, 100])
def test_take_while(limit, inclusive):
    want = [x for x in DATA if x < limit] + ([limit] if inclusive and limit <= 40 else [])
    assert check(lambda f: f.take_while(_pred(limit), inclusive), DATA) == ("ok", want)


@pytest.mark.parametrize("decider", [None, resuming, restarting])
def test_take_while_supervised(decider):
    out = check(lambda f: f.take_while(_pred(20, bad={3, 4, 9})), DATA, decider)
    if decider is None:
        assert out[0] == "err" and out[1] == Boom(3)
    else:
        assert out == ("ok", [x for x in range(1, 20) if x not in (3, 4, 9)])


@pytest.mark.parametrize("limit", [1, 7, 100])
def test_drop_while(limit):
    assert check(lambda f: f.drop_while(_pred(limit)), DATA) == ("ok", [x for x in DATA if x >= limit])


@pytest.mark.parametrize("decider", [None, resuming, restarting])
def test_drop_while_supervised(decider):
    out = check(lambda f: f.drop_while(_pred(10, bad={2, 3, 12})), DATA, decider)
    if decider is None:
        assert out[0] == "err" and out[1] == Boom(2)
    else:
        assert out == ("ok", list(range(10, 41)))


def test_slicing_failure_after_elements():
    def src_fail():
        return Flow().map(lambda x: x if x != 30 else 1 // 0)

    for op in (lambda f: f.take(35), lambda f: f.drop(3), lambda f: f.take_while(lambda x: True),
               lambda f: f.drop_while(lambda x: x < 5)):
        got = check_chunked(op, DATA, pre=src_fail)
        assert got[0] == "err" and isinstance(got[1], ZeroDivisionError)


def test_slicing_state_hooks():
    from atoll._impl.ops.slicing import Drop, DropWhile, Take
    for stage in (Take(5), Drop(5)):
        logic = stage.create_logic(Attributes.none)
        logic.left = 2
        snap = pickle.loads(pickle.dumps(logic.save_to_snapshot()))
        logic.reset_state()
        assert logic.left == 5
        logic.restore_from_snapshot(snap)
        assert logic.left == 2
    logic = DropWhile(bool).create_logic(Attributes.none)
    logic.dropping = False
    snap = logic.save_to_snapshot()
    logic.reset_state()
    assert logic.dropping is True
    logic.restore_from_snapshot(snap)
    assert logic.dropping is False


@pytest.mark.parametrize("op", [lambda f: f.take(9), lambda f: f.drop(3), lambda f: f.take_while(lambda x: x < 8),
                                lambda f: f.drop_while(lambda x: x < 4)])
def test_slicing_signals_keep_their_place(op):
    check_signals(op, SIGNAL_ITEMS)


# ---------------------------------------------------------------------------------------------- scan / fold
def _adder(bad=()):
    def f(acc, x):
        if x in bad:
            raise Boom(x)
        return acc + x
    return f


@pytest.mark.parametrize("data", [[], [5], DATA])
def test_scan(data):
    want = [0]
    for x in data:
        want.append(want[-1] + x)
    assert check(lambda f: f.scan(0, _adder()), data) == ("ok", want)


@pytest.mark.parametrize("decider", [None, resuming, restarting])
def test_scan_supervised(decider):
    out = check(lambda f: f.scan(0, _adder(bad={3, 4, 17})), DATA, decider)
    if decider is None:
        assert out[0] == "err" and out[1] == Boom(3)
    else:
        assert out[0] == "ok" and len(out[1]) == (41 if decider is restarting else 38)


@pytest.mark.parametrize("data", [[], [5], DATA])
def test_fold(data):
    assert check(lambda f: f.fold(0, _adder()), data) == ("ok", [sum(data)])


@pytest.mark.parametrize("decider", [None, resuming, restarting])
def test_fold_supervised(decider):
    out = check(lambda f: f.fold(0, _adder(bad={3, 4, 17})), DATA, decider)
    if decider is None:
        assert out[0] == "err" and out[1] == Boom(3)
    elif decider is resuming:
        assert out == ("ok", [sum(DATA) - 24])
    else:
        assert out == ("ok", [sum(range(18, 41))])


def test_reduce_supervised():
    for decider in (None, resuming, restarting):
        check(lambda f: f.reduce(_adder(bad={3, 4, 17})), DATA, decider)


def test_scan_fold_state_hooks():
    from atoll._impl.ops.aggregate import Fold, Scan
    logic = Scan(0, _adder()).create_logic(Attributes.none)
    logic.acc, logic.zero_out = 7, True
    snap = pickle.loads(pickle.dumps(logic.save_to_snapshot()))
    logic.reset_state()
    assert logic.acc == 0
    logic.restore_from_snapshot(snap)
    assert (logic.acc, logic.zero_out) == (7, True)
    logic = Fold(0, _adder()).create_logic(Attributes.none)
    logic.acc = 9
    snap = logic.save_to_snapshot()
    logic.reset_state()
    assert logic.acc == 0
    logic.restore_from_snapshot(snap)
    assert logic.acc == 9


def test_scan_and_fold_failure_after_elements():
    def src_fail():
        return Flow().map(lambda x: x if x != 30 else 1 // 0)

    for op in (lambda f: f.scan(0, _adder()), lambda f: f.fold(0, _adder())):
        got = check_chunked(op, DATA, pre=src_fail)
        assert got[0] == "err" and isinstance(got[1], ZeroDivisionError)


# ---------------------------------------------------------------------------------------------- grouped / sliding
@pytest.mark.parametrize("n", [1, 3, 7, 40, 50])
@pytest.mark.parametrize("data", [[], [1], DATA])
def test_grouped(n, data):
    want = [data[i:i + n] for i in range(0, len(data), n)]
    assert check(lambda f: f.grouped(n), data) == ("ok", want)


@pytest.mark.parametrize("n,step", [(1, 1), (3, 1), (3, 2), (3, 3), (2, 5), (4, 7), (5, 2)])
@pytest.mark.parametrize("data", [[], [1], [1, 2], DATA[:13]])
def test_sliding(n, step, data):
    out = check(lambda f: f.sliding(n, step), data)
    assert out[0] == "ok"
    # every output is a window of consecutive elements, in order
    for w in out[1]:
        assert w == data[data.index(w[0]):data.index(w[0]) + len(w)]


def test_grouped_and_sliding_failure_after_elements():
    def src_fail():
        return Flow().map(lambda x: x if x != 30 else 1 // 0)

    for op in (lambda f: f.grouped(4), lambda f: f.sliding(3, 2)):
        got = check_chunked(op, DATA, pre=src_fail)
        assert got[0] == "err" and isinstance(got[1], ZeroDivisionError)


@pytest.mark.parametrize("op", [lambda f: f.grouped(1), lambda f: f.grouped(3), lambda f: f.grouped(50),
                                lambda f: f.sliding(3), lambda f: f.sliding(3, 2), lambda f: f.sliding(2, 4),
                                lambda f: f.sliding(4, 3)])
def test_windows_hold_signals_behind_their_elements(op):
    log = check_signals(op, SIGNAL_ITEMS)
    sent, got = signals_of(SIGNAL_ITEMS), signals_of(log)
    # every non-coalescing signal once, in order; watermarks held behind one window may coalesce
    assert [x for x in got if not x.coalesce] == [x for x in sent if not x.coalesce]
    marks = [x for x in got if isinstance(x, W)]
    all_marks = [x for x in sent if isinstance(x, W)]
    assert marks == sorted(set(marks), key=lambda w: w.timestamp) and set(marks) <= set(all_marks)
    assert marks[-1] == all_marks[-1]
    # no signal comes before a window holding an element that arrived before it
    seen = 0
    before = {}
    for x in SIGNAL_ITEMS:
        if isinstance(x, Signal):
            before[x] = seen
        else:
            seen = x
    out_max = 0
    for x in log:
        if isinstance(x, Signal):
            assert out_max >= min(before[x], _last_emittable(op, before[x])), (x, log)
        else:
            out_max = max(out_max, max(x))


def _last_emittable(op, k):
    # the largest element <= k that appears in some output of op over 1..11
    outs = check_chunked(op, list(range(1, 12)))[1]
    cands = [x for w in outs for x in w if x <= k]
    return max(cands) if cands else 0


def test_window_state_hooks():
    from atoll._impl.ops.aggregate import Grouped, Sliding
    for stage in (Grouped(3), Sliding(3, 2)):
        logic = stage.create_logic(Attributes.none)
        logic.step(1)
        logic.step(2)
        snap = pickle.loads(pickle.dumps(logic.save_to_snapshot()))
        logic.reset_state()
        assert logic.buf == []
        logic.restore_from_snapshot(snap)
        assert logic.buf == [1, 2]


# ---------------------------------------------------------------------------------------------- zip_with_index
@pytest.mark.parametrize("data", [[], [7], DATA])
def test_zip_with_index(data):
    assert check(lambda f: f.zip_with_index(), data) == ("ok", [(x, i) for i, x in enumerate(data)])


def test_zip_with_index_after_a_resumed_filter_and_state_hooks():
    def odd(x):
        if x == 5:
            raise Boom(x)
        return x % 2

    check(lambda f: f.filter(odd).zip_with_index(), DATA, resuming)
    from atoll._impl.ops.sequence import ZipWithIndex
    logic = ZipWithIndex().create_logic(Attributes.none)
    logic.index = 4
    snap = pickle.loads(pickle.dumps(logic.save_to_snapshot()))
    logic.reset_state()
    assert logic.index == 0
    logic.restore_from_snapshot(snap)
    assert logic.index == 4


def test_zip_with_index_signals():
    check_signals(lambda f: f.zip_with_index(), SIGNAL_ITEMS)


# ---------------------------------------------------------------------------------------------- buffer
@pytest.mark.parametrize("size", [1, 3, 64])
def test_buffer_backpressure(size):
    assert check(lambda f: f.buffer(size, OverflowStrategy.backpressure), DATA) == ("ok", DATA)


@pytest.mark.parametrize("strategy", [OverflowStrategy.drop_head, OverflowStrategy.drop_tail,
                                      OverflowStrategy.drop_buffer, OverflowStrategy.fail])
def test_buffer_dropping_strategies_with_a_fast_downstream(strategy):
    assert check_chunked(lambda f: f.buffer(8, strategy), DATA) == ("ok", DATA)


def test_buffer_failure_after_its_elements():
    def src_fail():
        return Flow().map(lambda x: x if x != 30 else 1 // 0)

    got = check_chunked(lambda f: f.buffer(4, OverflowStrategy.backpressure), DATA, pre=src_fail)
    assert got[0] == "err" and isinstance(got[1], ZeroDivisionError)


@pytest.mark.parametrize("size", [1, 2, 5, 100])
def test_buffer_holds_signals_behind_its_elements(size):
    log = check_signals(lambda f: f.buffer(size, OverflowStrategy.backpressure), SIGNAL_ITEMS)
    assert log == coalesce_watermarks(SIGNAL_ITEMS)


def _buffer_logic(strategy, size=3):
    from atoll._impl.ops.buffer import Buffer

    logic = Buffer(size, strategy).create_logic(Attributes.none)
    emitted = []
    logic.emit_signal = lambda out, sig: emitted.append(sig)
    logic.fail_stage = lambda exc: emitted.append(exc)
    return logic, emitted


def test_buffer_overflow_releases_the_signals_of_dropped_elements():
    logic, emitted = _buffer_logic(OverflowStrategy.drop_head)
    for x in (1, W(1), 2, W(2), 3):
        logic.on_signal(x) if isinstance(x, Signal) else logic._insert(x)
    logic._insert(4)  # drops 1: W(1) is now at the head and goes out
    assert emitted == [W(1)]
    assert [getattr(x, "signal", x) for x in logic.buf] == [2, W(2), 3, 4]
    snap = pickle.loads(pickle.dumps(logic.save_to_snapshot()))
    logic.reset_state()
    logic.restore_from_snapshot(snap)
    assert logic.count == 3

    logic, emitted = _buffer_logic(OverflowStrategy.drop_tail)
    for x in (1, 2, 3, W(3)):
        logic.on_signal(x) if isinstance(x, Signal) else logic._insert(x)
    logic._insert(4)  # drops 3, the youngest element; W(3) stays behind 2
    assert [getattr(x, "signal", x) for x in logic.buf] == [1, 2, W(3), 4] and emitted == []

    logic, emitted = _buffer_logic(OverflowStrategy.drop_buffer)
    for x in (1, W(1), 2, 3):
        logic.on_signal(x) if isinstance(x, Signal) else logic._insert(x)
    logic._insert(4)
    assert emitted == [W(1)] and list(logic.buf) == [4]


# ---------------------------------------------------------------------------------------------- log
@pytest.mark.parametrize("decider", [None, resuming, restarting])
def test_log_chunk_form_supervises_extract_per_element(decider):
    def extract(x):
        if x in (4, 9):
            raise Boom(x)
        return x

    out = check(lambda f: f.log("chunk-forms", extract), DATA, decider)
    if decider is None:
        assert out[0] == "err" and out[1] == Boom(4)
    else:
        assert out == ("ok", [x for x in DATA if x not in (4, 9)])


# ---------------------------------------------------------------------------------------------- junctions
from atoll import Balance, ClosedShape, GraphDSL, Merge, Partition, RunnableGraph, Unzip, UnzipWith  # noqa: E402
from atoll.stage.signals import Barrier  # noqa: E402

ALL_SETTINGS = [dict(fusion=False)] + CHUNK_SETTINGS


def _run_graph(g, **settings):
    m = Materializer.local(**settings)
    try:
        res = g.run(m)
        if isinstance(res, tuple):
            return tuple(r.result(10) for r in res)
        return res.result(10)
    finally:
        m.shutdown()


def _subseq(xs, keep):
    return [x for x in xs if keep(x)]


def _merge_of(inputs, eager=False, sink=None):
    def build(b, s):
        m = b.add(Merge(len(inputs), eager_complete=eager))
        for i, xs in enumerate(inputs):
            Source.from_iterable(xs) >> m.in_(i)
        m.out >> s.in_
        return ClosedShape

    return RunnableGraph.from_graph(GraphDSL.create(build, sink if sink is not None else Sink.seq()))


MERGE_INPUTS = [list(range(0, 30)), list(range(100, 107)), list(range(200, 245))]


@pytest.mark.parametrize("settings", ALL_SETTINGS)
@pytest.mark.parametrize("sink_chunk", [1, 2, 100])
def test_merge_keeps_every_element_and_the_order_of_each_input(settings, sink_chunk):
    log = _run_graph(_merge_of(MERGE_INPUTS, sink=Recording(sink_chunk)), **settings)
    assert sorted(log) == sorted(sum(MERGE_INPUTS, []))
    for xs in MERGE_INPUTS:
        assert _subseq(log, lambda x, xs=xs: xs[0] <= x <= xs[-1]) == xs


@pytest.mark.parametrize("settings", ALL_SETTINGS)
def test_merge_eager_complete(settings):
    out = _run_graph(_merge_of([list(range(5)), list(range(100, 400))], eager=True), **settings)
    assert _subseq(out, lambda x: x < 100) == list(range(5))
    big = _subseq(out, lambda x: x >= 100)
    assert big == list(range(100, 100 + len(big)))


@pytest.mark.parametrize("seed", range(3))
def test_merge_under_random_demand(seed):
    def graph():
        def build(b, s):
            m = b.add(Merge(3))
            for i, xs in enumerate(MERGE_INPUTS):
                Source.from_iterable(xs).map(lambda x: x) >> m.in_(i)
            m.out >> Flow().map(lambda x: x) >> s.in_
            return ClosedShape

        return RunnableGraph.from_graph(GraphDSL.create(build, TestSink.probe()))

    for s in ALL_SETTINGS:
        events = drive(graph, seed, **s)
        assert events[-1] == ("complete",)
        got = [e[1] for e in events[:-1]]
        for xs in MERGE_INPUTS:
            assert _subseq(got, lambda x, xs=xs: xs[0] <= x <= xs[-1]) == xs


@pytest.mark.parametrize("settings", ALL_SETTINGS)
@pytest.mark.parametrize("sink_chunk", [1, 3, 100])
def test_merge_holds_signals_behind_the_elements_before_them(settings, sink_chunk):
    a = [1, 2, 3, Barrier(1), 4, 5, 6, 7, 8, Barrier(2), 9]
    b = [10, 11, 12, 13, 14, 15, Barrier(1), 16, Barrier(2), 17, 18]

    def build(bld, s):
        m = bld.add(Merge(2))
        Source.from_graph(Scripted(a)) >> m.in_(0)
        Source.from_graph(Scripted(b)) >> m.in_(1)
        m.out >> s.in_
        return ClosedShape

    log = _run_graph(RunnableGraph.from_graph(GraphDSL.create(build, Recording(sink_chunk))), **settings)
    assert signals_of(log) == [Barrier(1), Barrier(2)]
    for k in (1, 2):
        i = log.index(Barrier(k))
        want = set()
        for xs in (a, b):
            want |= {x for x in xs[:xs.index(Barrier(k))] if not isinstance(x, Signal)}
        assert {x for x in log[:i] if not isinstance(x, Signal)} == want, (k, log)


def _balance_of(data, n, sinks, wait=False, source=None):
    def build(b, *ss):
        bal = b.add(Balance(n, wait_for_all_downstreams=wait))
        (source if source is not None else Source.from_iterable(data)) >> bal.in_
        for i, s in enumerate(ss):
            bal.out(i) >> s.in_
        return ClosedShape

    return RunnableGraph.from_graph(GraphDSL.create(build, *sinks, combine=lambda *xs: tuple(xs)))


@pytest.mark.parametrize("settings", ALL_SETTINGS)
@pytest.mark.parametrize("wait", [False, True])
def test_balance_sends_each_element_to_one_outlet_within_its_demand(settings, wait):
    outs = _run_graph(_balance_of(DATA, 3, [Recording(1), Recording(4), Sink.seq()], wait), **settings)
    assert sorted(sum(outs, [])) == DATA
    for o in outs:
        assert o == sorted(o)


@pytest.mark.parametrize("settings", ALL_SETTINGS)
def test_balance_holds_signals_behind_leftover_elements(settings):
    items = [W(0)] + list(range(1, 8)) + [W(8)] + list(range(8, 20)) + [Barrier(1)] + list(range(20, 25)) + [W(30)]
    outs = _run_graph(_balance_of(None, 2, [Recording(1), Recording(3)],
                                  source=Source.from_graph(Scripted(items))), **settings)
    assert sorted(x for o in outs for x in o if not isinstance(x, Signal)) == list(range(1, 25))
    for o in outs:
        assert signals_of(o) == signals_of(items)
        for i, x in enumerate(o):
            if isinstance(x, Signal):
                k = items.index(x)
                before = {y for y in items[:k] if not isinstance(y, Signal)}
                mine = {y for y in o if not isinstance(y, Signal)}
                assert {y for y in o[:i] if not isinstance(y, Signal)} == before & mine, (x, o)


def _fan_out_of(stage_fn, sinks, data=None, source=None):
    def build(b, *ss):
        st = b.add(stage_fn())
        (source if source is not None else Source.from_iterable(data)) >> st.in_
        for i, s in enumerate(ss):
            st.out(i) >> s.in_
        return ClosedShape

    return RunnableGraph.from_graph(GraphDSL.create(build, *sinks, combine=lambda *xs: tuple(xs)))


def _partitioner(x):
    if x in (5, 22):
        raise Boom(x)
    if x == 31:
        return 7  # out of bounds
    return x % 3


def _partition_outcome(decider, settings, sinks):
    g = _fan_out_of(lambda: Partition(3, _partitioner), sinks, DATA)
    if decider is not None:
        g = g.with_attributes(Attributes.supervision_strategy(decider))
    try:
        return ("ok", _run_graph(g, **settings))
    except Exception as e:  # noqa: BLE001
        return ("err", e)


@pytest.mark.parametrize("settings", ALL_SETTINGS)
@pytest.mark.parametrize("decider", [None, resuming, restarting])
def test_partition_splits_each_chunk_within_every_outlets_demand(settings, decider):
    out = _partition_outcome(decider, settings, [Recording(1), Recording(4), Sink.seq()])
    if decider is None:
        assert out[0] == "err" and out[1] == Boom(5)
    else:
        kept = [x for x in DATA if x not in (5, 22, 31)]
        assert out == ("ok", tuple([x for x in kept if x % 3 == i] for i in range(3)))


@pytest.mark.parametrize("seed", range(3))
def test_partition_under_random_demand(seed):
    def graph():
        def build(b, probe):
            st = b.add(Partition(2, lambda x: x % 2))
            Source.from_iterable(DATA).map(lambda x: x) >> st.in_
            st.out(0) >> Flow().map(lambda x: x) >> probe.in_
            st.out(1) >> Sink.ignore()
            return ClosedShape

        return RunnableGraph.from_graph(GraphDSL.create(build, TestSink.probe()))

    for s in ALL_SETTINGS:
        events = drive(graph, seed, **s)
        assert events == [("next", x) for x in DATA if x % 2 == 0] + [("complete",)], s


@pytest.mark.parametrize("settings", ALL_SETTINGS)
def test_partition_holds_signals_behind_waiting_elements(settings):
    items = [W(0)] + list(range(1, 8)) + [W(8)] + list(range(8, 20)) + [Barrier(1)] + list(range(20, 25)) + [W(30)]
    outs = _run_graph(_fan_out_of(lambda: Partition(2, lambda x: int(x % 5 == 0)), [Recording(1), Recording(3)],
                                  source=Source.from_graph(Scripted(items))), **settings)
    for i, o in enumerate(outs):
        assert signals_of(o) == signals_of(items)
        assert [x for x in o if not isinstance(x, Signal)] == [
            x for x in items if not isinstance(x, Signal) and int(x % 5 == 0) == i]
        for j, x in enumerate(o):
            if isinstance(x, Signal):
                k = items.index(x)
                before = {y for y in items[:k] if not isinstance(y, Signal)}
                mine = {y for y in o if not isinstance(y, Signal)}
                assert {y for y in o[:j] if not isinstance(y, Signal)} == before & mine, (x, o)


@pytest.mark.parametrize("settings", ALL_SETTINGS)
def test_unzip_splits_chunks_into_columns(settings):
    pairs = [(x, -x) for x in DATA]
    outs = _run_graph(_fan_out_of(Unzip, [Recording(1), Recording(5)], pairs), **settings)
    assert outs == (DATA, [-x for x in DATA])
    outs = _run_graph(_fan_out_of(lambda: UnzipWith(lambda x: (x, x * 2, str(x)), 3),
                                  [Recording(2), Sink.seq(), Recording(7)], DATA), **settings)
    assert outs == (DATA, [x * 2 for x in DATA], [str(x) for x in DATA])


@pytest.mark.parametrize("settings", ALL_SETTINGS)
def test_unzip_with_failure_fails_every_outlet(settings):
    def fn(x):
        if x == 17:
            raise Boom(x)
        return (x, x)

    g = _fan_out_of(lambda: UnzipWith(fn, 2), [Sink.seq(), Sink.seq()], DATA)
    with pytest.raises(Boom):
        _run_graph(g, **settings)


def _concat_of(inputs, detached=True, sink=None, sources=None):
    from atoll import Concat

    def build(b, s):
        c = b.add(Concat(len(inputs if sources is None else sources), detached_inputs=detached))
        for i, src in enumerate(sources if sources is not None else [Source.from_iterable(xs) for xs in inputs]):
            src >> c.in_(i)
        c.out >> s.in_
        return ClosedShape

    return RunnableGraph.from_graph(GraphDSL.create(build, sink if sink is not None else Sink.seq()))


CONCAT_INPUTS = [list(range(0, 7)), [], list(range(100, 130)), [1000]]


@pytest.mark.parametrize("settings", ALL_SETTINGS)
@pytest.mark.parametrize("detached", [True, False])
@pytest.mark.parametrize("sink_chunk", [1, 4, 100])
def test_concat_in_order(settings, detached, sink_chunk):
    log = _run_graph(_concat_of(CONCAT_INPUTS, detached, Recording(sink_chunk)), **settings)
    assert log == sum(CONCAT_INPUTS, [])


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("detached", [True, False])
def test_concat_under_random_demand(seed, detached):
    from atoll import Concat

    def graph():
        def build(b, s):
            c = b.add(Concat(3, detached_inputs=detached))
            for i, xs in enumerate(CONCAT_INPUTS[:3]):
                Source.from_iterable(xs).map(lambda x: x) >> c.in_(i)
            c.out >> Flow().map(lambda x: x) >> s.in_
            return ClosedShape

        return RunnableGraph.from_graph(GraphDSL.create(build, TestSink.probe()))

    want = [("next", x) for x in sum(CONCAT_INPUTS[:3], [])] + [("complete",)]
    for s in ALL_SETTINGS:
        assert drive(graph, seed, **s) == want, s


@pytest.mark.parametrize("settings", ALL_SETTINGS)
def test_concat_failure_of_the_active_input_after_its_elements(settings):
    failing = Source.from_iterable(DATA).map(lambda x: x if x != 20 else 1 // 0)
    g = _concat_of(None, False, Recording(3), sources=[Source.from_iterable([1, 2]), failing])
    with pytest.raises(ZeroDivisionError):
        _run_graph(g, **settings)


@pytest.mark.parametrize("settings", ALL_SETTINGS)
def test_concat_signals(settings):
    a = [1, 2, W(3), 3, 4, 5, W(6)]
    b = [10, W(4), 11, 12, W(7), 13]
    log = _run_graph(_concat_of(None, True, Recording(2),
                                sources=[Source.from_graph(Scripted(a)), Source.from_graph(Scripted(b))]), **settings)
    assert [x for x in log if not isinstance(x, Signal)] == [1, 2, 3, 4, 5, 10, 11, 12, 13]
    marks = [x.timestamp for x in log if isinstance(x, Watermark)]
    assert marks == sorted(marks)
