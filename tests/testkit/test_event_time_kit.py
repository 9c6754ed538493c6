"""The event-time test kit: event-time probes (timestamps, watermarks, idle markers) and TestStream."""
from __future__ import annotations

import pickle

import pytest

from atoll import Aggregate, Flow, Keep, Materializer, Source, Window
from atoll.errors import IllegalStateError
from atoll.stage.signals import IDLE, Barrier, Watermark
from atoll.testkit import ManualClock, Scripted, TestSink, TestSource, TestStream, assert_all_stages_stopped
from atoll.testkit.probes import TestSubscriberProbe


def W(t):
    return Watermark(t)


def on_time(start, end, value, key=None):
    return Window(key, start, end, value)


@pytest.fixture
def manual():
    clock = ManualClock()
    m = Materializer.local(clock=clock)
    yield m, clock
    try:
        assert_all_stages_stopped(m, timeout=5.0)
    finally:
        m.shutdown()


def windowed(source, flow, sink=None):
    """``source`` -> ``flow`` -> sink probe; materializes ((source value, flow value), probe)."""
    sink = sink if sink is not None else TestSink.probe(event_time=True)
    return source.via_mat(flow, Keep.both).to_mat(sink, Keep.both)


# ----------------------------------------------------------------------------------------------- probes
def test_windows_fire_exactly_when_the_watermark_passes_their_end(mat):
    g = windowed(TestSource.probe(event_time=True), Flow().tumbling_window(10, aggregate=Aggregate.count()),
                 TestSink.probe())  # a plain sink probe: the graph has event time all the same
    (src, stats), snk = g.run(mat)
    snk.request(10)
    src.send_next("a", ts=1).send_next("b", ts=9).send_next("c", ts=10).send_next("d", ts=25)
    src.send_watermark(9)
    assert snk.expect_watermark(9) == 9
    snk.expect_no_message(0.1)  # [0, 10) is still open at W=9
    src.send_watermark(10)
    assert snk.expect_next_with_timestamp(on_time(0, 10, 2), 9) == (on_time(0, 10, 2), 9)  # ts = max_timestamp
    snk.expect_watermark(10)
    src.send_watermark(19)
    snk.expect_watermark(19)
    snk.expect_no_message(0.1)
    src.send_watermark(30)
    snk.expect_next_with_timestamp(on_time(10, 20, 1), 19)
    snk.expect_next_with_timestamp(on_time(20, 30, 1), 29)
    snk.expect_watermark(30)
    src.send_complete()
    snk.expect_complete()
    assert stats.late_dropped == 0


def test_inline_signals_keep_their_place_and_expect_next_fails_on_one(mat):
    g = windowed(TestSource.probe(event_time=True), Flow().tumbling_window(10, aggregate=Aggregate.count()))
    (src, _), snk = g.run(mat)
    snk.request(10)
    src.send_next("a", ts=3).send_watermark(20)
    # the window's result comes before the watermark that fired it; expect_next does not skip the watermark
    snk.expect_next(on_time(0, 10, 1))
    with pytest.raises(AssertionError, match=r"expected element 'x', got \('signal', Watermark\(timestamp=20\)\)"):
        snk.expect_next("x")
    src.send_complete()
    snk.expect_complete()


def test_send_watermark_and_idle_need_no_demand(mat):
    src, snk = TestSource.probe(event_time=True).to_mat(TestSink.probe(event_time=True), Keep.both).run(mat)
    # nothing requested downstream, nothing sent upstream: the markers still travel
    src.send_watermark(5)
    snk.expect_watermark(5)
    src.send_idle()
    snk.expect_idle()
    src.send_signal(Barrier(7))
    assert snk.expect_signal() == Barrier(7)
    # the frame sequence numbers went on: elements after the markers arrive (a gap would fail the channel)
    snk.request(1)
    src.send_next("x", ts=6)
    assert snk.expect_next_with_timestamp() == ("x", 6)
    src.send_complete()
    snk.expect_complete()


