"""Watermarks through loops: ``recursively`` holds each watermark until the loop has emitted every
descendant of the elements before it; a GraphDSL cycle's fan-in leaves its feedback inputs out of the
watermark valve (they are reachable from the junction's own output), so time still advances.

The spec (``event-time.md`` 1.4, cycles) is the anchor: Flink's ``iterate`` had no such rule and either
stalled the watermark at the loop head or lost progress (FLIP-15, FLINK-5089).
"""
from __future__ import annotations

import pytest

from atoll import (Aggregate, ClosedShape, Flow, GraphDSL, Keep, Materializer, Merge, MergePreferred, OverflowStrategy,
                   Partition, RunnableGraph, Window)
from atoll.testkit import TestSink, TestSource, assert_all_stages_stopped


@pytest.fixture(params=["fused", "unfused"])
def mat(request):
    m = Materializer.local(fusion=request.param == "fused")
    yield m
    try:
        assert_all_stages_stopped(m, timeout=5.0)
    finally:
        m.shutdown()


def halve(s):
    return s.filter(lambda x: x > 1).map(lambda x: x // 2)


def halve_in_substreams(s):  # ``grouped`` is not a stateless form: the step runs as a substream per element
    return s.filter(lambda x: x > 1).grouped(1).map(lambda g: g[0] // 2)


@pytest.mark.parametrize("step", [halve, halve_in_substreams], ids=["fused step", "substream step"])
def test_recursively_holds_a_watermark_until_the_loop_emitted_every_descendant(mat, step):
    src, snk = (TestSource.probe(event_time=True).recursively(step)
                .to_mat(TestSink.probe(event_time=True), Keep.both).run(mat))
    src.send_next(8, ts=5).send_watermark(6)
    snk.request(2)
    snk.expect_next_with_timestamp(8, 5)
    snk.expect_next_with_timestamp(4, 5)  # descendants inherit their root's timestamp
    snk.expect_no_message(0.05)  # 2 and 1 are still in the loop: W=6 waits
    snk.request(5)
    snk.expect_next_with_timestamp(2, 5)
    snk.expect_next_with_timestamp(1, 5)
    snk.expect_watermark(6)
    src.send_next(3, ts=7).send_watermark(9)
    snk.expect_next_with_timestamp(3, 7)
    snk.expect_next_with_timestamp(1, 7)
    snk.expect_watermark(9)
    src.send_complete()
    snk.expect_complete()


def test_recursively_passes_a_watermark_at_once_when_the_loop_is_empty(mat):
    src, snk = (TestSource.probe(event_time=True).recursively(halve)
                .to_mat(TestSink.probe(event_time=True), Keep.both).run(mat))
    snk.request(1)
    src.send_watermark(3)
    snk.expect_watermark(3)
    src.send_next(1, ts=4)  # 1 produces nothing
    snk.expect_next_with_timestamp(1, 4)
    src.send_watermark(5)
    snk.expect_watermark(5)
    src.send_complete()
    snk.expect_complete()


def test_windows_after_recursively_count_every_descendant_on_time(mat):
    src, snk = (TestSource.probe(event_time=True).recursively(halve)
                .via_mat(Flow().tumbling_window(10, aggregate=Aggregate.count()), Keep.left)
                .to_mat(TestSink.probe(event_time=True), Keep.both).run(mat))
    snk.request(10)
    src.send_next(16, ts=2).send_next(3, ts=12).send_watermark(10)
    snk.expect_next(Window(None, 0, 10, 5))  # 16, 8, 4, 2, 1: none late
    snk.expect_watermark(10)
    src.send_complete()
    snk.expect_next(Window(None, 10, 20, 2))  # 3, 1
    snk.expect_complete()


def _loop(step_island: bool, fan_in=Merge):
    """probe -> fan-in(probe, feedback) -> Partition: 0 and 1 leave to the sink probe, larger numbers go
    round through ``map(x // 2)`` (its own island if ``step_island``) back into the fan-in."""

    def build(b, src, snk):
        merge = b.add(fan_in(2) if fan_in is Merge else fan_in(1))
        feedback = merge.in_(1) if fan_in is Merge else merge.preferred  # Pekko's docs: prefer the loop
        part = b.add(Partition(2, lambda x: 0 if x <= 1 else 1, eager_cancel=True))
        step = Flow().map(lambda x: x // 2).buffer(64, OverflowStrategy.backpressure)
        step = b.add(step.island() if step_island else step)
        src.out >> merge.in_(0)
        merge.out >> part.in_
        part.out(0) >> snk.in_
        part.out(1) >> step.in_
        step.out >> feedback
        return ClosedShape

    return RunnableGraph.from_graph(GraphDSL.create(build, TestSource.probe(event_time=True),
                                                    TestSink.probe(event_time=True), combine=Keep.both))


@pytest.mark.parametrize("fan_in", [Merge, MergePreferred], ids=["Merge", "MergePreferred"])
@pytest.mark.parametrize("step_island", [False, True], ids=["one island", "feedback across islands"])
def test_a_cycle_s_fan_in_leaves_its_feedback_input_out_of_the_watermark(mat, step_island, fan_in):
    src, snk = _loop(step_island, fan_in).run(mat)
    snk.request(10)
    src.send_watermark(6)
    snk.expect_watermark(6)  # the feedback input never sent one: without the rule this would wait forever
    src.send_next(8, ts=7)
    snk.expect_next_with_timestamp(1, 7)  # 8 -> 4 -> 2 -> 1 went round three times
    src.send_watermark(9)
    snk.expect_watermark(9)
    src.send_complete()
    snk.expect_no_message(0.05)  # a cycle's merge does not complete by itself (Pekko's Merge: all inputs)
    snk.cancel()  # the eager-cancel partition tears the loop down
