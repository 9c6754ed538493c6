"""Event time across a restore: the watermarks that waited among the elements at the cut, and the event time the
kernel keeps for a stage (its clock and event timers, a fan-in's watermark valve), come back exactly.

Before, a cut recorded the elements waiting in an island (in connections, in pending emits, in an input
boundary's buffer, in a logged channel) but dropped the watermarks between them, and a restored stage heard time
start again from ``-inf``. Behind a channel boundary that changed results: a restored window met the re-pushed
elements under the older watermark of the cut, so elements that had been late were taken (a session grew from
``[30, 60)`` to ``[30, 63)``), and a custom stage's event timers were gone. ``Trace`` records, per element, the
timestamp it carries and the watermark its stage heard before it: the restored run must see exactly what the
uninterrupted one saw."""
from __future__ import annotations

import pickle
import random

import pytest

from atoll import (Aggregate, Flow, FlowShape, GraphStage, GraphStageLogic, InHandler, Inlet, Keep, OutHandler,
                   Outlet, Source)
from atoll._impl.islands.event_time_state import event_time_state, restore_event_time_state
from atoll.stage.signal_alignment import FanInAlignment
from atoll.stage.signals import IDLE, Watermark
from atoll.testkit.round_trip import checkpoint_round_trip


class Trace(GraphStage):
    """Emits ``(element, its timestamp, the watermark this stage heard before it)``; keeps no state of its own."""

    stateless = True

    def __init__(self):
        self.in_, self.out = Inlet("trace.in"), Outlet("trace.out")
        self.shape = FlowShape(self.in_, self.out)

    def create_logic(self, attributes):
        stage = self

        class Logic(GraphStageLogic, InHandler, OutHandler):
            stateless = True

            def __init__(self):
                super().__init__(stage.shape)
                self.set_handlers(stage.in_, stage.out, self)

            def on_push(self):
                e = self.grab(stage.in_)
                self.push(stage.out, (e, self.current_timestamp, self.current_watermark))

            def on_pull(self):
                self.pull(stage.in_)

        return Logic()


def _timestamps(n=120, seed=1):
    """Timestamps 3 apart with disorder, every 7th one 40 behind (late under a bound of 0)."""
    r = random.Random(seed)
    return [3 * i + r.randint(0, 10) - (40 if i % 7 == 6 else 0) for i in range(n)]


TS = _timestamps()


def _traced(island: bool):
    def make():
        s = Source.from_iterable(TS).with_timestamps(lambda t: t, max_out_of_orderness=0)
        if island:
            s = s.island()
        return s.via(Flow.from_graph(Trace()))
    return make


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("island", [True, False])
@pytest.mark.parametrize("at", [0, 10, 50])
def test_every_element_meets_the_same_watermark_after_a_restore(at, island, fusion, tmp_path):
    expected, got = checkpoint_round_trip(_traced(island), at, storage=str(tmp_path), fusion=fusion)
    assert got == expected
    assert {w for _e, _t, w in expected[at + 1:]} != {float("-inf")}  # watermarks did travel after the cut


def _events(n=140, seed=4):
    """(ts, key, value): keys k0..k3, timestamps ~3 apart with disorder, every 9th element 30-60 behind."""
    r = random.Random(seed)
    out = []
    for i in range(n):
        ts = 3 * i + r.randint(0, 5)
        if i % 9 == 8:
            ts -= r.randint(30, 60)
        out.append((ts, "k%d" % r.randrange(4), r.randint(0, 20)))
    return out


EVENTS = _events()


def _windows(kind: str):
    def make():
        s = Source.from_iterable(EVENTS).with_timestamps(lambda e: e[0], max_out_of_orderness=0).island()
        kw = dict(key=lambda e: e[1], aggregate=Aggregate.max(lambda e: e[2]))
        if kind == "session":
            s = s.session_window(15, **kw)
        elif kind == "tumbling":
            s = s.tumbling_window(20, allowed_lateness=20, **kw)
        else:
            s = s.sliding_window(20, 5, allowed_lateness=10, **kw)
        return s.map(lambda w: (w.key, w.start, w.end, w.value, w.timing))
    return make


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("kind", ["session", "tumbling", "sliding"])
@pytest.mark.parametrize("at", [0, 12])
def test_windows_behind_a_channel_restore_with_the_same_late_decisions(kind, at, fusion, tmp_path):
    # windows fired at one watermark may come out in another order (chunks coalesce watermarks differently
    # after a restore); which windows, with which values and timings, may not change
    expected, got = checkpoint_round_trip(_windows(kind), at, storage=str(tmp_path), fusion=fusion)
    assert sorted(got) == sorted(expected)