def test_send_next_with_ts_needs_an_event_time_probe(mat):
    src, snk = TestSource.probe().to_mat(TestSink.probe(), Keep.both).run(mat)
    with pytest.raises(IllegalStateError, match=r"TestSource\.probe\(event_time=True\)"):
        src.send_next(1, ts=3)
    snk.request(1)
    src.send_next(1)
    snk.expect_next(1)
    src.send_next(2)
    snk.request(1)
    with pytest.raises(AssertionError, match="came without timestamps"):
        snk.expect_next_with_timestamp(2)
    src.send_complete()
    snk.expect_complete()


def test_plain_probes_stay_non_event_time():
    from atoll.testkit.probes import _ProbeSink, _ProbeSource

    assert _ProbeSource(1.0).event_time is False and _ProbeSource(1.0, True).event_time is True
    assert _ProbeSink(1.0).event_time is False and _ProbeSink(1.0, True).event_time is True
    assert _ProbeSource.event_time is False  # the class itself stays a plain stage


def test_event_time_sink_probe_alone_makes_the_graph_carry_timestamps(mat):
    # with_timestamps is no stage of this graph: the event-time probes alone switch timestamps on
    src, snk = (TestSource.probe(event_time=True).map(lambda x: x * 10)
                .to_mat(TestSink.probe(event_time=True), Keep.both).run(mat))
    snk.request(2)
    src.send_next(1, ts=100).send_next(2, ts=50)
    snk.expect_next_with_timestamp(10, 100)
    with pytest.raises(AssertionError, match="at timestamp 51, got ts 50"):
        snk.expect_next_with_timestamp(20, 51)
    src.send_complete()
    snk.expect_complete()


def test_plain_sink_probe_keeps_signals_in_a_separate_queue(mat):
    items = [1, W(1), 2, IDLE, 3, W(4)]
    snk = Source.from_graph(Scripted(items)).island().run_with(TestSink.probe(), mat)
    snk.request(3)
    snk.expect_next(1, 2, 3)  # elements never see the signals
    snk.expect_complete()
    snk.expect_watermark(1)
    snk.expect_idle()
    snk.expect_watermark(4)
    snk.expect_no_signal()


def test_inline_probe_records_signals_in_order(mat):
    items = [1, W(1), 2, IDLE, 3, W(4)]
    snk = Source.from_graph(Scripted(items)).island().run_with(TestSink.probe(signals=True), mat)
    assert snk.to_strict() == items


def test_expect_watermark_accepts_a_coalesced_run_only(mat):
    items = [W(1), W(2), W(3), 1, W(4), 2, W(6)]
    snk = Source.from_graph(Scripted(items)).island().run_with(TestSink.probe(signals=True), mat)
    snk.request(2)
    snk.expect_watermark(3)  # W(1), W(2) may or may not have been coalesced away
    with pytest.raises(AssertionError, match=r"expected watermark 5, got \('next', 2\) \(after the smaller watermarks \[4\]\)"):
        snk.expect_next(1)
        snk.expect_watermark(5)
    with pytest.raises(AssertionError, match=r"expected watermark 5, got Watermark\(timestamp=6\)"):
        snk.expect_watermark(5)
    snk.expect_complete()


def test_expect_watermark_and_idle_fail_on_the_wrong_signal(mat):
    src, snk = TestSource.probe().to_mat(TestSink.probe(signals=True, timeout=0.5), Keep.both).run(mat)
    src.send_idle()
    with pytest.raises(AssertionError, match="expected watermark 3, got signal Idle"):
        snk.expect_watermark(3)
    src.send_watermark(3)
    with pytest.raises(AssertionError, match=r"expected the idle marker, got signal Watermark\(timestamp=3\)"):
        snk.expect_idle()
    with pytest.raises(AssertionError, match=r"timeout \(0.5s\) while waiting for a watermark"):
        snk.expect_watermark()
    src.send_complete()
    snk.expect_complete()


