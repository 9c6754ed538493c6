"""RestartSource, RestartFlow, RestartSink and RestartSettings: ported from Pekko's RestartSpec.

Pekko's spec runs on real time with backoffs of 200 ms .. 3 s and checks elapsed time with deadlines;
here every case runs under ``Materializer.local(clock=ManualClock())`` with the same backoffs and
``random_factor=0``: a restart happens exactly when virtual time reaches the backoff (checked one
millisecond before and at the due time), and the "wait for the restart counter to reset" sleeps are
``clock.advance`` calls. The flow cases use Pekko's ``setupFlow`` shape - a wrapped flow whose in side
records into an event queue and whose out side is a publisher probe - built with GraphDSL; Pekko's
BroadcastHub (to reach the probe of each restart) is replaced by recording each restart's probe. The
"provide attributes to inner ..." cases are not ported (sub-materialization does not pass the outer
attributes to the inner graph, see the report); log-level cases are not ported (Atoll logs restarts at
info level, without Pekko's critical-level escalation).
"""
from __future__ import annotations

import queue

import pytest
from ops_kit import TE

from atoll import Flow, FlowShape, GraphDSL, Keep, Materializer, Sink, Source
from atoll.dsl.restart import RestartFlow, RestartSettings, RestartSink, RestartSource
from atoll.testkit import ManualClock, TestSink, TestSource, assert_all_stages_stopped

SHORT_MIN, SHORT_MAX = 0.2, 0.3
MIN, MAX = 1.0, 3.0
SHORT = RestartSettings(SHORT_MIN, SHORT_MAX, 0)
SETTINGS = RestartSettings(MIN, MAX, 0)


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
def mat(clock):
    m = Materializer.local(clock=clock)
    yield m
    try:
        assert_all_stages_stopped(m, timeout=5.0)
    finally:
        m.shutdown()


class Counter:
    def __init__(self):
        self.n = 0

    def __call__(self):
        self.n += 1


def _after(probe, clock, delay, elem):
    """Nothing arrives until ``delay`` seconds passed, then ``elem`` (the restart is due exactly then)."""
    probe.expect_no_message(delay - 0.001)
    clock.advance(0.001)
    probe.expect_next(elem)


def _failing_on_c(x):
    if x == "c":
        raise TE("failed")
    return x


# ============================================================================ source
def test_source_run_normally(mat):
    created = Counter()
    probe = RestartSource.with_backoff(SHORT, lambda: created() or Source.repeat("a")).run_with(TestSink.probe(), mat)
    for _ in range(5):
        probe.request_next("a")
    assert created.n == 1
    probe.cancel()


def test_source_restart_on_completion(mat, clock):
    created = Counter()
    probe = RestartSource.with_backoff(SHORT, lambda: created() or Source.from_iterable(["a", "b"])).run_with(
        TestSink.probe(), mat)
    probe.request_next("a")
    probe.request_next("b")
    probe.request(1)
    _after(probe, clock, 0.2, "a")
    probe.request_next("b")
    probe.request(1)
    _after(probe, clock, 0.3, "a")  # min(max_backoff, 0.2 * 2)
    assert created.n == 3
    probe.cancel()


def test_source_restart_on_failure(mat, clock):
    created = Counter()
    probe = RestartSource.with_backoff(
        SHORT, lambda: created() or Source.from_iterable(["a", "b", "c"]).map(_failing_on_c)).run_with(TestSink.probe(), mat)
    probe.request_next("a")
    probe.request_next("b")
    probe.request(1)
    _after(probe, clock, 0.2, "a")
    probe.request_next("b")
    probe.request(1)
    _after(probe, clock, 0.3, "a")
    probe.request_next("b")
    probe.request(1)
    _after(probe, clock, 0.3, "a")
    assert created.n == 4
    probe.cancel()


def test_source_backoff_before_restart(mat, clock):
    created = Counter()
    probe = RestartSource.with_backoff(SETTINGS, lambda: created() or Source.from_iterable(["a", "b"])).run_with(
        TestSink.probe(), mat)
    probe.request_next("a")
    probe.request_next("b")
    probe.request(1)
    _after(probe, clock, MIN, "a")
    assert created.n == 2
    probe.cancel()


