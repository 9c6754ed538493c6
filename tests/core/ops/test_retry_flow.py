"""RetryFlow.with_backoff: ported from Pekko's RetryFlowSpec. The ``withBackoffAndContext`` cases ("Backing
off", "Aborting", "Coordinator") are ported on plain ``(value, context)`` tuples - what Pekko's
``FlowWithContext.fromTuples`` carries - since Atoll has no FlowWithContext. Pekko's bench
``Flow.fromSinkAndSourceMat(TestSink, TestSource)`` is built with GraphDSL. Every case runs on
``ManualClock``: the backoffs are checked exactly (nothing one millisecond before the due time), and
"exponentially backoff between retries" records the virtual time of each retry. Pekko's
``internalIn.expectRequest() shouldBe 1`` is not ported: Atoll's publisher probe sees its input boundary's
batched demand, not the stage's single pull (the one-in-flight rule itself is checked by the same case)."""
from __future__ import annotations

import pytest
from ops_kit import TE

from atoll import Flow, FlowShape, GraphDSL, Keep, Materializer, Sink, Source
from atoll.dsl.restart import RetryFlow
from atoll.errors import IllegalStateError
from atoll.testkit import ManualClock, TestSink, TestSource, assert_all_stages_stopped

FAILED = TE("failed")
FAILED_ELEM = ("failure", FAILED)


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


def fail_even_values(i):
    return FAILED_ELEM if i % 2 == 0 else ("success", i)


def increment_failed_values(i, out):
    return i + 1 if out[0] == "failure" else None


# ============================================================================ RetryFlow.withBackoff
def test_send_elements_through(mat):
    got = (Source.from_iterable([13, 17, 19, 23, 27])
           .via(RetryFlow.with_backoff(0.01, 5.0, 0, 3, Flow().map(fail_even_values), increment_failed_values))
           .run_with(Sink.seq(), mat).result(3))
    assert got == [("success", x) for x in (13, 17, 19, 23, 27)]