def test_detached_subscriber_probe_keeps_its_signals_and_timestamps():
    p = TestSubscriberProbe(1.0, event_time=True, signals=False)
    from atoll._impl.islands.boundaries import FrameSignals, FrameTimestamps

    p.on_next(0, ["a", "b", FrameTimestamps([1, 2]), FrameSignals([(1, W(1)), (2, IDLE)])])
    p.on_complete()
    q = pickle.loads(pickle.dumps(p.__atoll_detach__()))
    assert q.expect_next_with_timestamp("a", 1) == ("a", 1)
    assert q.expect_next_with_timestamp() == ("b", 2)
    q.expect_complete()
    q.expect_watermark(1)
    q.expect_idle()


# ----------------------------------------------------------------------------------------------- TestStream
def test_test_stream_emits_elements_with_timestamps_and_markers_in_script_order(mat):
    stream = (TestStream().add_elements("a", "b", ts=1).advance_watermark_to(5).mark_idle()
              .add_elements_with_timestamps(("c", 9), ("d", 2)).advance_watermark_to(10)
              .advance_watermark_to_infinity())
    snk = stream.to_source().run_with(TestSink.probe(signals=True), mat)
    snk.request(1)
    snk.expect_next_with_timestamp("a", 1)
    snk.expect_no_message(0.1)  # "b" waits for demand ...
    snk.request(1)
    snk.expect_next_with_timestamp("b", 1)
    snk.expect_watermark(5)  # ... the markers behind it need none
    snk.expect_idle()
    snk.request(5)
    snk.expect_next_with_timestamp("c", 9)
    snk.expect_next_with_timestamp("d", 2)
    snk.expect_watermark(10)
    snk.expect_complete()


def test_test_stream_on_time_firing(mat):
    # Beam TestStreamTest.testLateDataAccumulating's on-time part: panes fire when the watermark passes the end
    stream = (TestStream().add_elements(1, 2, ts=0).add_elements(3, ts=4).advance_watermark_to(5)
              .add_elements(4, ts=7).advance_watermark_to(10).advance_watermark_to_infinity())
    src = stream.to_source().tumbling_window(5, aggregate=Aggregate.sum())
    snk = src.run_with(TestSink.probe(event_time=True), mat)
    snk.request(10)
    snk.expect_next_with_timestamp(on_time(0, 5, 6), 4)
    snk.expect_watermark(5)
    snk.expect_next_with_timestamp(on_time(5, 10, 4), 9)
    snk.expect_watermark(10)
    snk.expect_complete()


def test_test_stream_late_data_fires_late_then_is_dropped(mat):
    # Beam TestStreamTest.testLateDataAccumulating: late within the allowed lateness -> a late (accumulated)
    # pane; after the window expired -> dropped
    stream = (TestStream().add_elements(1, 2, ts=1).advance_watermark_to(10)
              .add_elements(3, ts=3).advance_watermark_to(15)
              .add_elements(4, ts=4).add_elements(5, ts=15).advance_watermark_to_infinity())
    g = stream.to_source().via_mat(
        Flow().tumbling_window(10, allowed_lateness=5, aggregate=Aggregate.sum()), Keep.right
    ).to_mat(TestSink.probe(event_time=True), Keep.both)
    stats, snk = g.run(mat)
    snk.request(10)
    snk.expect_next(on_time(0, 10, 3))
    snk.expect_watermark(10)
    snk.expect_next(Window(None, 0, 10, 6, timing="late"))
    snk.expect_watermark(15)
    snk.expect_next(on_time(10, 20, 5))  # completion: the open window fires; 4 (ts 4) was dropped
    snk.expect_complete()
    assert stats.late_dropped == 1


def test_test_stream_late_data_with_on_late_fail(mat):
    stream = TestStream().advance_watermark_to(10).add_elements("x", ts=3)
    snk = stream.to_source().tumbling_window(10, on_late="fail").run_with(TestSink.probe(event_time=True), mat)
    snk.request(1)
    snk.expect_watermark(10)
    snk.expect_error()


