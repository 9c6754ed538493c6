"""ManualClock: virtual time for running graphs (``Materializer.local(clock=ManualClock())``).

``advance(d)`` fires every timer due within ``d`` of any island on the clock, in due order, with
``host.now()`` at each timer's due time, and returns only once the hosts are quiescent: the effects
of the firings were handled, across islands too. So every assertion right after ``advance`` sees
the outcome without waiting; nothing here sleeps for a timer.
"""
from __future__ import annotations

import threading
import time

import pytest

from atoll import Keep, Materializer, Sink, Source, TimerGraphStageLogic
from atoll._impl.islands.thread_host import ThreadHost
from atoll.stage.clock import REAL_CLOCK, Clock, RealClock
from atoll.testkit import ManualClock, TestSink, TestSource, assert_all_stages_stopped

from stage_helpers import LinearStage


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


def _timer_stage(name, schedule, log, on_timer=None):
    """A pass-through stage that schedules in ``pre_start`` (``schedule(logic)``) and logs
    ``(name, key, host.now())`` for each firing; ``on_timer(logic, key)`` for extra behaviour."""

    class Logic(TimerGraphStageLogic):
        def __init__(self, stage):
            super().__init__(stage.shape)
            from atoll import InHandler, OutHandler

            self.set_handler(stage.in_, InHandler(on_push=lambda: self.push(stage.out, self.grab(stage.in_))))
            self.set_handler(stage.out, OutHandler(on_pull=lambda: self.pull(stage.in_)))

        def pre_start(self):
            schedule(self)

        def on_timer(self, key):
            log.append((name, key, round(self.interpreter.host.now(), 9)))
            if on_timer is not None:
                on_timer(self, key)

    return LinearStage(name, Logic)


# ------------------------------------------------------------------------------ the clock itself
def test_a_manual_clock_starts_at_zero_or_the_given_time_and_moves_only_when_advanced():
    c = ManualClock()
    assert c.now() == 0.0
    c.advance(1.5)
    assert c.now() == 1.5
    c.advance(0)
    assert c.now() == 1.5
    assert ManualClock(start=100.0).now() == 100.0
    assert isinstance(c, Clock) and c.drives_timers and not REAL_CLOCK.drives_timers


@pytest.mark.parametrize("bad", [-0.1, float("nan"), float("inf"), "1", None, True])
def test_advance_refuses_bad_durations(bad):
    with pytest.raises(ValueError):
        ManualClock().advance(bad)


def test_materializer_local_refuses_a_clock_that_is_not_a_clock():
    with pytest.raises(TypeError):
        Materializer.local(clock="manual")


def test_hosts_read_real_time_unless_given_a_clock():
    host = ThreadHost("plain")
    assert isinstance(host.clock, RealClock)
    before = time.monotonic()
    assert before <= host.now() <= time.monotonic()
    assert Materializer.local().clock is REAL_CLOCK
    c = ManualClock(start=7.0)
    assert Materializer.local(clock=c).clock is c
    assert ThreadHost("manual", clock=c).now() == 7.0


# ------------------------------------------------------------------------------ firing
def test_timers_of_several_islands_fire_in_due_order_at_their_due_time(manual_mat, clock):
    log = []
    a = _timer_stage("a", lambda l: (l.schedule_once("a3", 0.3), l.schedule_once("a1", 0.1)), log)
    b = _timer_stage("b", lambda l: (l.schedule_once("b2", 0.2), l.schedule_once("b4", 0.4)), log)
    src, sink = (
        TestSource.probe().via(a).island().via(b).island().to_mat(TestSink.probe(), Keep.both).run(manual_mat)
    )
    assert len(clock.hosts) == 3
    clock.advance(0.25)
    assert log == [("a", "a1", 0.1), ("b", "b2", 0.2)]
    assert clock.now() == 0.25
    clock.advance(1.0)
    assert log == [("a", "a1", 0.1), ("b", "b2", 0.2), ("a", "a3", 0.3), ("b", "b4", 0.4)]
    assert clock.now() == 1.25
    src.send_complete()
    sink.request(1)
    sink.expect_complete()


def test_fixed_rate_and_fixed_delay_ticks_all_fire_within_one_advance(manual_mat, clock):
    log = []
    stage = _timer_stage(
        "t", lambda l: (l.schedule_at_fixed_rate("rate", 0.1, 0.1), l.schedule_with_fixed_delay("delay", 0.25, 0.2)), log
    )
    src, sink = TestSource.probe().via(stage).to_mat(TestSink.probe(), Keep.both).run(manual_mat)
    clock.advance(0.5)
    assert log == [
        ("t", "rate", 0.1),
        ("t", "rate", 0.2),
        ("t", "delay", 0.25),
        ("t", "rate", 0.3),
        ("t", "rate", 0.4),
        ("t", "delay", 0.45),
        ("t", "rate", 0.5),
    ]
    src.send_complete()
    sink.request(1)
    sink.expect_complete()
    assert clock.pending_timers == 0  # cancelled when the stage stopped


