"""The event-time API of custom stages: ``on_watermark``, ``current_watermark``, event timers
(``schedule_event_timer`` -> ``on_event_timer``), ``hold_watermark`` / ``release_watermark_hold`` and
``push``/``emit`` with ``ts=``.

The stages here are written the way a user writes one (public ``GraphStage``/``GraphStageLogic``), driven
by event-time probes: what a timer emits arrives before the watermark that made it due, a hold keeps the
watermark at the held timestamp until released, timers fire in timestamp order (equal timestamps in the
order they were scheduled), rescheduling a key replaces its timer. Flink's ``InternalTimerService`` tests
(``HeapInternalTimerServiceTest``: timers fire on advance, in order, re-registration dedups, deletion) are
the anchors, translated to the ``<`` convention (a timer at ``t`` is due once ``W >= t``).
"""
from __future__ import annotations

import math

import pytest

from atoll import Flow, FlowShape, GraphStage, GraphStageLogic, InHandler, Inlet, Keep, Materializer, OutHandler, Outlet
from atoll.stage.signals import Watermark
from atoll.testkit import TestSink, TestSource, assert_all_stages_stopped


@pytest.fixture
def mat():
    m = Materializer.local()
    yield m
    try:
        assert_all_stages_stopped(m, timeout=5.0)
    finally:
        m.shutdown()


class _OneInOneOut(GraphStage):
    def __init__(self, name):
        self.in_ = Inlet(f"{name}.in")
        self.out = Outlet(f"{name}.out")
        self.shape = FlowShape(self.in_, self.out)


class BucketCount(_OneInOneOut):
    """Counts elements per bucket of 10 time units and emits ``(bucket start, count)`` from an event timer
    at the bucket's end, stamped with the bucket's last timestamp (a tumbling window in ten lines)."""

    def __init__(self, finish_fires=True):
        super().__init__("bucket_count")
        self.finish_fires = finish_fires

    def create_logic(self, attributes):
        stage = self

        class Logic(GraphStageLogic, InHandler, OutHandler):
            def __init__(self):
                super().__init__(stage.shape)
                self.counts = {}
                self.set_handler(stage.in_, self)
                self.set_handler(stage.out, self)

            def on_push(self):
                self.grab(stage.in_)
                start = self.current_timestamp // 10 * 10
                self.counts[start] = self.counts.get(start, 0) + 1
                self.schedule_event_timer(start, start + 10)
                self.pull(stage.in_)

            def on_pull(self):
                if not self.has_been_pulled(stage.in_):
                    self.pull(stage.in_)

            def on_event_timer(self, key, timestamp):
                self.emit(stage.out, (key, self.counts.pop(key)), ts=timestamp - 1)

            def on_upstream_finish(self):
                if stage.finish_fires:
                    self.fire_remaining_event_timers()
                self.emit(stage.out, "end", self.complete_stage)

        return Logic()


def run(mat, stage):
    return (TestSource.probe(event_time=True).via(Flow.from_graph(stage))
            .to_mat(TestSink.probe(event_time=True), Keep.both).run(mat))


def test_event_timers_fire_in_timestamp_order_before_the_watermark_that_made_them_due(mat):
    src, snk = run(mat, BucketCount())
    snk.request(10)
    src.send_next("a", ts=23).send_next("b", ts=3).send_next("c", ts=7).send_next("d", ts=12)
    src.send_watermark(9)
    snk.expect_watermark(9)  # no bucket ends at or before 9
    src.send_watermark(25)
    # [0,10) and [10,20) are due at 25, in timestamp order; [20,30) is not
    snk.expect_next_with_timestamp((0, 2), 9)
    snk.expect_next_with_timestamp((10, 1), 19)
    snk.expect_watermark(25)
    src.send_watermark(30)
    snk.expect_next_with_timestamp((20, 1), 29)
    snk.expect_watermark(30)
    src.send_complete()
    snk.expect_next("end")
    snk.expect_complete()


def test_a_timer_is_due_at_a_watermark_equal_to_its_timestamp(mat):
    src, snk = run(mat, BucketCount())
    snk.request(10)
    src.send_next("a", ts=5).send_watermark(10)
    snk.expect_next_with_timestamp((0, 1), 9)
    snk.expect_watermark(10)
    src.send_complete()
    snk.expect_next("end")
    snk.expect_complete()


def test_completion_fires_the_remaining_timers_when_the_stage_asks(mat):
    src, snk = run(mat, BucketCount(finish_fires=True))
    snk.request(10)
    src.send_next("a", ts=31).send_next("b", ts=5).send_complete()
    snk.expect_next((0, 1))
    snk.expect_next((30, 1))
    snk.expect_next("end")
    snk.expect_complete()


def test_timers_left_armed_at_completion_do_not_fire_by_themselves(mat):
    src, snk = run(mat, BucketCount(finish_fires=False))
    snk.request(10)
    src.send_next("a", ts=31).send_complete()
    snk.expect_next("end")
    snk.expect_complete()


