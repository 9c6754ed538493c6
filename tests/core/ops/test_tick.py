"""Source.tick: ported from Pekko's TickSourceSpec.

Pekko's spec runs with delays of a second and checks the gaps between ticks with
``expectNoMessage``. Here the timing cases run the tick stage in the bare interpreter harness of
``tests/core/interpreter_kit.py`` on the kit host's virtual time, so "a tick is due after exactly one
interval, and a tick that found downstream not ready is gone" is checked exactly and without waiting.
The running-stream cases run under ``Materializer.local(clock=ManualClock())`` with Pekko's delays of
a second: virtual time moves only with ``clock.advance`` and the probes' ``expect_no_message``.

Added beyond the Pekko spec: cancelling before the stream started, downstream cancellation stopping
the timer, a Cancellable used after the stream ended, and the build-time validation.

Not applicable: "reject multiple subscribers, but keep the first" (Atoll has no
``Sink.asPublisher``).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from atoll import Cancellable, Keep, Materializer, Sink, Source
from atoll._impl.ops.sources import TickSource
from atoll.testkit import ManualClock, TestSink, assert_all_stages_stopped

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/core: the interpreter kit
from interpreter_kit import Kit, OnComplete, OnNext  # noqa: E402


# =========================================================================== on a virtual clock
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


def _tick(kit, initial_delay, interval, tick="tick", cancel_first=False):
    stage = TickSource(initial_delay, interval, tick)
    kit.add(stage)
    down = kit.add(kit.downstream())
    kit.connect(stage.out, down.in_)
    cancellable = kit.mat_values[0]
    if cancel_first:
        assert cancellable.cancel() is True
    kit.init()
    kit.run()
    return cancellable, down


def test_produce_ticks(kit):
    _, down = _tick(kit, 1.0, 1.0)
    down.request_one()
    kit.host.advance(0.999)
    assert kit.last_events() == set()
    kit.host.advance(0.001)
    assert kit.last_events() == {OnNext("tick")}
    down.request_one()
    kit.host.advance(0.999)
    assert kit.last_events() == set()
    kit.host.advance(0.001)
    assert kit.last_events() == {OnNext("tick")}
    down.cancel_and_run()
    kit.host.advance(5)
    assert kit.last_events() == set()


def test_drop_ticks_when_not_requested(kit):
    _, down = _tick(kit, 1.0, 1.0)
    down.request_one()
    kit.host.advance(1.0)
    assert kit.last_events() == {OnNext("tick")}
    kit.host.advance(2.5)  # the ticks at 2 s and 3 s find no demand: they are dropped
    assert kit.last_events() == set()
    down.request_one()  # at 3.5 s: nothing was kept for later
    assert kit.last_events() == set()
    kit.host.advance(0.499)
    assert kit.last_events() == set()
    kit.host.advance(0.001)  # the tick due at 4 s
    assert kit.last_events() == {OnNext("tick")}
    down.cancel_and_run()


def test_ticks_keep_their_interval_after_a_pause_in_demand(kit):
    _, down = _tick(kit, 0.5, 1.0)
    kit.host.advance(10)  # nobody asked: every tick is dropped
    assert kit.last_events() == set()
    for due in (10.5, 11.5):
        down.request_one()
        kit.host.advance(due - kit.host.now() - 0.001)
        assert kit.last_events() == set()
        kit.host.advance(0.001)
        assert kit.last_events() == {OnNext("tick")}
    down.cancel_and_run()


def test_cancel_completes_the_stream_and_stops_the_ticks(kit):
    cancellable, down = _tick(kit, 1.0, 1.0)
    down.request_one()
    kit.host.advance(1.0)
    assert kit.last_events() == {OnNext("tick")}
    down.request_one()
    assert cancellable.cancel() is True
    kit.run()
    assert kit.last_events() == {OnComplete()}
    kit.host.advance(5)
    assert kit.last_events() == set()
    assert kit.host.active_timers == []


def test_cancel_before_the_stream_started_completes_it_at_once(kit):
    cancellable, down = _tick(kit, 1.0, 0.5, cancel_first=True)
    assert kit.last_events() == {OnComplete()}
    assert kit.host.active_timers == []
    assert cancellable.is_cancelled()
    assert cancellable.cancel() is False


def test_downstream_cancellation_stops_the_timer(kit):
    cancellable, down = _tick(kit, 1.0, 1.0)
    down.cancel_and_run()
    assert kit.host.active_timers == []
    kit.host.advance(5)
    assert kit.last_events() == set()
    assert not cancellable.is_cancelled()
    assert cancellable.cancel() is True  # harmless after the stream ended


# =========================================================================== running streams
def test_produce_ticks_in_a_stream(manual_mat, clock):
    probe = Source.tick(1.0, 1.0, "tick").run_with(TestSink.probe(), manual_mat)
    probe.request(2)
    probe.expect_no_message(0.999)
    clock.advance(0.001)
    probe.expect_next("tick")
    probe.expect_no_message(0.999)
    clock.advance(0.001)
    probe.expect_next("tick")
    probe.cancel()
    probe.expect_no_message(3.0)  # cancelled: no tick comes any more
    assert clock.pending_timers == 0


def test_be_usable_with_zip_for_a_simple_form_of_rate_limiting(manual_mat, clock):
    probe = (
        Source.range(1, 101)
        .zip(Source.tick(1.0, 1.0, "tick"))
        .map(lambda pair: pair[0])
        .run_with(TestSink.probe(), manual_mat)
    )
    probe.request(1000)
    probe.expect_no_message(0.999)  # the range is ready, the tick is not
    clock.advance(0.001)
    probe.expect_next(1)
    probe.expect_no_message(0.999)
    clock.advance(0.001)
    probe.expect_next(2)
    probe.cancel()


def test_be_possible_to_cancel(manual_mat, clock):
    cancellable, probe = Source.tick(1.0, 1.0, "tick").to_mat(TestSink.probe(), Keep.both).run(manual_mat)
    probe.request(2)
    clock.advance(1.0)
    probe.expect_next("tick")
    clock.advance(1.0)
    probe.expect_next("tick")
    cancellable.cancel()
    assert cancellable.is_cancelled()
    probe.request(3)
    probe.expect_complete()


def test_acknowledge_cancellation_only_once(manual_mat, clock):
    cancellable, probe = Source.tick(1.0, 0.5, "tick").to_mat(TestSink.probe(), Keep.both).run(manual_mat)
    probe.request(2)
    clock.advance(1.0)
    probe.expect_next("tick")
    assert cancellable.cancel() is True
    assert cancellable.cancel() is False
    probe.expect_complete()


def test_have_is_cancelled_mirror_the_cancellation_state(manual_mat, clock):
    cancellable, probe = Source.tick(1.0, 0.5, "tick").to_mat(TestSink.probe(), Keep.both).run(manual_mat)
    probe.request(2)
    clock.advance(1.0)
    probe.expect_next("tick")
    assert cancellable.is_cancelled() is False
    assert cancellable.cancel() is True
    assert cancellable.is_cancelled() is True
    probe.expect_complete()


def test_support_being_cancelled_immediately_after_its_materialization(manual_mat):
    cancellable, probe = Source.tick(1.0, 0.5, "tick").to_mat(TestSink.probe(), Keep.both).run(manual_mat)
    assert cancellable.cancel() is True
    probe.request(2)
    probe.expect_complete()


def test_tick_materializes_a_cancellable_per_materialization(manual_mat):
    # virtual time does not move: no tick can come before the cancellation
    src = Source.tick(1.0, 1.0, "tick")
    c1, f1 = src.to_mat(Sink.seq(), Keep.both).run(manual_mat)
    c2, f2 = src.to_mat(Sink.seq(), Keep.both).run(manual_mat)
    assert isinstance(c1, Cancellable) and isinstance(c2, Cancellable) and c1 is not c2
    c1.cancel()
    assert f1.result(3) == []
    assert not c2.is_cancelled()
    c2.cancel()
    assert f2.result(3) == []


# =========================================================================== build-time validation
@pytest.mark.parametrize(
    "args, exc, arg",
    [
        ((-0.1, 1.0, "t"), ValueError, "initial_delay"),
        ((0.0, 0.0, "t"), ValueError, "interval"),
        ((0.0, -1.0, "t"), ValueError, "interval"),
        (("1", 1.0, "t"), TypeError, "initial_delay"),
        ((0.0, None, "t"), TypeError, "interval"),
        ((True, 1.0, "t"), TypeError, "initial_delay"),
        ((0.0, 1.0, None), ValueError, "tick"),
    ],
)
def test_tick_rejects_bad_arguments(args, exc, arg):
    with pytest.raises(exc, match=f"Source.tick.*{arg}"):
        Source.tick(*args)