def test_source_reset_exponential_backoff_after_running_for_min_backoff(mat, clock):
    created = Counter()
    probe = RestartSource.with_backoff(SETTINGS, lambda: created() or Source.from_iterable(["a", "b"])).run_with(
        TestSink.probe(), mat)
    probe.request_next("a")
    probe.request_next("b")
    probe.request(1)
    _after(probe, clock, MIN, "a")
    probe.request_next("b")
    probe.request(1)
    # backing off for 2 * min now; then let the new source run past max_restarts_within (= min)
    clock.advance(MIN + MIN * 2 + MIN + 0.5)
    probe.expect_next("a")
    probe.request_next("b")
    probe.request(1)
    _after(probe, clock, MIN, "a")  # reset: back to min_backoff
    assert created.n == 4
    probe.cancel()


def test_source_cancel_the_running_source_when_cancelled(mat, clock):
    created = Counter()
    done = []

    def factory():
        created()
        return Source.repeat("a").watch_termination(lambda m, fut: done.append(fut))

    probe = RestartSource.with_backoff(SHORT, factory).run_with(TestSink.probe(), mat)
    probe.request_next("a")
    probe.cancel()
    done[0].result(3)
    clock.advance(1.0)
    assert created.n == 1


def test_source_not_restarted_when_cancelled_while_backing_off(mat, clock):
    created = Counter()
    probe = RestartSource.with_backoff(SETTINGS, lambda: created() or Source.single("a")).run_with(TestSink.probe(), mat)
    probe.request_next("a")
    probe.request(1)
    probe.cancel()
    clock.advance(MIN + 0.1)
    assert created.n == 1
    assert clock.pending_timers == 0


def test_source_stop_on_completion_if_only_restarted_on_failures(mat, clock):
    created = Counter()

    def factory():
        created()

        def fn(x):
            if x == "c" and created.n == 1:
                raise TE("failed")
            return x

        return Source.from_iterable(["a", "b", "c"]).map(fn)

    probe = RestartSource.on_failures_with_backoff(SHORT, factory).run_with(TestSink.probe(), mat)
    probe.request_next("a")
    probe.request_next("b")
    probe.request(1)
    _after(probe, clock, 0.2, "a")
    probe.request_next("b")
    probe.request_next("c")
    probe.expect_complete()
    assert created.n == 2


def test_source_restart_on_failure_when_only_restarted_on_failures(mat, clock):
    created = Counter()
    probe = RestartSource.on_failures_with_backoff(
        SHORT, lambda: created() or Source.from_iterable(["a", "b", "c"]).map(_failing_on_c)).run_with(TestSink.probe(), mat)
    probe.request_next("a")
    probe.request_next("b")
    probe.request(1)
    _after(probe, clock, 0.2, "a")
    probe.request_next("b")
    probe.request(1)
    _after(probe, clock, 0.3, "a")
    assert created.n == 3
    probe.cancel()


def test_source_not_restarted_when_max_restarts_is_reached(mat, clock):
    created = Counter()
    probe = RestartSource.with_backoff(SHORT.with_max_restarts(1, SHORT_MIN),
                                       lambda: created() or Source.single("a")).run_with(TestSink.probe(), mat)
    probe.request_next("a")
    probe.request(1)
    _after(probe, clock, 0.2, "a")
    probe.request(1)
    probe.expect_complete()
    assert created.n == 2


def test_source_reset_max_restarts_after_running_for_min_backoff(mat, clock):
    created = Counter()
    probe = RestartSource.with_backoff(SETTINGS.with_max_restarts(2, MIN),
                                       lambda: created() or Source.from_iterable(["a"])).run_with(TestSink.probe(), mat)
    probe.request_next("a")
    probe.request(1)
    _after(probe, clock, MIN, "a")
    # backing off for 2 * min; the third source starts then and waits for demand past max_restarts_within
    clock.advance(MIN + MIN * 2 + MIN + 0.5)
    probe.request_next("a")
    probe.request(1)
    _after(probe, clock, MIN, "a")  # a third restart: the counter was reset
    assert created.n == 4
    probe.cancel()


