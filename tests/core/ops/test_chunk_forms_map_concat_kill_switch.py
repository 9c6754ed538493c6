"""Chunk forms of ``map_concat`` and of the kill switch stages keep the per-element semantics: every
run is compared with ``Materializer.local(fusion=False)`` (element connections only) between a chunked
source and sink (several chunk sizes) and between probes with random demand; supervision, completion
after the pending outputs, the switch's shutdown/abort and the place of control signals are checked too.
The randomized cases are in ``tests/core/test_chunk_parity_map_concat_kill_switch.py``."""
from __future__ import annotations

import itertools

import pytest

from atoll.stage import NO_STATE

from atoll import Attributes, Flow, Keep, KillSwitches, Materializer, Sink, Source
from atoll.errors import NonFailureCancellation, PortStateError
from atoll._impl.ops import kill_switch as ks_mod
from atoll._impl.ops import transform as transform_mod
from atoll.stage.signals import Barrier, Signal, Watermark
from atoll.testkit import TestSink, TestSource
from atoll.testkit.signals import Recording
from atoll.testkit.signals import coalesce_watermarks
from chunk_kit import CHUNK_SETTINGS, Boom, check, check_chunked, check_signals, restarting, resuming

W = Watermark
ALL_SETTINGS = [dict(fusion=False)] + CHUNK_SETTINGS


def _flat(items, expand):
    """The log a correct map_concat gives: each element replaced by its outputs, signals in place."""
    out = []
    for x in items:
        if isinstance(x, Signal):
            out.append(x)
        else:
            out.extend(expand(x))
    return out


DATA = list(range(0, 30))


# ============================================================================================ map_concat
def test_map_concat_chunk_form_is_used_between_chunk_neighbours_and_within_demand(monkeypatch):
    pushed = []
    orig = transform_mod._MapConcatLogic.push_chunk

    def push_chunk(self, out, chunk):
        pushed.append(len(chunk))
        orig(self, out, chunk)

    monkeypatch.setattr(transform_mod._MapConcatLogic, "push_chunk", push_chunk)
    m = Materializer.local(chunk_size=1024)
    try:
        log = Source.from_iterable([7, 0, 5]).map_concat(lambda x: [x] * x).run_with(Recording(3), m).result(10)
    finally:
        m.shutdown()
    assert log == [7] * 7 + [5] * 5
    # the recording sink asks for 3 per pull: a 7-element expansion goes out as 3, 3, 1
    assert pushed == [3, 3, 1, 3, 2]


EXPANSIONS = {
    "repeat": lambda x: [x] * (x % 4),
    "empty": lambda x: [],
    "one": lambda x: (x,),
    "generator": lambda x: (x * 10 + j for j in range(x % 5)),
    "string": lambda x: str(x),
    "long": lambda x: range(x, x + 40),
}


@pytest.mark.parametrize("name", sorted(EXPANSIONS))
def test_map_concat_matches_the_element_form(name):
    fn = EXPANSIONS[name]
    assert check(lambda f: f.map_concat(fn), DATA) == ("ok", [y for x in DATA for y in fn(x)])


def _raising_fn(bad):
    def fn(x):
        if x in bad:
            raise Boom("fn", x)
        return [x, x + 100]
    return fn


def _raising_iter(bad):
    def fn(x):
        def gen():
            yield x
            yield x + 100
            if x in bad:
                raise Boom("iter", x)
            yield x + 200
        return gen()
    return fn


def _none_in_iter(bad):
    def fn(x):
        return [x, None, x + 100] if x in bad else [x, x + 100]
    return fn


@pytest.mark.parametrize("decider", [None, resuming, restarting])
def test_map_concat_supervises_fn_per_element(decider):
    out = check(lambda f: f.map_concat(_raising_fn({3, 4, 17})), DATA, decider)
    if decider is None:
        assert out == ("err", Boom("fn", 3))
    else:
        assert out == ("ok", [y for x in DATA if x not in (3, 4, 17) for y in (x, x + 100)])


@pytest.mark.parametrize("decider", [None, resuming, restarting])
def test_map_concat_supervises_the_iteration_per_element(decider):
    # Resume/Restart drop the rest of the failing element's outputs, the ones before the failure stay
    out = check(lambda f: f.map_concat(_raising_iter({2, 9})), DATA, decider)
    if decider is None:
        assert out == ("err", Boom("iter", 2))
    else:
        want = []
        for x in DATA:
            want += [x, x + 100] + ([] if x in (2, 9) else [x + 200])
        assert out == ("ok", want)


