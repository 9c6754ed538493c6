"""TimerGraphStageLogic: named timers delivered on the island's thread (Pekko's GraphStageTimersSpec).

Timers read time through their host (``host.now()``). The bare-interpreter cases run on the kit
host's virtual time, so "fires after 0.5 s, not before" is checked exactly and without waiting. The
running-stream cases run under ``Materializer.local(clock=ManualClock())``: virtual time moves only
with ``clock.advance`` (or a probe's ``expect_no_message``), so they contain no real waits for timers.
"""
from __future__ import annotations

import pytest

from atoll import Materializer, TimerGraphStageLogic
from atoll.errors import IllegalStateError
from atoll.testkit import ManualClock, TestSink, TestSource, assert_all_stages_stopped

from interpreter_kit import Kit, OnComplete, OnNext, linear
from stage_helpers import Boom, LinearStage


@pytest.fixture
def kit():
    return Kit(record_sources=False)


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
def manual_mat(clock):
    m = Materializer.local(clock=clock)
    yield m
    try:
        assert_all_stages_stopped(m, timeout=5.0)
    finally:
        m.shutdown()


class TimerTestLogic(TimerGraphStageLogic):
    """Pass-through; ``on_timer`` records ``(key, tick, now)``; a few keys have special behaviour
    (as Pekko's TestStage): "resubmit" reschedules itself once, "repeated" cancels itself at tick 5."""

    def __init__(self, stage, kit):
        super().__init__(stage.shape)
        self.in_, self.out = stage.in_, stage.out
        self.kit = kit
        self.ticks = []
        self.set_handler(stage.in_, _InH(lambda: self.push(self.out, self.grab(self.in_))))
        self.set_handler(stage.out, _OutH(lambda: self.pull(self.in_)))
        self.control = self.get_async_callback(lambda fn: fn(self))

    def on_timer(self, key):
        tick = len(self.ticks) + 1
        self.ticks.append((key, tick, self.kit.host.now()))
        if key == "resubmit" and tick == 1:
            self.schedule_once("resubmit", 0.5)
        elif key == "repeated" and tick == 5:
            self.cancel_timer("repeated")
        elif key == "boom":
            raise Boom("Expected exception to the rule")


def _InH(on_push):
    from atoll import InHandler

    return InHandler(on_push=on_push)


def _OutH(on_pull):
    from atoll import OutHandler

    return OutHandler(on_pull=on_pull)


def _setup(kit):
    up, (logic,), down = linear(kit, [LinearStage("timers", lambda st: TimerTestLogic(st, kit))])
    kit.init()
    kit.run()
    return up, logic, down


def _do(kit, logic, fn):
    """Run ``fn(logic)`` on the island (through the logic's async callback)."""
    logic.control.invoke(fn)
    kit.run()


def test_single_shot_timer(kit):
    up, logic, down = _setup(kit)
    _do(kit, logic, lambda l: l.schedule_once("single", 0.5))
    assert logic.is_timer_active("single")
    kit.host.advance(0.499)
    assert logic.ticks == []
    kit.host.advance(0.001)
    assert logic.ticks == [("single", 1, 0.5)]
    assert not logic.is_timer_active("single")
    kit.host.advance(5)
    assert len(logic.ticks) == 1
    up.on_complete()


def test_resubmit_single_shot_timer(kit):
    up, logic, down = _setup(kit)
    _do(kit, logic, lambda l: l.schedule_once("resubmit", 0.5))
    kit.host.advance(0.5)
    assert logic.ticks == [("resubmit", 1, 0.5)]
    assert logic.is_timer_active("resubmit")
    kit.host.advance(0.5)
    assert logic.ticks == [("resubmit", 1, 0.5), ("resubmit", 2, 1.0)]
    kit.host.advance(5)
    assert len(logic.ticks) == 2
    up.on_complete()


def test_cancel_a_named_timer(kit):
    up, logic, down = _setup(kit)

    def cancel_then_reschedule(l):
        l.schedule_once("cancel", 0.001)
        l.cancel_timer("cancel")
        assert not l.is_timer_active("cancel")
        l.schedule_once("cancel", 0.5)

    _do(kit, logic, cancel_then_reschedule)
    kit.host.advance(0.3)
    assert logic.ticks == []
    kit.host.advance(0.2)
    assert logic.ticks == [("cancel", 1, 0.5)]
    kit.host.advance(5)
    assert len(logic.ticks) == 1
    up.on_complete()