def test_source_max_restarts_within_decides_when_the_count_resets(mat, clock):
    created = Counter()
    probe = RestartSource.with_backoff(
        SHORT.with_max_restarts(2, 1.0),
        lambda: created() or Source.from_iterable(["a", "b"]).take_while(lambda x: x != "b")).run_with(TestSink.probe(), mat)
    probe.request_next("a")
    probe.request(1)
    _after(probe, clock, 0.2, "a")
    probe.request(1)
    clock.advance(SHORT_MIN + SHORT_MIN * 2 + SHORT_MIN)  # would have reset with max_restarts_within = min_backoff
    probe.expect_next("a")
    probe.request(1)
    probe.expect_complete()
    assert created.n == 3


def test_source_fail_when_restart_on_returns_false(mat):
    created = Counter()
    settings = SHORT.with_restart_on(lambda exc: exc != TE("failed"))
    probe = RestartSource.with_backoff(
        settings, lambda: created() or Source.from_iterable(["a", "b", "c"]).map(_failing_on_c)).run_with(TestSink.probe(), mat)
    probe.request_next("a")
    probe.request_next("b")
    probe.request(1)
    assert probe.expect_error() == TE("failed")
    assert created.n == 1


def test_source_jitter_is_drawn_from_the_settings_rng(mat, clock):
    class Fixed:
        def random(self):
            return 0.5

    settings = RestartSettings(1.0, 4.0, 0.2, rng=Fixed())
    assert settings.delay(0) == pytest.approx(1.1)
    assert settings.delay(1) == pytest.approx(2.2)
    assert settings.delay(5) == pytest.approx(4.4)  # max_backoff, then the jitter
    probe = RestartSource.with_backoff(settings, lambda: Source.single("a")).run_with(TestSink.probe(), mat)
    probe.request_next("a")
    probe.request(1)
    _after(probe, clock, 1.1, "a")
    probe.cancel()


# ============================================================================ sink
def _cancelling_sink(created, q):
    def factory():
        created()
        return Flow().take_while(lambda x: x != "cancel", inclusive=True).to(Sink.foreach(q.put))

    return factory


def _next(q, elem):
    assert q.get(timeout=3) == elem


def test_sink_run_normally(mat):
    created = Counter()
    results = []
    probe = TestSource.probe().to_mat(
        RestartSink.with_backoff(SHORT, lambda: created() or Sink.seq().map_materialized_value(results.append)),
        Keep.left).run(mat)
    probe.send_next("a").send_next("b").send_next("c").send_complete()
    assert results[0].result(3) == ["a", "b", "c"]
    assert created.n == 1


def test_sink_restart_on_cancellation(mat, clock):
    created, q = Counter(), queue.Queue()
    probe = TestSource.probe().to_mat(RestartSink.with_backoff(SHORT, _cancelling_sink(created, q)), Keep.left).run(mat)
    probe.send_next("a")
    _next(q, "a")
    probe.send_next("b")
    _next(q, "b")
    probe.send_next("cancel")
    _next(q, "cancel")
    clock.advance(0.2)
    probe.send_next("c")
    _next(q, "c")
    assert created.n == 2
    probe.send_complete()


def test_sink_backoff_before_restart(mat, clock):
    created, q = Counter(), queue.Queue()
    probe = TestSource.probe().to_mat(RestartSink.with_backoff(SETTINGS, _cancelling_sink(created, q)), Keep.left).run(mat)
    probe.send_next("a")
    _next(q, "a")
    probe.send_next("cancel")
    _next(q, "cancel")
    probe.send_next("b")
    clock.advance(MIN - 0.001)
    assert q.empty() and created.n == 1
    clock.advance(0.001)
    _next(q, "b")
    assert created.n == 2
    probe.send_complete()