def test_allow_retrying_a_successful_element(mat, clock):
    retry = RetryFlow.with_backoff(0.01, 5.0, 0, 3, Flow().map(lambda i: i // 2),
                                   lambda i, result: result if result > 0 else None)
    source, sink = TestSource.probe().via(retry).to_mat(TestSink.probe(), Keep.both).run(mat)
    sink.request(4)
    source.send_next(5)
    sink.expect_no_message(0.01 + 0.02 - 0.001)  # 5 -> 2 (retry after 10 ms) -> 1 (after 20 ms) -> 0
    clock.advance(0.001)
    sink.expect_next(0)
    source.send_next(2)
    sink.expect_no_message(0.01 - 0.001)
    clock.advance(0.001)
    sink.expect_next(0)
    source.send_complete()
    sink.expect_complete()


def test_retry_up_to_max_retries_times_and_then_return_failed_element(mat, clock):
    tried = []
    retry = RetryFlow.with_backoff(0.01, 0.1, 0, 5, Flow().map(lambda x: tried.append(x) or -1),
                                   lambda x, result: x if result < 0 else None)
    source, sink = TestSource.probe().via(retry).to_mat(TestSink.probe(), Keep.both).run(mat)
    sink.request(5)
    source.send_next(1)
    clock.advance(0.01 + 0.02 + 0.04 + 0.08 + 0.1)
    sink.expect_next(-1)
    assert tried == [1] * 6
    source.send_complete()
    sink.expect_complete()


# ============================================================================ backing off (tuples)
def fail_even_tuple(t):
    i, ctx = t
    return (FAILED_ELEM if i % 2 == 0 else ("success", i)), ctx


def increment_failed_tuple(in_, out):
    (i, _), (res, out_ctx) = in_, out
    return (i + 1, out_ctx + 1) if res[0] == "failure" else None


def test_have_min_backoff(mat, clock):
    source, sink = (TestSource.probe()
                    .via(RetryFlow.with_backoff(0.2, 5.0, 0, 3, Flow().map(fail_even_tuple), increment_failed_tuple))
                    .to_mat(TestSink.probe(), Keep.both).run(mat))
    sink.request(99)
    source.send_next((1, 0))
    sink.expect_next((("success", 1), 0))
    source.send_next((2, 0))
    sink.expect_no_message(0.2 - 0.001)
    clock.advance(0.001)
    sink.expect_next((("success", 3), 1))
    source.send_complete()
    sink.expect_complete()


def test_use_min_backoff_for_every_try(mat, clock):
    source, sink = (TestSource.probe()
                    .via(RetryFlow.with_backoff(0.05, 5.0, 0, 3, Flow().map(lambda t: (FAILED_ELEM, t[1])),
                                                increment_failed_tuple))
                    .to_mat(TestSink.probe(), Keep.both).run(mat))
    sink.request(1)
    source.send_next((10, 0))
    sink.expect_no_message(0.05 * 3)
    clock.advance(0.05 * 4)  # exponential: 0.05 + 0.1 + 0.2 in all
    sink.expect_next((FAILED_ELEM, 3))
    source.send_complete()
    sink.expect_complete()


def test_exponentially_backoff_between_retries(mat, clock):
    retries = 7
    flow = Flow().map(lambda t: ((clock.now(),) + t[0], t[1]))
    source, sink = (TestSource.probe()
                    .via(RetryFlow.with_backoff(0.01, 5.0, 0, retries, flow, lambda in_, out: out))
                    .to_mat(TestSink.probe(), Keep.both).run(mat))
    sink.request(1)
    source.send_next(((), "ctx"))
    clock.advance(0.01 * (2 ** retries))
    times, ctx = sink.expect_next()
    assert ctx == "ctx" and len(times) == retries + 1
    times = sorted(times)
    gaps = [round(b - a, 6) for a, b in zip(times, times[1:])]
    assert gaps == [round(0.01 * 2 ** n, 6) for n in range(retries)]
    source.send_complete()
    sink.expect_complete()


# ============================================================================ aborting
def test_propagate_error_from_upstream(mat, clock):
    def decide(in_, out):
        (i, _), (res, ctx) = in_, out
        return (i + 1, ctx) if res[0] == "failure" else None

    source, sink = (TestSource.probe()
                    .via(RetryFlow.with_backoff(0.01, 5.0, 0, 3, Flow().map(fail_even_tuple), decide))
                    .to_mat(TestSink.probe(), Keep.both).run(mat))
    sink.request(99)
    source.send_next((1, 1))
    sink.expect_next((("success", 1), 1))
    source.send_next((2, 2))
    clock.advance(0.01)
    sink.expect_next((("success", 3), 2))
    source.send_error(FAILED)
    assert sink.expect_error() == FAILED


class Bench:
    """Pekko's ConstructBench: external probes around the RetryFlow, internal probes as the wrapped flow."""

    def __init__(self, mat, retry_with=lambda i, o: None):
        dangerous = Flow.from_graph(GraphDSL.create(lambda b, s, o: FlowShape(s.in_, o.out),
                                                    TestSink.probe(), TestSource.probe(), combine=Keep.both))
        (self.external_in, (self.internal_out, self.internal_in)), self.external_out = (
            TestSource.probe()
            .via_mat(RetryFlow.with_backoff(0.01, 1.0, 0, 3, dangerous, retry_with), Keep.both)
            .to_mat(TestSink.probe(), Keep.both).run(mat))


def _spin(v, _out):
    return v


def test_propagate_error_from_upstream_on_start(mat):
    b = Bench(mat)
    b.external_out.request(99)
    b.external_in.send_error(FAILED)
    assert b.external_out.expect_error() == FAILED
    assert b.internal_out.expect_error() == FAILED
    b.internal_in.expect_cancellation()


def test_propagate_error_from_upstream_before_start(mat):
    b = Bench(mat)
    b.external_in.send_error(FAILED)
    b.external_out.request(1)
    assert b.external_out.expect_error() == FAILED
    b.internal_in.expect_cancellation()


def test_propagate_error_on_the_inner_flow_after_start(mat):
    b = Bench(mat)
    b.external_out.request(99)
    b.external_in.send_next((1, 0))
    b.internal_out.request_next((1, 0))
    b.internal_in.send_next((1, 0))
    b.external_out.expect_next((1, 0))
    b.internal_in.send_error(FAILED)
    assert b.external_out.expect_error() == FAILED
    b.external_in.expect_cancellation()
    assert b.internal_out.expect_error() == FAILED


def test_propagate_error_on_the_inner_flow_on_start(mat):
    b = Bench(mat)
    b.external_out.request(29)
    b.internal_in.send_error(FAILED)
    assert b.external_out.expect_error() == FAILED
    b.external_in.expect_cancellation()
    assert b.internal_out.expect_error() == FAILED


def test_propagate_non_error_cancel_on_the_inner_flow_on_start(mat):
    b = Bench(mat)
    b.external_out.request(29)
    b.internal_out.cancel()
    b.external_out.expect_complete()
    b.external_in.expect_cancellation()
    b.internal_in.expect_cancellation()


def test_propagate_error_on_the_inner_flow_before_start(mat):
    b = Bench(mat)
    b.internal_in.send_error(FAILED)
    b.external_out.request(13)
    assert b.external_out.expect_error() == FAILED
    b.external_in.expect_cancellation()
    assert b.internal_out.expect_error() == FAILED


def test_propagate_error_before_the_retry_flow_while_on_retry_spin(mat):
    b = Bench(mat, _spin)
    b.external_out.request(92)
    b.external_in.send_next((1, 0))
    b.internal_out.request_next((1, 0))
    b.internal_in.send_next((1, 0))
    b.internal_out.request(1)
    b.external_out.expect_no_message(0.01)  # the retry is due after 10 ms
    b.internal_out.expect_next((1, 0))
    b.external_in.send_error(FAILED)
    assert b.external_out.expect_error() == FAILED
    b.internal_in.expect_cancellation()


def test_propagate_error_on_the_inner_flow_while_on_retry_spin(mat):
    b = Bench(mat, _spin)
    b.external_out.request(35)
    b.external_in.send_next((1, 0))
    b.internal_out.request_next((1, 0))
    b.internal_in.send_next((1, 0))
    b.internal_out.request(1)
    b.external_out.expect_no_message(0.01)
    b.internal_out.expect_next((1, 0))
    b.internal_in.send_error(FAILED)
    assert b.external_out.expect_error() == FAILED
    b.external_in.expect_cancellation()
    assert b.internal_out.expect_error() == FAILED


def test_allow_for_downstream_cancel_while_element_is_in_flow(mat):
    b = Bench(mat, _spin)
    b.external_out.request(78)
    b.external_in.send_next((1, 0))
    b.internal_out.request_next((1, 0))
    b.external_out.cancel()
    b.internal_in.expect_cancellation()
    b.external_in.expect_cancellation()
    b.internal_out.expect_complete()


def test_allow_for_downstream_cancel_while_retry_is_backing_off(mat, clock):
    b = Bench(mat, _spin)
    b.external_out.request(35)
    b.external_in.send_next((1, 0))
    b.internal_out.request_next((1, 0))
    b.internal_in.send_next((1, 0))
    b.external_out.cancel()
    b.internal_in.expect_cancellation()
    b.external_in.expect_cancellation()
    b.internal_out.expect_complete()
    clock.advance(0.05)
    assert clock.pending_timers == 0


def test_finish_only_after_processing_all_elements_in_stream(mat):
    b = Bench(mat)
    b.external_out.request(32)
    b.external_in.send_next((1, 0))
    b.external_in.send_complete()
    b.internal_out.request_next((1, 0))
    b.internal_in.send_next((1, 0))
    b.external_out.request_next((1, 0))
    b.external_out.expect_complete()
    b.internal_out.expect_complete()
    b.internal_in.expect_cancellation()


# ============================================================================ coordinator
def test_send_elements_across(mat):
    b = Bench(mat)
    el_a = ("A", 123)
    b.external_in.send_next(el_a)
    b.internal_out.request_next(el_a)
    res_a = (("success", "result A"), 123)
    b.internal_in.send_next(res_a)
    b.external_out.request_next(res_a)
    b.external_in.send_complete()
    b.external_out.expect_complete()


def test_retry_for_a_failure(mat, clock):
    b = Bench(mat, lambda i, out: None if out[0][0] == "success" else ("A'", 2))
    b.external_out.request(1)
    element1 = ("A", 1)
    b.external_in.send_next(element1)
    b.internal_out.request_next(element1)
    b.internal_in.send_next((("failure", "boom"), 1))
    b.internal_out.request(1)
    clock.advance(0.01)
    assert b.internal_out.expect_next() == ("A'", 2)
    res1 = (("success", "Ares"), 1)
    b.internal_in.send_next(res1)
    b.external_out.expect_next(res1)
    b.external_in.send_complete()
    b.external_out.request(1)
    b.external_out.expect_complete()


def test_fail_if_inner_flow_emits_twice(mat):
    b = Bench(mat)
    b.external_out.request(99)
    el_a = ("A", 123)
    b.external_in.send_next(el_a)
    b.internal_out.request_next(el_a)
    res_a = (("success", "result A"), 123)
    b.internal_in.send_next(res_a)
    b.internal_in.send_next((("success", "result B"), 222))
    b.external_out.expect_next(res_a)
    assert isinstance(b.external_out.expect_error(), IllegalStateError)


def test_allow_more_demand_in_inner_flow_but_never_more_than_one_element_in_the_cycle(mat):
    b = Bench(mat)
    b.external_out.request(1)
    b.internal_out.request(1)
    el_a = ("A", 123)
    b.external_in.send_next(el_a)
    b.internal_out.expect_next(el_a)
    b.internal_out.request(1)
    b.internal_out.expect_no_message(0.05)
    res_a = (("success", "result A"), 123)
    b.internal_in.send_next(res_a)
    b.internal_out.expect_no_message(0.05)  # no element enters before res_a was pushed out
    el_b = ("B", 567)
    b.external_in.send_next(el_b)
    b.internal_out.expect_next(el_b)
    b.external_out.expect_next(res_a)
    b.external_in.send_complete()
    b.internal_in.send_next(res_a)
    b.external_out.request(1)
    b.external_out.expect_next(res_a)
    b.external_out.expect_complete()


# ============================================================================ validation
@pytest.mark.parametrize("args,err,msg", [
    ((-1, 1, 0, 3), ValueError, "RetryFlow.with_backoff: min_backoff must be >= 0"),
    ((1, 0.5, 0, 3), ValueError, "RetryFlow.with_backoff: max_backoff must be >= min_backoff"),
    ((0.1, 1, -1, 3), ValueError, "RetryFlow.with_backoff: random_factor must be >= 0"),
    ((0.1, 1, 0, -1), ValueError, "RetryFlow.with_backoff: max_retries must be >= 0"),
    ((0.1, 1, 0, 1.5), TypeError, "RetryFlow.with_backoff: max_retries must be an int"),
])
def test_validation(args, err, msg):
    with pytest.raises(err, match=msg):
        RetryFlow.with_backoff(*args, Flow(), lambda i, o: None)


def test_validation_of_flow_and_decide_retry():
    with pytest.raises(TypeError, match="RetryFlow.with_backoff: argument 'decide_retry' must be callable"):
        RetryFlow.with_backoff(0.1, 1, 0, 1, Flow(), None)
    with pytest.raises(TypeError, match="RetryFlow.with_backoff: flow must be a Flow"):
        RetryFlow.with_backoff(0.1, 1, 0, 1, Sink.ignore(), lambda i, o: None)


def test_decide_retry_failure_fails_the_stream(mat):
    def decide(i, o):
        raise TE("decide")

    with pytest.raises(TE):
        Source.single(1).via(RetryFlow.with_backoff(0.01, 1, 0, 1, Flow(), decide)).run_with(Sink.seq(), mat).result(3)
