"""Stages that keep elements back hold the watermark at the smallest timestamp they keep (spec 1.4: "stages
that hold elements forward min(W_in, min ts of held elements)", Beam's watermark hold), so no watermark
overtakes an element still inside them and a window downstream never sees it late: ``conflate``/``batch``,
``grouped_within`` and ``delay``. Driven by event-time probes under the manual clock."""
from __future__ import annotations

import pytest

from atoll import Flow, Keep, Materializer
from atoll.testkit import ManualClock, TestSink, TestSource, assert_all_stages_stopped


@pytest.fixture
def manual():
    clock = ManualClock()
    m = Materializer.local(clock=clock)
    yield m, clock
    try:
        assert_all_stages_stopped(m, timeout=5.0)
    finally:
        m.shutdown()


def probes(m, flow):
    return (TestSource.probe(event_time=True).via(flow)
            .to_mat(TestSink.probe(event_time=True), Keep.both).run(m))


def test_conflate_holds_the_watermark_at_its_oldest_element_until_the_aggregate_is_out(manual):
    m, _ = manual
    src, snk = probes(m, Flow().conflate(lambda a, b: a + b))
    src.send_next(1, ts=5).send_next(2, ts=7)
    src.send_watermark(10)
    snk.expect_watermark(5)  # 1 (ts 5) is still inside: time stops at 5, with no demand needed
    snk.request(1)
    snk.expect_next(3)
    snk.expect_watermark(10)  # the aggregate is out: the watermark heard goes on
    src.send_watermark(12)
    snk.expect_watermark(12)  # nothing held: at once
    src.send_complete()
    snk.expect_complete()


def test_batch_keeps_holding_for_the_pending_element_after_the_aggregate_left(manual):
    m, _ = manual
    src, snk = probes(m, Flow().batch(2, lambda x: [x], lambda acc, x: acc + [x]))
    src.send_next("a", ts=3).send_next("b", ts=4).send_next("c", ts=8)  # a, b in the batch; c pending
    src.send_watermark(20)
    snk.expect_watermark(3)
    snk.request(1)
    snk.expect_next(["a", "b"])
    snk.expect_watermark(8)  # c (ts 8) is the batch now
    snk.request(1)
    snk.expect_next(["c"])
    snk.expect_watermark(20)
    src.send_complete()
    snk.expect_complete()


def test_grouped_within_holds_the_watermark_behind_its_open_group(manual):
    m, clock = manual
    src, snk = probes(m, Flow().grouped_within(10, 1.0))
    snk.request(5)
    src.send_next("a", ts=2).send_next("b", ts=1)
    src.send_watermark(9)
    snk.expect_watermark(1)  # the smallest timestamp in the group
    clock.advance(1.0)
    snk.expect_next(["a", "b"])
    snk.expect_watermark(9)
    src.send_complete()
    snk.expect_complete()


def test_delay_holds_the_watermark_until_the_delayed_element_is_out(manual):
    m, clock = manual
    src, snk = probes(m, Flow().delay(1.0))
    snk.request(5)
    src.send_next("x", ts=4)
    src.send_watermark(6)
    snk.expect_watermark(4)
    clock.advance(1.0)
    snk.expect_next_with_timestamp("x", 4)
    snk.expect_watermark(6)
    src.send_complete()
    snk.expect_complete()