def test_sink_reset_exponential_backoff_after_running_for_min_backoff(mat, clock):
    created, q = Counter(), queue.Queue()
    probe = TestSource.probe().to_mat(RestartSink.with_backoff(SETTINGS, _cancelling_sink(created, q)), Keep.left).run(mat)
    probe.send_next("a")
    _next(q, "a")
    probe.send_next("cancel")
    _next(q, "cancel")
    clock.advance(MIN)
    probe.send_next("b")
    _next(q, "b")
    probe.send_next("cancel")
    _next(q, "cancel")
    clock.advance(MIN + MIN * 2 + MIN + 0.5)
    probe.send_next("cancel")
    _next(q, "cancel")
    probe.send_next("c")
    clock.advance(MIN - 0.001)
    assert q.empty()
    clock.advance(0.001)  # reset: back to min_backoff
    _next(q, "c")
    assert created.n == 4
    probe.send_complete()


def test_sink_not_restarted_when_completed_while_backing_off(mat, clock):
    created, q = Counter(), queue.Queue()
    probe = TestSource.probe().to_mat(RestartSink.with_backoff(SETTINGS, _cancelling_sink(created, q)), Keep.left).run(mat)
    probe.send_next("a")
    _next(q, "a")
    probe.send_next("cancel")
    _next(q, "cancel")
    probe.send_complete()
    clock.advance(MIN + 0.1)
    assert created.n == 1


def test_sink_not_restarted_when_max_restarts_is_reached(mat, clock):
    created, q = Counter(), queue.Queue()
    probe = TestSource.probe().to_mat(
        RestartSink.with_backoff(SHORT.with_max_restarts(1, SHORT_MIN), _cancelling_sink(created, q)), Keep.left).run(mat)
    probe.send_next("cancel")
    _next(q, "cancel")
    clock.advance(0.2)
    probe.send_next("cancel")
    _next(q, "cancel")
    probe.expect_cancellation()
    assert created.n == 2


def test_sink_reset_max_restarts_after_running_for_min_backoff(mat, clock):
    created, q = Counter(), queue.Queue()
    probe = TestSource.probe().to_mat(
        RestartSink.with_backoff(SETTINGS.with_max_restarts(2, MIN), _cancelling_sink(created, q)), Keep.left).run(mat)
    probe.send_next("cancel")
    _next(q, "cancel")
    clock.advance(MIN)
    probe.send_next("cancel")
    _next(q, "cancel")
    clock.advance(MIN + MIN * 2 + MIN + 0.5)
    probe.send_next("cancel")
    _next(q, "cancel")
    clock.advance(MIN)  # the third restart: the counter was reset
    probe.send_next("cancel")
    _next(q, "cancel")
    assert created.n == 4
    probe.send_complete()


def test_sink_max_restarts_within_decides_when_the_count_resets(mat, clock):
    created, q = Counter(), queue.Queue()
    probe = TestSource.probe().to_mat(
        RestartSink.with_backoff(SHORT.with_max_restarts(2, 1.0), _cancelling_sink(created, q)), Keep.left).run(mat)
    probe.send_next("cancel")
    _next(q, "cancel")
    clock.advance(SHORT_MIN)
    probe.send_next("cancel")
    _next(q, "cancel")
    clock.advance(SHORT_MIN * 2 + SHORT_MIN)  # would have reset with max_restarts_within = min_backoff
    probe.send_next("cancel")
    _next(q, "cancel")
    probe.expect_cancellation()  # no fourth sink: the count was not reset
    assert created.n == 3


def test_sink_fail_when_restart_on_returns_false(mat):
    created = Counter()
    settings = SHORT.with_restart_on(lambda exc: exc != TE("failed"))

    def fn(x):
        if x == "c":
            raise TE("failed")

    probe = TestSource.probe().to_mat(RestartSink.with_backoff(settings, lambda: created() or Sink.foreach(fn)),
                                      Keep.left).run(mat)
    probe.send_next("a").send_next("b").send_next("c")
    assert probe.expect_cancellation() == TE("failed")
    assert created.n == 1