def test_repeated_timer_with_fixed_delay_cancelled_from_on_timer(kit):
    up, logic, down = _setup(kit)
    _do(kit, logic, lambda l: l.schedule_with_fixed_delay("repeated", 0.1, 0.1))
    kit.host.advance(2)
    assert [(k, n) for k, n, _ in logic.ticks] == [("repeated", n) for n in range(1, 6)]
    assert [round(t, 6) for *_, t in logic.ticks] == [0.1, 0.2, 0.3, 0.4, 0.5]
    assert not logic.is_timer_active("repeated")
    assert kit.host.active_timers == []
    up.on_complete()


def test_fixed_delay_counts_from_the_handled_firing_and_fixed_rate_from_the_schedule(kit):
    up, logic, down = _setup(kit)
    _do(kit, logic, lambda l: (l.schedule_with_fixed_delay("delay", 1.0, 1.0), l.schedule_at_fixed_rate("rate", 1.0, 1.0)))
    kit.host.time = 1.5  # the island was busy: both first firings are half a second late
    kit.host.advance(0)
    assert sorted((k, t) for k, _, t in logic.ticks) == [("delay", 1.5), ("rate", 1.5)]
    logic.ticks.clear()
    kit.host.advance(1.0)  # up to 2.5
    assert [(k, t) for k, _, t in logic.ticks] == [("rate", 2.0), ("delay", 2.5)]
    _do(kit, logic, lambda l: (l.cancel_timer("delay"), l.cancel_timer("rate")))
    assert kit.host.active_timers == []
    up.on_complete()


def test_scheduling_with_a_used_key_replaces_the_timer(kit):
    up, logic, down = _setup(kit)
    _do(kit, logic, lambda l: (l.schedule_once("k", 1.0), l.schedule_once("k", 2.0)))
    kit.host.advance(1.5)
    assert logic.ticks == []
    kit.host.advance(0.5)
    assert logic.ticks == [("k", 1, 2.0)]
    kit.host.advance(5)
    assert len(logic.ticks) == 1
    up.on_complete()


def test_stale_firing_of_a_replaced_timer_is_ignored(kit):
    """A host that cannot cancel a scheduled firing: the timer id still filters it out."""
    up, logic, down = _setup(kit)
    kit.host.cancel_scheduled = lambda handle: None
    _do(kit, logic, lambda l: (l.schedule_once("k", 1.0), l.schedule_once("k", 2.0)))
    kit.host.advance(1.0)
    assert logic.ticks == []
    _do(kit, logic, lambda l: l.cancel_timer("k"))
    kit.host.advance(5)
    assert logic.ticks == []
    up.on_complete()


def test_timers_are_cancelled_when_the_stage_stops(kit):
    up, logic, down = _setup(kit)
    _do(kit, logic, lambda l: (l.schedule_once("a", 1.0), l.schedule_with_fixed_delay("b", 1.0, 1.0), l.schedule_at_fixed_rate("c", 1.0, 1.0)))
    assert len(kit.host.active_timers) == 3
    up.on_complete()
    assert logic._finalized
    assert kit.host.active_timers == []
    assert not logic.is_timer_active("a")
    kit.host.advance(10)
    assert logic.ticks == []


def test_on_timer_exception_fails_the_stage(kit):
    up, logic, down = _setup(kit)
    down.request_one()
    kit.last_events()
    _do(kit, logic, lambda l: l.schedule_once("boom", 0.1))
    kit.host.advance(0.1)
    ev = kit.last_events()
    assert {e.kind for e in ev} == {"Cancel", "OnError"}
    assert all(isinstance(e.payload, Boom) for e in ev)
    assert logic._finalized


def test_timers_need_a_running_stage():
    class Early(TimerGraphStageLogic):
        def __init__(self, stage):
            super().__init__(stage.shape)
            self.schedule_once("too-early", 1.0)

    with pytest.raises(IllegalStateError):
        Early(LinearStage("early", lambda st: None))