@pytest.mark.parametrize("decider", [None, resuming, restarting])
def test_map_concat_supervises_a_none_output(decider):
    out = check(lambda f: f.map_concat(_none_in_iter({5, 6})), DATA, decider)
    if decider is None:
        assert out[0] == "err" and type(out[1]) is PortStateError
    else:
        assert out == ("ok", [y for x in DATA for y in ([x] if x in (5, 6) else [x, x + 100])])


def test_map_concat_fails_on_a_non_iterable_result_after_the_outputs_before_it():
    out = check(lambda f: f.map_concat(lambda x: [x] if x != 6 else 6), DATA)
    assert out[0] == "err" and type(out[1]) is TypeError
    assert check(lambda f: f.map_concat(lambda x: [x] if x != 6 else 6), DATA, resuming) == (
        "ok", [x for x in DATA if x != 6])


def test_map_concat_upstream_failure_after_the_outputs_before_it():
    def pre():
        return Flow().map(lambda x: x if x != 20 else 1 // 0)

    got = check_chunked(lambda f: f.map_concat(lambda x: [x, x]), DATA, pre=pre)
    assert got[0] == "err" and type(got[1]) is ZeroDivisionError
    got = check_chunked(lambda f: f.map_concat(lambda x: [x, x]), DATA, pre=pre, sink=lambda: Recording(3))
    assert got[0] == "err" and type(got[1]) is ZeroDivisionError


def _logging_gen(produced):
    def fn(x):
        def gen():
            for j in range(x):
                produced.append((x, j))
                yield x * 100 + j
        return gen()
    return fn


@pytest.mark.parametrize("settings", ALL_SETTINGS)
def test_map_concat_keeps_the_rest_of_an_iterable_for_the_next_pull(settings):
    produced = []
    m = Materializer.local(**settings)
    try:
        probe = (Source.from_iterable([5, 3]).map(lambda x: x).map_concat(_logging_gen(produced))
                 .map(lambda x: x).run_with(TestSink.probe(), m))
        probe.request(2)
        probe.expect_next(500, 501)
        assert produced == [(5, 0), (5, 1), (5, 2)]  # one element ahead of the last one pushed
        probe.request(4)
        probe.expect_next(502, 503, 504, 300)
        assert produced == [(5, j) for j in range(5)] + [(3, 0), (3, 1)]
        probe.request(5)
        probe.expect_next(301, 302)
        probe.expect_complete()
    finally:
        m.shutdown()


@pytest.mark.parametrize("settings", ALL_SETTINGS)
def test_map_concat_asks_upstream_only_for_the_inputs_the_demand_needs(settings):
    read = []

    def source():
        for x in range(100):
            read.append(x)
            yield x

    m = Materializer.local(**settings)
    try:
        probe = (Source.from_iterator(source).map(lambda x: x).map_concat(lambda x: [x] * 3)
                 .map(lambda x: x).run_with(TestSink.probe(), m))
        probe.request(7)
        for x in (0, 0, 0, 1, 1, 1, 2):
            probe.expect_next(x)
        probe.cancel()
    finally:
        m.shutdown()
    assert read == [0, 1, 2]


@pytest.mark.parametrize("settings", ALL_SETTINGS)
def test_map_concat_completes_only_after_its_pending_outputs(settings):
    m = Materializer.local(**settings)
    try:
        src, sink = (TestSource.probe().map(lambda x: x).map_concat(lambda x: [x] * x).map(lambda x: x)
                     .to_mat(TestSink.probe(), Keep.both).run(m))
        sink.request(2)
        src.send_next(4)
        sink.expect_next(4, 4)
        src.send_complete()
        sink.request(2)  # an early completion would come instead of these elements
        sink.expect_next(4, 4)
        sink.expect_complete()
    finally:
        m.shutdown()


@pytest.mark.parametrize("settings", ALL_SETTINGS)
def test_map_concat_iteration_failure_comes_with_the_demand_for_its_element(settings):
    m = Materializer.local(**settings)
    try:
        src, sink = (TestSource.probe().map(lambda x: x).map_concat(_raising_iter({1})).map(lambda x: x)
                     .to_mat(TestSink.probe(), Keep.both).run(m))
        sink.request(2)
        src.send_next(1)
        sink.expect_next(1, 101)
        sink.request(1)  # the element whose production fails
        sink.expect_error(Boom("iter", 1))
        assert src.expect_cancellation() == Boom("iter", 1)
    finally:
        m.shutdown()


@pytest.mark.parametrize("settings", ALL_SETTINGS)
def test_map_concat_of_an_endless_iterable_under_take(settings):
    m = Materializer.local(**settings)
    try:
        out = (Source.from_iterable([1, 2]).map(lambda x: x).map_concat(lambda x: itertools.count(x))
               .map(lambda x: -x).take(5).run_with(Sink.seq(), m).result(10))
    finally:
        m.shutdown()
    assert out == [-1, -2, -3, -4, -5]


def test_map_concat_state_hooks():
    logic = transform_mod.MapConcat(lambda x: [x]).create_logic(Attributes.none)
    state = logic.save_to_snapshot()  # nothing pending: no outputs, no held signals, no inputs
    assert state == {"outputs": [], "held": [], "pending": []}
    logic.reset_state()
    logic.restore_from_snapshot(state)
    assert logic.ready_for_snapshot()


# ---------------------------------------------------------------------------------------------- signals
SIGNAL_ITEMS = [W(0), 1, 2, W(5), 3, Barrier(1), 4, 0, 5, W(7), 6, 7, 8, W(9), W(10), 9, Barrier(2)]


@pytest.mark.parametrize("name", ["repeat", "empty", "one", "generator", "long"])
def test_map_concat_signals_follow_the_outputs_of_the_elements_before_them(name):
    fn = EXPANSIONS[name]
    assert check_signals(lambda f: f.map_concat(fn), SIGNAL_ITEMS) == coalesce_watermarks(_flat(SIGNAL_ITEMS, fn))


@pytest.mark.parametrize("decider", [resuming, restarting])
def test_map_concat_signals_behind_a_resumed_iteration(decider):
    # the failing element's rest is dropped; the signals after it go out right after its outputs
    def op(f):
        return f.map_concat(_raising_iter({3, 5})).with_attributes(Attributes.supervision_strategy(decider))

    def expand(x):
        return [x, x + 100] + ([] if x in (3, 5) else [x + 200])

    assert check_signals(op, SIGNAL_ITEMS) == coalesce_watermarks(_flat(SIGNAL_ITEMS, expand))


def test_map_concat_signals_after_the_last_element_arrive_before_completion():
    items = [1, 2, W(3), Barrier(4)]
    assert check_signals(lambda f: f.map_concat(lambda x: [x] * 3), items) == [1, 1, 1, 2, 2, 2, W(3), Barrier(4)]


def test_map_concat_element_form_holds_a_signal_behind_pending_outputs():
    logic = transform_mod.MapConcat(lambda x: [x] * 3).create_logic(Attributes.none)
    sent = []
    logic.forward_signal = sent.append
    logic.it = iter([7, 7])
    logic.nxt = 7
    logic.on_signal(W(1))
    assert sent == [] and logic.held == [W(1)]
    logic.nxt = transform_mod._NOTHING
    logic.it = None
    logic._release()
    assert sent == [W(1)] and logic.held == []
    logic.on_signal(W(2))  # nothing pending: on at once
    assert sent == [W(1), W(2)]


# ============================================================================================ kill switch
def test_kill_switch_chunk_form_passes_chunks_unchanged(monkeypatch):
    seen = []
    orig = ks_mod._KillSwitchLogic.on_push_chunk

    def on_push_chunk(self):
        seen.append(list(self._in_conns[0].slot))
        orig(self)

    monkeypatch.setattr(ks_mod._KillSwitchLogic, "on_push_chunk", on_push_chunk)
    m = Materializer.local(chunk_size=1024)
    try:
        log = (Source.range(0, 10).via(KillSwitches.single()).via(KillSwitches.shared("s").flow())
               .run_with(Recording(4), m).result(10))
    finally:
        m.shutdown()
    assert log == list(range(10))
    assert seen == [[0, 1, 2, 3], [0, 1, 2, 3], [4, 5, 6, 7], [4, 5, 6, 7], [8, 9], [8, 9]]


@pytest.mark.parametrize("shared", [False, True])
def test_kill_switch_passes_everything_and_completes_with_upstream(shared):
    def op(f):
        return f.via(KillSwitches.shared("p").flow() if shared else KillSwitches.single()).map(lambda x: x + 1)

    assert check(op, DATA) == ("ok", [x + 1 for x in DATA])


def test_kill_switch_upstream_failure_after_the_elements_before_it():
    def pre():
        return Flow().map(lambda x: x if x != 20 else 1 // 0)

    got = check_chunked(lambda f: f.via(KillSwitches.single()), DATA, pre=pre, sink=lambda: Recording(3))
    assert got[0] == "err" and type(got[1]) is ZeroDivisionError


def _switched(settings, read):
    def source():
        for x in range(1000):
            read.append(x)
            yield x

    m = Materializer.local(**settings)
    switch, probe = (Source.from_iterator(source).map(lambda x: x).via_mat(KillSwitches.single(), Keep.right)
                     .map(lambda x: x).to_mat(TestSink.probe(), Keep.both).run(m))
    return m, switch, probe


@pytest.mark.parametrize("abort", [False, True])
def test_kill_switch_under_bounded_demand_reads_exactly_what_the_element_form_reads(abort):
    results = []
    for s in ALL_SETTINGS:
        read = []
        m, switch, probe = _switched(s, read)
        try:
            probe.request(3)
            probe.expect_next(0, 1, 2)
            probe.request(5)
            probe.expect_next(3, 4, 5, 6, 7)
            if abort:
                switch.abort(Boom("abort"))
                probe.expect_error(Boom("abort"))
            else:
                switch.shutdown()
                probe.expect_complete()
            switch.shutdown()  # ignored: the first call wins
        finally:
            m.shutdown()
        results.append(read)
    assert all(r == list(range(8)) for r in results), results


@pytest.mark.parametrize("settings", ALL_SETTINGS)
@pytest.mark.parametrize("abort", [False, True])
def test_kill_switch_with_demand_outstanding(settings, abort):
    m = Materializer.local(**settings)
    try:
        (src, switch), sink = (TestSource.probe().map(lambda x: x).via_mat(KillSwitches.single(), Keep.both)
                               .map(lambda x: x).to_mat(TestSink.probe(), Keep.both).run(m))
        sink.request(10)
        src.send_next(1)
        src.send_next(2)
        sink.expect_next(1, 2)
        if abort:
            switch.abort(Boom("abort"))
            assert src.expect_cancellation() == Boom("abort")
            sink.expect_error(Boom("abort"))
        else:
            switch.shutdown()
            assert isinstance(src.expect_cancellation(), NonFailureCancellation)
            sink.expect_complete()
    finally:
        m.shutdown()


@pytest.mark.parametrize("settings", ALL_SETTINGS)
@pytest.mark.parametrize("abort", [False, True])
def test_kill_switch_used_while_a_chunk_is_under_way(settings, abort):
    # the switch is used by an upstream stage's function while it works on a chunk: the elements
    # before the switch took effect arrive in order and complete, nothing after them
    switch = KillSwitches.shared("mid")

    def fn(x):
        if x == 50:
            switch.abort(Boom("mid")) if abort else switch.shutdown()
        return x

    m = Materializer.local(**settings)
    try:
        fut = Source.range(0, 100000).map(fn).via(switch.flow()).map(lambda x: x).run_with(Sink.seq(), m)
        if abort:
            assert fut.exception(10) == Boom("mid")
        else:
            out = fut.result(10)
            assert out == list(range(len(out))) and len(out) < 100000
    finally:
        m.shutdown()


@pytest.mark.parametrize("settings", ALL_SETTINGS)
def test_kill_switch_used_before_the_stream_reads_nothing(settings):
    read = []

    def source():
        for x in range(10):
            read.append(x)
            yield x

    switch = KillSwitches.shared("early")
    switch.shutdown()
    m = Materializer.local(**settings)
    try:
        out = Source.from_iterator(source).map(lambda x: x).via(switch.flow()).run_with(Sink.seq(), m).result(10)
    finally:
        m.shutdown()
    assert out == [] and read == []


@pytest.mark.parametrize("shared", [False, True])
def test_kill_switch_signals_keep_their_place(shared):
    def op(f):
        return f.via(KillSwitches.shared("sig").flow() if shared else KillSwitches.single())

    assert check_signals(op, SIGNAL_ITEMS) == coalesce_watermarks(SIGNAL_ITEMS)


def test_kill_switch_logic_is_module_level_and_stateless():
    stage = ks_mod.KillSwitchStage()
    logic, switch = stage.create_logic_and_materialized_value(Attributes.none)
    assert type(logic) is ks_mod._KillSwitchLogic and logic.chunk_capable()
    assert logic.signal is switch._signal and logic.save_to_snapshot() is NO_STATE


def test_stateful_map_concat_holds_signals_behind_its_pending_outputs_too():
    # stateful_map_concat has no chunk form (it runs between adapters) but shares the element form
    class Acc:
        def __init__(self):
            self.seen = 0

        def __call__(self, x):
            self.seen += 1
            return [x] * (x % 3)

        def on_complete(self):
            return [-self.seen]

    log = check_signals(lambda f: f.stateful_map_concat(Acc), SIGNAL_ITEMS)
    elements = [x for x in SIGNAL_ITEMS if not isinstance(x, Signal)]
    assert log == coalesce_watermarks(_flat(SIGNAL_ITEMS, lambda x: [x] * (x % 3)) + [-len(elements)])