class TimerEcho(GraphStage):
    """Schedules an event timer at ``ts + 15`` for every element (keyed by the element) and emits
    ``("timer", element, ts)`` when it fires; elements themselves are not passed on, and it pulls only while fewer
    than 4 records wait (so a cut finds timers armed). Saves only its queue: its timers are the kernel's to keep."""

    def __init__(self):
        self.in_, self.out = Inlet("echo.in"), Outlet("echo.out")
        self.shape = FlowShape(self.in_, self.out)

    def create_logic(self, attributes):
        stage = self

        class Logic(GraphStageLogic, InHandler, OutHandler):
            def __init__(self):
                super().__init__(stage.shape)
                self.queue = []
                self.set_handlers(stage.in_, stage.out, self)

            def pre_start(self):
                self.pull(stage.in_)

            def on_push(self):
                e = self.grab(stage.in_)
                self.schedule_event_timer(e, self.current_timestamp + 15)
                self._pull_more()

            def on_event_timer(self, key, ts):
                self.queue.append(("timer", key, ts))
                self.on_pull()

            def on_pull(self):
                if self.queue and self.is_available(stage.out):
                    self.push(stage.out, self.queue.pop(0))
                self._pull_more()

            def _pull_more(self):
                if len(self.queue) < 4 and not self.has_been_pulled(stage.in_) and not self.is_closed(stage.in_):
                    self.pull(stage.in_)

            def on_upstream_finish(self):
                self.fire_remaining_event_timers()
                self.emit_multiple(stage.out, self.queue)
                self.queue = []
                self.complete_stage()

            def save_to_snapshot(self):
                return list(self.queue)

            def restore_from_snapshot(self, state):
                self.queue = list(state)

        return Logic()


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("at", [0, 5, 30])
def test_event_timers_of_a_custom_stage_survive_a_restore(at, fusion, tmp_path):
    def make():
        return (Source.from_iterable(list(range(0, 600, 3))).with_timestamps(lambda t: t)
                .via(Flow.from_graph(TimerEcho())))

    expected, got = checkpoint_round_trip(make, at, storage=str(tmp_path), fusion=fusion)
    assert expected == [("timer", t, t + 15) for t in range(0, 600, 3)]
    assert got == expected


@pytest.mark.parametrize("fusion", [True, False])
@pytest.mark.parametrize("at", [0, 8, 40])
def test_a_zip_goes_on_from_the_watermark_it_had_after_a_restore(at, fusion, tmp_path):
    # where watermarks fall among a fan-in's elements depends on demand (a watermark needs none), so the gated run
    # and the uninterrupted one may differ; what a restore must keep: no element after it meets an older watermark
    # than one before it (the Zip's valve and clocks come back), and the same elements
    def make():
        a = Source.from_iterable(TS).with_timestamps(lambda t: t, max_out_of_orderness=5)
        b = Source.from_iterable([t + 7 for t in TS]).with_timestamps(lambda t: t, max_out_of_orderness=2)
        return a.zip(b).via(Flow.from_graph(Trace()))

    expected, got = checkpoint_round_trip(make, at, storage=str(tmp_path), fusion=fusion)
    assert [(e, t) for e, t, _w in got] == [(e, t) for e, t, _w in expected]
    seen = [w for _e, _t, w in got]
    assert seen == sorted(seen)


class _Conn:
    def __init__(self):
        self.state = 0


class _FanIn:
    """Just what the fan-in alignment and its valve read of a logic with two inlets; records what it hears."""

    def __init__(self):
        self._in_conns = [_Conn(), _Conn()]
        self._event_clock = None
        self._alignment = None
        self.heard = []

    def on_signal(self, signal):
        self.heard.append(signal)


def test_the_watermark_valve_of_a_fan_in_is_saved_and_restored():
    a = _FanIn()
    align = a._alignment = FanInAlignment(a)
    for idx, sig in [(0, Watermark(10)), (1, Watermark(4)), (1, Watermark(7)), (0, IDLE), (0, Watermark(12))]:
        align.on_signal(idx, sig)
    assert a.heard == [Watermark(4), Watermark(7)]  # inlet 0 went idle at 10 and came back at 12
    state = pickle.loads(pickle.dumps(event_time_state(a)))
    b = _FanIn()
    restore_event_time_state(b, state)
    va, vb = a._alignment.valve, b._alignment.valve
    assert (vb.marks, vb.idle, vb.aligned, vb.last, vb.output_idle) == (va.marks, va.idle, va.aligned, va.last,
                                                                        va.output_idle)
    a.heard, b.heard = [], []
    for x in (a, b):  # inlet 1 catches up: both hear the new minimum, neither waits for inlet 0 to repeat its 12
        x._alignment.on_signal(1, Watermark(15))
    assert a.heard == b.heard == [Watermark(12)]