# ============================================================================ flow
class FlowSetup:
    """Pekko's ``setupFlow``: the wrapped flow's in side takes elements while they are not "cancel" (and
    fails on "in error"), recording them and "in complete"/"in error" into ``events``; its out side is a
    publisher probe (one per restart, the latest is ``out``) emitting while the element is not
    "complete" (failing on "error") and recording "out complete" when it completes."""

    def __init__(self, mat, min_backoff, max_backoff, max_restarts=None, only_on_failures=False):
        self.created = 0
        self.events: "queue.Queue" = queue.Queue()
        self.outs = []
        settings = RestartSettings(min_backoff, max_backoff, 0).with_max_restarts(max_restarts, min_backoff)
        make = RestartFlow.on_failures_with_backoff if only_on_failures else RestartFlow.with_backoff
        self.source, self.sink = (TestSource.probe().via_mat(make(settings, self._factory), Keep.left)
                                  .to_mat(TestSink.probe(), Keep.both).run(mat))

    def _factory(self):
        self.created += 1
        events, outs = self.events, self.outs

        def in_error(x):
            if x == "in error":
                raise TE("in error")
            return x

        def out_error(x):
            if x == "error":
                raise TE("error")
            return x

        in_side = (Flow().take_while(lambda x: x != "cancel").map(in_error).map(lambda x: events.put(x) or x)
                   .to(Sink.on_complete(lambda exc: events.put("in complete" if exc is None else "in error"))))

        def watch(probe, fut):
            outs.append(probe)
            fut.add_done_callback(lambda f: f.exception() is None and events.put("out complete"))

        out_side = (TestSource.probe().take_while(lambda x: x != "complete").map(out_error)
                    .watch_termination(watch))
        return Flow.from_graph(GraphDSL.create(lambda b, i, o: FlowShape(i.in_, o.out), in_side, out_side,
                                               combine=lambda a, b: None))

    @property
    def out(self):
        return self.outs[-1]

    def expect(self, *msgs):
        got = [self.events.get(timeout=3) for _ in msgs]
        assert sorted(got) == sorted(msgs), got

    def expect_none(self):
        assert self.events.empty(), self.events.get()


def test_flow_run_normally(mat):
    created = Counter()
    source, sink = (TestSource.probe().via_mat(RestartFlow.with_backoff(SHORT, lambda: created() or Flow()), Keep.left)
                    .to_mat(TestSink.probe(), Keep.both).run(mat))
    source.send_next("a")
    sink.request_next("a")
    source.send_next("b")
    sink.request_next("b")
    assert created.n == 1
    source.send_complete()
    sink.request(1)
    sink.expect_complete()


def _warm_up(f):
    f.source.send_next("a")
    f.expect("a")
    f.out.send_next("b")
    f.sink.request_next("b")


def test_flow_restart_on_cancellation(mat, clock):
    f = FlowSetup(mat, SHORT_MIN, SHORT_MAX)
    _warm_up(f)
    f.source.send_next("cancel")
    clock.advance(0.05)  # the delayed cancellation reaches the restart stage
    f.expect("in complete", "out complete")
    clock.advance(SHORT_MIN)
    f.source.send_next("c")
    f.expect("c")
    f.out.send_next("d")
    f.sink.request_next("d")
    assert f.created == 2
    f.source.send_complete()
    f.out.send_complete()
    f.sink.request(1)
    f.sink.expect_complete()


def test_flow_restart_on_completion(mat, clock):
    f = FlowSetup(mat, SHORT_MIN, SHORT_MAX)
    _warm_up(f)
    f.sink.request(1)
    f.out.send_next("complete")
    f.expect("in complete", "out complete")
    clock.advance(SHORT_MIN)
    f.source.send_next("c")
    f.expect("c")
    f.out.send_next("d")
    f.sink.expect_next("d")
    assert f.created == 2
    f.source.send_complete()
    f.out.send_complete()
    f.sink.request(1)
    f.sink.expect_complete()