def test_bad_timer_arguments_are_refused(kit):
    up, logic, down = _setup(kit)
    errors = []

    def bad(l):
        for call in (
            lambda: l.schedule_once("k", -1),
            lambda: l.schedule_with_fixed_delay("k", 0, 0),
            lambda: l.schedule_at_fixed_rate("k", 0, -1),
        ):
            try:
                call()
            except ValueError as e:
                errors.append(e)

    _do(kit, logic, bad)
    assert len(errors) == 3
    assert kit.host.active_timers == []
    up.on_complete()


class TickLogic(TimerGraphStageLogic):
    """Pekko's TestStage2: ticks every ``interval`` s, pushes the tick count if pulled, stops after 3.
    With ``on_first_pull`` the ticking starts at the first pull instead of in ``pre_start``."""

    interval = 0.1
    on_first_pull = False

    def __init__(self, stage):
        super().__init__(stage.shape)
        self.out = stage.out
        self.tick_count = 0
        self.started = False
        from atoll import InHandler, OutHandler

        self.set_handler(stage.out, OutHandler(on_pull=self._pulled, on_downstream_finish=lambda cause: self.complete_stage()))
        self.set_handler(
            stage.in_,
            InHandler(on_push=lambda: None, on_upstream_finish=self.complete_stage, on_upstream_failure=self.fail_stage),
        )

    def pre_start(self):
        if not self.on_first_pull:
            self.schedule_with_fixed_delay("tick", self.interval, self.interval)

    def _pulled(self):
        if self.on_first_pull and not self.started:
            self.started = True
            self.schedule_with_fixed_delay("tick", self.interval, self.interval)

    def on_timer(self, key):
        self.tick_count += 1
        if self.is_available(self.out):
            self.push(self.out, self.tick_count)
        if self.tick_count == 3:
            self.cancel_timer("tick")


def test_scheduled_ticks_on_the_bare_interpreter(kit):
    up, (logic,), down = linear(kit, [LinearStage("ticks", TickLogic)])
    kit.init()
    kit.run()
    down.request_one()
    kit.host.advance(0.1)
    assert kit.last_events() == {OnNext(1)}
    down.request_one()
    kit.host.advance(0.1)
    assert kit.last_events() == {OnNext(2)}
    kit.host.advance(0.1)  # not pulled: tick 3 is not pushed, and the timer stops
    assert kit.last_events() == set()
    down.request_one()
    kit.host.advance(1)
    assert kit.last_events() == set()
    up.on_complete()
    assert kit.last_events() == {OnComplete()}


# ------------------------------------------------------------------------------ running streams
def test_produce_scheduled_ticks_as_expected(manual_mat, clock):
    src, sink = TestSource.probe().via(LinearStage("ticks", TickLogic)).to_mat(TestSink.probe(), lambda a, b: (a, b)).run(manual_mat)
    sink.request(5)  # handled before virtual time moves: no tick can be missed
    sink.expect_no_message(0.099)
    clock.advance(0.001)
    sink.expect_next(1)
    clock.advance(0.1)
    sink.expect_next(2)
    clock.advance(0.1)
    sink.expect_next(3)
    sink.expect_no_message(1.0)  # the timer stopped itself after the third tick
    assert clock.pending_timers == 0
    src.send_complete()
    sink.expect_complete()


def test_propagate_error_if_on_timer_throws(manual_mat, clock):
    exc = Boom("Expected exception to the rule")

    class Logic(TimerGraphStageLogic):
        def __init__(self, stage):
            super().__init__(stage.shape)
            from atoll import InHandler, OutHandler

            self.set_handler(stage.in_, InHandler(on_push=lambda: None))
            self.set_handler(stage.out, OutHandler(on_pull=lambda: self.pull(stage.in_)))

        def pre_start(self):
            self.schedule_once("tick", 0.05)

        def on_timer(self, key):
            raise exc

    src, sink = TestSource.probe().via(LinearStage("boom", Logic)).to_mat(TestSink.probe(), lambda a, b: (a, b)).run(manual_mat)
    sink.request(1)
    sink.expect_no_message(0.049)
    clock.advance(0.001)
    assert sink.expect_error() is exc
    assert src.expect_cancellation() is exc