class TimerScript(_OneInOneOut):
    """Elements are commands: ``("at", key, ts)`` schedules, ``("cancel", key)`` cancels; timers emit
    ``(key, ts, current_watermark)``; ``("hold", ts)`` / ``("release",)`` drive the watermark hold;
    ``("now",)`` emits the current watermark."""

    def __init__(self, absorb=False):
        super().__init__("timer_script")
        self.absorb = absorb

    def create_logic(self, attributes):
        stage = self

        class Logic(GraphStageLogic, InHandler, OutHandler):
            def __init__(self):
                super().__init__(stage.shape)
                self.seen = []
                self.set_handler(stage.in_, self)
                self.set_handler(stage.out, self)

            def on_push(self):
                cmd = self.grab(stage.in_)
                if cmd[0] == "at":
                    self.schedule_event_timer(cmd[1], cmd[2])
                elif cmd[0] == "cancel":
                    self.cancel_event_timer(cmd[1])
                elif cmd[0] == "hold":
                    self.hold_watermark(cmd[1])
                elif cmd[0] == "release":
                    self.release_watermark_hold()
                elif cmd[0] == "now":
                    self.emit(stage.out, ("now", self.current_watermark))
                elif cmd[0] == "active":
                    self.emit(stage.out, ("active", cmd[1], self.is_event_timer_active(cmd[1])))
                self.pull(stage.in_)

            def on_pull(self):
                if not self.has_been_pulled(stage.in_):
                    self.pull(stage.in_)

            def on_watermark(self, watermark):
                self.seen.append(watermark)
                if not stage.absorb:
                    super().on_watermark(watermark)

            def on_event_timer(self, key, timestamp):
                self.emit(stage.out, (key, timestamp, self.current_watermark))

        return Logic()


def test_rescheduling_a_key_replaces_its_timer_and_cancel_disarms_it(mat):
    src, snk = run(mat, TimerScript())
    snk.request(20)
    src.send_next(("at", "x", 5), ts=0).send_next(("at", "x", 15), ts=0)  # x now at 15 only
    src.send_next(("at", "y", 8), ts=0).send_next(("at", "z", 8), ts=0).send_next(("cancel", "z"), ts=0)
    src.send_next(("active", "z"), ts=0).send_next(("active", "y"), ts=0)
    snk.expect_next(("active", "z", False))
    snk.expect_next(("active", "y", True))
    src.send_watermark(10)
    snk.expect_next(("y", 8, 10))  # current_watermark inside on_event_timer is the one that made it due
    snk.expect_watermark(10)
    src.send_watermark(20)
    snk.expect_next(("x", 15, 20))
    snk.expect_watermark(20)
    src.send_complete()
    snk.expect_complete()


def test_equal_timestamps_fire_in_scheduling_order(mat):
    src, snk = run(mat, TimerScript())
    snk.request(20)
    for key in ("c", "a", "b"):
        src.send_next(("at", key, 4), ts=0)
    src.send_next(("at", "first", 2), ts=0)
    src.send_watermark(4)
    snk.expect_next(("first", 2, 4))
    snk.expect_next(("c", 4, 4))
    snk.expect_next(("a", 4, 4))
    snk.expect_next(("b", 4, 4))
    snk.expect_watermark(4)
    src.send_complete()
    snk.expect_complete()


def test_a_timer_at_or_below_the_current_watermark_fires_with_the_next_advance(mat):
    src, snk = run(mat, TimerScript())
    snk.request(20)
    src.send_watermark(10)
    snk.expect_watermark(10)
    src.send_next(("at", "past", 3), ts=11)
    snk.expect_no_message(0.05)
    src.send_watermark(10)  # not an advance: the timer waits
    snk.expect_watermark(10)  # a replayed watermark passes on unchanged
    src.send_watermark(11)
    snk.expect_next(("past", 3, 11))
    snk.expect_watermark(11)
    src.send_complete()
    snk.expect_complete()


def test_hold_keeps_the_watermark_at_the_held_timestamp_until_released(mat):
    src, snk = run(mat, TimerScript())
    snk.request(20)
    src.send_watermark(5)
    snk.expect_watermark(5)
    src.send_next(("hold", 7), ts=6)
    src.send_watermark(9)
    snk.expect_watermark(7)  # min(9, hold 7)
    src.send_watermark(12)  # still held at 7: nothing new goes on
    src.send_next(("now",), ts=13)
    snk.expect_next(("now", 12))  # the stage itself has heard 12
    src.send_next(("hold", 10), ts=13)  # the hold moves up: the next watermark goes on up to it
    src.send_watermark(14)
    snk.expect_watermark(10)
    src.send_next(("release",), ts=14)
    snk.expect_watermark(14)  # released: the watermark heard goes on at once
    src.send_complete()
    snk.expect_complete()


def test_a_stage_that_does_not_call_super_absorbs_watermarks(mat):
    src, snk = run(mat, TimerScript(absorb=True))
    snk.request(20)
    src.send_next(("at", "t", 1), ts=0)
    src.send_watermark(3).send_watermark(8)
    src.send_next(("now",), ts=9)
    snk.expect_next(("now", 8))  # no watermark and no timer went out: on_watermark was overridden
    src.send_complete()
    snk.expect_complete()


def test_current_watermark_is_minus_infinity_before_the_first():
    class Bare(GraphStageLogic):
        pass

    logic = Bare(in_count=1, out_count=1)
    assert logic.current_watermark == -math.inf
    assert not logic.is_event_timer_active("k")


def test_schedule_event_timer_rejects_a_timestamp_that_is_not_a_number():
    class Named(GraphStageLogic):
        pass

    logic = Named(in_count=1, out_count=1)
    with pytest.raises(TypeError, match=r"Named.schedule_event_timer: timestamp must be an int or float, got '5'"):
        logic.schedule_event_timer("k", "5")
    with pytest.raises(TypeError, match="got True"):
        logic.schedule_event_timer("k", True)


def test_a_map_between_forwards_each_advancing_watermark_once(mat):
    src, snk = (TestSource.probe(event_time=True).map(lambda x: x)
                .to_mat(TestSink.probe(event_time=True), Keep.both).run(mat))
    snk.request(5)
    src.send_watermark(3).send_next("a", ts=4).send_watermark(6)
    snk.expect_watermark(3)
    snk.expect_next_with_timestamp("a", 4)
    snk.expect_watermark(6)
    src.send_complete()
    snk.expect_complete()
    assert Watermark(6).timestamp == 6