def test_flow_restart_on_failure(mat, clock):
    f = FlowSetup(mat, SHORT_MIN, SHORT_MAX)
    _warm_up(f)
    f.sink.request(1)
    f.out.send_next("error")
    f.expect("in complete")
    clock.advance(SHORT_MIN)
    f.source.send_next("c")
    f.expect("c")
    f.out.send_next("d")
    f.sink.expect_next("d")
    assert f.created == 2
    f.source.send_complete()
    f.out.send_complete()
    f.sink.request(1)
    f.sink.expect_complete()


def test_flow_backoff_before_restart(mat, clock):
    f = FlowSetup(mat, MIN, MAX)
    _warm_up(f)
    f.source.send_next("cancel")
    clock.advance(0.05)
    f.expect("in complete", "out complete")
    f.source.send_next("c")
    clock.advance(MIN - 0.001)  # the backoff started when the delayed cancellation arrived
    f.expect_none()
    assert f.created == 1
    clock.advance(0.001)
    f.expect("c")
    assert f.created == 2
    f.source.send_complete()
    f.out.send_complete()
    f.sink.request(1)
    f.sink.expect_complete()


def test_flow_continue_running_out_port_after_in_has_been_sent_completion(mat):
    f = FlowSetup(mat, SHORT_MIN, MAX)
    _warm_up(f)
    f.source.send_complete()
    f.expect("in complete")
    f.out.send_next("c")
    f.sink.request_next("c")
    f.out.send_next("d")
    f.sink.request_next("d")
    f.sink.request(1)
    f.out.send_complete()
    f.expect("out complete")
    f.sink.expect_complete()
    assert f.created == 1


def test_flow_continue_running_in_port_after_out_has_been_cancelled(mat, clock):
    f = FlowSetup(mat, SHORT_MIN, MAX)
    _warm_up(f)
    f.sink.cancel()
    f.expect("out complete")
    f.source.send_next("c")
    f.expect("c")
    f.source.send_next("d")
    f.expect("d")
    f.source.send_next("cancel")
    f.expect("in complete")
    clock.advance(0.05)
    f.source.expect_cancellation()
    assert f.created == 1


def test_flow_not_restarted_on_completion_when_max_restarts_is_reached(mat, clock):
    f = FlowSetup(mat, SHORT_MIN, SHORT_MAX, max_restarts=1)
    f.sink.request(1)
    f.out.send_next("complete")
    f.expect("in complete", "out complete")
    clock.advance(SHORT_MIN)
    f.sink.request(1)
    f.out.send_next("complete")
    f.expect("out complete")
    clock.advance(SHORT_MIN * 3)
    f.expect_none()
    f.sink.expect_complete()
    assert f.created == 2
    f.source.send_complete()
    f.expect("in complete")


def test_flow_stop_on_cancellation_with_on_failures(mat, clock):
    f = FlowSetup(mat, SHORT_MIN, SHORT_MAX, only_on_failures=True)
    _warm_up(f)
    f.source.send_next("cancel")
    f.expect("in complete")
    clock.advance(0.05)
    f.source.expect_cancellation()
    assert f.created == 1
    f.out.send_complete()
    f.sink.request(1)
    f.sink.expect_complete()


def test_flow_stop_on_completion_with_on_failures(mat):
    f = FlowSetup(mat, SHORT_MIN, SHORT_MAX, only_on_failures=True)
    _warm_up(f)
    f.out.send_next("complete")
    f.sink.request(1)
    f.sink.expect_complete()
    assert f.created == 1
    f.source.send_complete()


def test_flow_restart_on_failure_with_on_failures(mat, clock):
    f = FlowSetup(mat, SHORT_MIN, SHORT_MAX, only_on_failures=True)
    _warm_up(f)
    f.sink.request(1)
    f.out.send_next("error")
    f.expect("in complete")
    clock.advance(SHORT_MIN)
    f.source.send_next("c")
    f.expect("c")
    f.out.send_next("d")
    f.sink.expect_next("d")
    assert f.created == 2
    f.source.send_complete()
    f.out.send_complete()
    f.sink.request(1)
    f.sink.expect_complete()