@pytest.mark.parametrize("idle", [True, False])
def test_test_stream_idle_input_leaves_the_merged_watermark(manual, idle):
    # Flink StatusWatermarkValveTest / Beam: an idle input does not hold the merged watermark back; a
    # non-idle quiet one does. The quiet stream stays open (a processing-time wait) meanwhile.
    m, clock = manual
    quiet = TestStream().advance_watermark_to(5)
    if idle:
        quiet = quiet.mark_idle()
    quiet = quiet.advance_processing_time(100)
    busy = TestStream().add_elements("b", ts=18).advance_watermark_to(20)
    snk = quiet.to_source().merge(busy.to_source()).run_with(TestSink.probe(event_time=True), m)
    snk.request(10)
    snk.expect_next_with_timestamp("b", 18)
    if idle:
        snk.expect_watermark(20)
        snk.expect_idle()  # busy completed, quiet is idle: no active input is left, the merge goes idle
    else:
        snk.expect_watermark(5)
        snk.expect_no_message(50)  # virtual seconds: W stays at 5 while the quiet input is active
    clock.advance(100)  # the quiet input completes: every input done = the end of event time
    snk.expect_complete()


def test_test_stream_advance_processing_time_waits_on_the_manual_clock(manual):
    m, clock = manual
    stream = TestStream().add_elements(1, ts=1).advance_processing_time(5).add_elements(2, ts=2)
    snk = stream.to_source().run_with(TestSink.probe(), m)
    snk.request(2)
    snk.expect_next(1)
    snk.expect_no_message(4.5)  # advances the virtual clock by 4.5 s
    clock.advance(0.5)
    snk.expect_next(2)
    snk.expect_complete()


def test_early_every_fires_on_processing_time_under_a_manual_clock(manual):
    m, clock = manual
    stream = (TestStream().add_elements("a", "b", ts=1).advance_processing_time(1.5)
              .add_elements("c", ts=5).advance_watermark_to(10).advance_watermark_to_infinity())
    src = stream.to_source().tumbling_window(10, early_every=1.0, aggregate=Aggregate.count())
    snk = src.run_with(TestSink.probe(event_time=True), m)
    snk.request(10)
    snk.expect_no_message(0.5)  # virtual: no early firing before 1 s
    clock.advance(0.5)  # t = 1.0: the early firing, before "c" (due at 1.5)
    snk.expect_next(Window(None, 0, 10, 2, timing="early"))
    clock.advance(0.5)  # t = 1.5: "c", then W=10 fires the window on time
    snk.expect_next(on_time(0, 10, 3))
    snk.expect_watermark(10)
    snk.expect_complete()


def test_test_stream_builder_checks():
    with pytest.raises(ValueError, match="must not go back"):
        TestStream().advance_watermark_to(10).advance_watermark_to(9)
    with pytest.raises(ValueError, match="already ended"):
        TestStream().advance_watermark_to_infinity().add_elements(1, ts=1)
    with pytest.raises(TypeError, match="ts must be an int or float"):
        TestStream().add_elements(1, ts="3")
    with pytest.raises(TypeError, match=r"expected \(element, ts\) pairs"):
        TestStream().add_elements_with_timestamps(1)
    with pytest.raises(ValueError, match="seconds must be finite"):
        TestStream().advance_processing_time(-1)
    s = TestStream().add_elements("a", ts=1).advance_watermark_to(3).mark_idle().advance_processing_time(2)
    assert s.steps == [("element", "a", 1), ("signal", W(3)), ("signal", IDLE), ("wait", 2)]


def test_test_stream_plays_again_on_each_materialization(mat):
    source = TestStream().add_elements(1, 2, ts=1).advance_watermark_to(2).to_source()
    for _ in range(2):
        snk = source.run_with(TestSink.probe(signals=True), mat)
        assert snk.to_strict() == [1, 2, W(2)]