def test_timers_due_now_fire_on_advance_zero(manual_mat, clock):
    log = []
    src, sink = (
        TestSource.probe()
        .via(_timer_stage("z", lambda l: l.schedule_once("now", 0.0), log))
        .to_mat(TestSink.probe(), Keep.both)
        .run(manual_mat)
    )
    clock.settle()
    assert log == []
    clock.advance(0)
    assert log == [("z", "now", 0.0)]
    src.send_complete()
    sink.request(1)
    sink.expect_complete()


def test_a_cancelled_timer_does_not_fire(manual_mat, clock):
    log = []
    stage = _timer_stage(
        "c",
        lambda l: (l.schedule_once("victim", 0.5), l.schedule_once("killer", 0.2)),
        log,
        on_timer=lambda l, key: l.cancel_timer("victim") if key == "killer" else None,
    )
    src, sink = TestSource.probe().via(stage).to_mat(TestSink.probe(), Keep.both).run(manual_mat)
    assert clock.pending_timers == 2
    clock.advance(10)
    assert log == [("c", "killer", 0.2)]
    assert clock.pending_timers == 0
    src.send_complete()
    sink.request(1)
    sink.expect_complete()


def test_advance_returns_after_the_effects_crossed_islands(manual_mat, clock):
    seen = []
    cancellable, done = (
        Source.tick(1.0, 1.0, "tick")
        .island()
        .map(lambda t: t + "!")
        .island()
        .map(lambda t: t.upper())
        .island()
        .to_mat(Sink.foreach(seen.append), Keep.both)
        .run(manual_mat)
    )
    assert len(clock.hosts) == 4
    clock.advance(1.0)
    assert seen == ["TICK!"]  # no waiting: advance returned after the sink on the 4th island ran
    clock.advance(2.0)
    assert seen == ["TICK!"] * 3
    cancellable.cancel()
    done.result(5)
    clock.settle()
    assert clock.hosts == []


def test_substreams_run_on_their_parent_hosts_clock(manual_mat, clock):
    def boom(x):
        raise ValueError("boom")

    probe = (
        Source.single(1)
        .map(boom)
        .recover_with_retries(1, lambda e: Source.tick(1.0, 1.0, "sub").take(2))
        .run_with(TestSink.probe(), manual_mat)
    )
    probe.request(5)
    probe.expect_no_message(0.999)
    clock.advance(0.001)
    probe.expect_next("sub")
    clock.advance(1.0)
    probe.expect_next("sub")
    probe.expect_complete()


def test_a_manual_clock_graph_does_not_fire_timers_by_wall_time(manual_mat, clock):
    probe = Source.tick(0.001, 0.001, "tick").run_with(TestSink.probe(), manual_mat)
    probe.request(3)
    clock.settle()
    (host,) = clock.hosts
    # hold the island's thread until wall time is well past the first two due times (the subject
    # of the test, not a wait for a result): a host firing by wall time would fire them right after
    passed = threading.Event()

    def hold_until_past(deadline):
        while time.monotonic() < deadline:
            passed.wait(deadline - time.monotonic())
        passed.set()

    host.post(hold_until_past, time.monotonic() + 0.005)
    clock.settle()
    assert passed.is_set()
    probe.expect_no_message(0)  # advance(0): still nothing due in virtual time
    assert clock.now() == 0.0
    clock.advance(0.001)
    probe.expect_next("tick")
    probe.cancel()


def test_expect_no_message_advances_the_virtual_clock(manual_mat, clock):
    src, sink = TestSource.probe().to_mat(TestSink.probe(), Keep.both).run(manual_mat)
    sink.expect_no_message(30.0)  # no real wait
    src.expect_no_message(30.0)
    assert clock.now() == 60.0
    sink.request(1)
    src.send_complete()
    sink.expect_complete()


def test_advance_from_an_islands_thread_is_refused(manual_mat, clock):
    errors = []

    def on_timer(logic, key):
        try:
            clock.advance(1)
        except RuntimeError as e:
            errors.append(e)

    stage = _timer_stage("self", lambda l: l.schedule_once("k", 0.1), [], on_timer=on_timer)
    src, sink = TestSource.probe().via(stage).to_mat(TestSink.probe(), Keep.both).run(manual_mat)
    clock.advance(0.1)
    assert len(errors) == 1
    src.send_complete()
    sink.request(1)
    sink.expect_complete()


def test_a_graph_that_never_idles_cannot_be_advanced():
    clock = ManualClock(settle_timeout=0.2)
    m = Materializer.local(clock=clock)
    try:
        Source.repeat(1).to(Sink.ignore()).run(m)
        with pytest.raises(TimeoutError, match="still busy"):
            clock.advance(1.0)
    finally:
        m.shutdown()
    assert_all_stages_stopped(m, timeout=5.0)