def test_flow_on_failures_wrapped_flow_exception_restarts_configured_times(mat, clock):
    created = Counter()

    def fails_some_times(i):
        if i % 3 == 0:
            raise TE("fail")
        return i

    restart = RestartFlow.on_failures_with_backoff(
        RestartSettings(1.0, 2.0, 0).with_max_restarts(2, 1.0),
        lambda: created() or Flow().map(fails_some_times), cancellation_delay=0.1)
    fut = Source.range(1, 8).via(restart).run_with(Sink.seq(), mat)
    clock.advance(1.0)
    clock.advance(2.0)
    assert fut.result(3) == [1, 2, 4, 5, 7]
    assert created.n == 3


def test_flow_fail_when_restart_on_returns_false(mat, clock):
    created = Counter()
    settings = SHORT.with_restart_on(lambda exc: exc != TE("failed"))
    probe = (Source.from_iterable(["a", "b", "c", "d"])
             .via(RestartFlow.on_failures_with_backoff(settings, lambda: created() or Flow().map(_failing_on_c)))
             .run_with(TestSink.probe(), mat))
    probe.request_next("a")
    probe.request_next("b")
    probe.request(1)
    assert probe.expect_error() == TE("failed")
    assert created.n == 1
    clock.advance(0.05)  # the wrapped flow's cancellation of its upstream arrives (delayed) and ends the stage


# ============================================================================ settings
@pytest.mark.parametrize("args,kwargs,err,msg", [
    ((0, 1, 0), {}, ValueError, "RestartSettings: min_backoff must be > 0 seconds, got 0"),
    ((1, 0.5, 0), {}, ValueError, "RestartSettings: max_backoff must be >= min_backoff"),
    ((1, 2, -0.1), {}, ValueError, "RestartSettings: random_factor must be >= 0"),
    (("1", 2, 0), {}, TypeError, "RestartSettings: min_backoff must be a number of seconds"),
    ((1, 2, 0), {"max_restarts": -1}, ValueError, "RestartSettings: max_restarts must be >= 0"),
    ((1, 2, 0), {"max_restarts": 1.5}, TypeError, "RestartSettings: max_restarts must be an int"),
    ((1, 2, 0), {"max_restarts_within": -1}, ValueError, "RestartSettings: max_restarts_within must be >= 0"),
    ((1, 2, 0), {"restart_on": 3}, TypeError, "RestartSettings: argument 'restart_on' must be callable"),
])
def test_settings_validation(args, kwargs, err, msg):
    with pytest.raises(err, match=msg):
        RestartSettings(*args, **kwargs)


def test_settings_defaults_and_delays():
    s = RestartSettings(0.2, 0.3, 0)
    assert s.max_restarts_within == 0.2
    assert [s.delay(n) for n in range(3)] == [0.2, 0.3, 0.3]
    assert "max_restarts=unlimited" in repr(s)


def test_factory_validation():
    with pytest.raises(TypeError, match="RestartSource.with_backoff: settings must be a RestartSettings"):
        RestartSource.with_backoff(None, lambda: Source.empty())
    with pytest.raises(TypeError, match="RestartFlow.with_backoff: argument 'factory' must be callable"):
        RestartFlow.with_backoff(SHORT, 3)
    with pytest.raises(TypeError, match="RestartSink.with_backoff: argument 'factory' must be callable"):
        RestartSink.with_backoff(SHORT, None)
    with pytest.raises(ValueError, match="RestartFlow.with_backoff: cancellation_delay must be >= 0"):
        RestartFlow.with_backoff(SHORT, Flow, cancellation_delay=-1)


def test_factory_returning_the_wrong_shape_fails_the_stream(mat):
    probe = RestartSource.with_backoff(SHORT, lambda: Sink.ignore()).run_with(TestSink.probe(), mat)
    probe.request(1)
    assert isinstance(probe.expect_error(), (TypeError, ValueError))
