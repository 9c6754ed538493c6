"""grouped_within / grouped_weighted_within: ported from Pekko's FlowGroupedWithinSpec, on virtual
time (``Materializer.local(clock=ManualClock())``): the timer cases check the exact moment a group
closes (``clock.advance`` and the probes' ``expect_no_message`` move time; nothing sleeps).

Added beyond the spec: the timer restarting after a group closed by size, Restart supervision, a
negative weight, and the build-time validation."""
from __future__ import annotations

import random

import pytest
from ops_kit import RANDOM_TEST_RANGE, TE, run_script

from atoll import Attributes, Flow, Keep, Materializer, Sink, Source, Supervision
from atoll.testkit import ManualClock, TestSink, TestSource, assert_all_stages_stopped


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture(params=["fused", "unfused"])
def mat(request, clock):
    m = Materializer.local(clock=clock, fusion=request.param == "fused")
    yield m
    try:
        assert_all_stages_stopped(m, timeout=5.0)
    finally:
        m.shutdown()


def _probes(op, mat):
    return TestSource.probe().via(op(Flow())).to_mat(TestSink.probe(), Keep.both).run(mat)


# =========================================================================== GroupedWithin
def test_group_elements_within_the_duration(mat, clock):
    src, sink = _probes(lambda f: f.grouped_within(1000, 1.0), mat)
    sink.request(100)
    n = 0
    for _ in range(2):
        for _ in range(src.expect_request()):
            n += 1
            src.send_next(n)
    first = n
    demand3 = src.expect_request()
    sink.expect_no_message(0.999)
    clock.advance(0.001)
    sink.expect_next(list(range(1, first + 1)))
    for _ in range(demand3):
        n += 1
        src.send_next(n)
    sink.expect_no_message(0.3)
    clock.advance(0.7)
    sink.expect_next(list(range(first + 1, n + 1)))
    sink.expect_no_message(0.3)
    src.expect_request()
    src.send_next(n + 1)
    src.send_complete()
    sink.expect_next([n + 1])
    sink.expect_complete()
    sink.expect_no_message(0.2)


def test_deliver_buffered_elements_on_complete_before_the_timeout(mat):
    sink = Source.range(1, 4).grouped_within(1000, 10.0).run_with(TestSink.probe(), mat)
    sink.request(100)
    sink.expect_next([1, 2, 3])
    sink.expect_complete()
    sink.expect_no_message(0.2)


def test_buffer_groups_until_requested_from_downstream(mat, clock):
    src, sink = _probes(lambda f: f.grouped_within(1000, 1.0), mat)
    sink.request(1)
    d1 = src.expect_request()
    for i in range(1, d1 + 1):
        src.send_next(i)
    clock.advance(1.0)
    sink.expect_next(list(range(1, d1 + 1)))
    d2 = src.expect_request()
    for i in range(d1 + 1, d1 + d2 + 1):
        src.send_next(i)
    sink.expect_no_message(1.3)  # the timer fired: the group waits for demand
    sink.request(1)
    sink.expect_next(list(range(d1 + 1, d1 + d2 + 1)))
    src.send_complete()
    sink.expect_complete()
    sink.expect_no_message(0.1)


def test_drop_empty_groups(mat, clock):
    src, sink = _probes(lambda f: f.grouped_within(1000, 0.5), mat)
    sink.request(2)
    src.expect_request()
    sink.expect_no_message(0.6)
    src.send_next(1)
    src.send_next(2)
    clock.advance(0.4)  # the timer is due at 1 s
    sink.expect_next([1, 2])
    sink.expect_no_message(1.1)  # nothing more arrived: no empty group
    sink.request(3)
    sink.expect_no_message(0.6)
    src.send_complete()
    sink.expect_complete()


def test_not_emit_empty_group_when_finished_while_not_being_pushed(mat):
    src, sink = _probes(lambda f: f.grouped_within(1000, 0.05), mat)
    sink.request(1)
    src.expect_request()
    src.send_complete()
    sink.expect_complete()


def test_reset_time_window_when_max_elements_reached(mat, clock):
    src, sink = _probes(lambda f: f.grouped_within(3, 2.0), mat)
    sink.request(2)
    sink.expect_no_message(1.0)
    for i in range(1, 5):
        src.send_next(i)
    sink.expect_next([1, 2, 3])  # at 1 s, by size: the window restarts, next due at 3 s
    sink.expect_no_message(1.999)
    clock.advance(0.001)
    sink.expect_next([4])
    src.send_complete()
    sink.expect_complete()
    sink.expect_no_message(0.1)


def test_reset_time_window_when_exact_max_elements_reached(mat):
    src, sink = _probes(lambda f: f.grouped_within(3, 1.0), mat)
    sink.request(2)
    for i in range(1, 4):
        src.send_next(i)
    sink.expect_next([1, 2, 3])
    src.send_complete()
    sink.expect_complete()


@pytest.mark.parametrize("seed", RANDOM_TEST_RANGE)
def test_group_evenly(mat, seed):
    rng = random.Random(seed)
    phases = []
    for _ in RANDOM_TEST_RANGE:
        xs = [rng.randint(0, 1 << 30) for _ in range(3)]
        phases.append((xs, [xs]))
    run_script(mat, lambda f: f.grouped_within(3, 600.0), phases, seed=seed)


@pytest.mark.parametrize("seed", RANDOM_TEST_RANGE)
def test_group_with_rest(mat, seed):
    rng = random.Random(seed)
    phases = []
    for _ in RANDOM_TEST_RANGE:
        xs = [rng.randint(0, 1 << 30) for _ in range(3)]
        phases.append((xs, [xs]))
    x = rng.randint(0, 1 << 30)
    phases.append(([x], [[x]]))
    run_script(mat, lambda f: f.grouped_within(3, 600.0), phases, seed=seed, flush_on_complete=1)


def test_group_with_small_groups_with_backpressure(mat, clock):
    fut = (Source.range(1, 11).grouped_within(1, 86400.0).throttle(1, 0.11, 0, ThrottleMode.shaping)
           .run_with(Sink.seq(), mat))
    clock.advance(1.1)
    assert fut.result(3) == [[i] for i in range(1, 11)]


# =========================================================================== GroupedWeightedWithin
def test_handle_elements_larger_than_the_limit(mat):
    sink = (Source.from_iterable([1, 2, 3, 101, 4, 5, 6]).grouped_weighted_within(100, 0.1, lambda x: x)
            .run_with(TestSink.probe(), mat))
    sink.request(1)
    sink.expect_next([1, 2, 3])
    sink.request(1)
    sink.expect_next([101])
    sink.request(1)
    sink.expect_next([4, 5, 6])
    sink.expect_complete()


def test_not_drop_a_pending_last_element_on_upstream_finish(mat):
    src, sink = _probes(lambda f: f.grouped_weighted_within(5, 0.05, lambda x: x), mat)
    sink.ensure_subscription()
    sink.expect_no_message(0.1)
    src.send_next(1)
    src.send_next(2)
    src.send_next(3)
    src.send_complete()
    sink.request(1)
    sink.expect_next([1, 2])
    sink.expect_no_message(0.1)
    sink.request(1)
    sink.expect_next([3])
    sink.expect_complete()


def test_append_zero_weighted_elements_to_a_full_group_before_timeout_if_downstream_has_not_pulled(mat, clock):
    src, sink = _probes(lambda f: f.grouped_weighted_within(5, 0.05, len), mat)
    sink.ensure_subscription()
    for s in ("333", "22", "", "", ""):
        src.send_next(s)
    clock.settle()  # the elements reached the stage before the demand (Pekko's spec assumes so)
    sink.request(1)
    sink.expect_next(["333", "22", "", "", ""])
    src.send_next("")
    src.send_next("")
    src.send_complete()
    sink.request(1)
    sink.expect_next(["", ""])
    sink.expect_complete()


def test_not_emit_an_empty_group_if_first_element_is_heavier_than_max_weight(mat):
    src, sink = _probes(lambda f: f.grouped_weighted_within(10, 0.05, lambda x: x), mat)
    sink.ensure_subscription()
    sink.request(1)
    src.send_next(11)
    sink.expect_next([11])
    src.send_complete()
    sink.expect_complete()


def test_handle_zero_cost_function_to_get_only_time_based_grouping_without_limit(mat, clock):
    src, sink = _probes(lambda f: f.grouped_weighted_within(1, 0.1, lambda _: 0), mat)
    sink.ensure_subscription()
    sink.request(1)
    for s in ("333", "22", "333", "22"):
        src.send_next(s)
    sink.expect_no_message(0.05)
    clock.advance(0.05)
    sink.expect_next(["333", "22", "333", "22"])
    src.send_complete()
    sink.expect_complete()


def test_group_by_max_weight_and_max_number_of_elements_reached(mat):
    src, sink = _probes(lambda f: f.grouped_weighted_within(10, 30.0, lambda x: x, max_number=3), mat)
    sink.ensure_subscription()
    for x in (1, 2, 3, 4, 5, 6, 11, 7, 2):
        src.send_next(x)
    src.send_complete()
    for group in ([1, 2, 3], [4, 5], [6], [11], [7, 2]):
        sink.request(1)
        sink.expect_next(group)
    sink.expect_complete()


def _boom_on_99(x):
    if x == 99:
        raise TE("cost function boom")
    return x


def test_stop_when_cost_function_throws_and_supervision_is_stop(mat):
    op = lambda f: f.grouped_weighted_within(100, 30.0, _boom_on_99, max_number=3).with_attributes(  # noqa: E731
        Attributes.supervision_strategy(Supervision.stopping_decider))
    src, sink = _probes(op, mat)
    sink.ensure_subscription()
    sink.request(1)
    src.send_next(1)
    src.send_next(99)
    assert sink.expect_error() == TE("cost function boom")


def test_stop_when_cost_function_throws_with_default_supervision(mat):
    fut = (Source.from_iterable([1, 99, 2]).grouped_weighted_within(100, 30.0, _boom_on_99, max_number=3)
           .run_with(Sink.ignore(), mat))
    with pytest.raises(TE, match="cost function boom"):
        fut.result(3)


def test_resume_when_cost_function_throws_and_keep_current_group(mat):
    op = lambda f: f.grouped_weighted_within(100, 30.0, _boom_on_99, max_number=3).with_attributes(  # noqa: E731
        Attributes.supervision_strategy(Supervision.resuming_decider))
    src, sink = _probes(op, mat)
    sink.ensure_subscription()
    for x in (1, 2, 99, 3):
        src.send_next(x)
    sink.request(1)
    sink.expect_next([1, 2, 3])
    src.send_complete()
    sink.expect_complete()


def test_restart_when_cost_function_throws_drops_the_current_group_and_restarts_the_window(mat, clock):
    op = lambda f: f.grouped_weighted_within(100, 1.0, _boom_on_99, max_number=3).with_attributes(  # noqa: E731
        Attributes.supervision_strategy(Supervision.restarting_decider))
    src, sink = _probes(op, mat)
    sink.request(2)
    src.send_next(1)
    src.send_next(2)
    clock.advance(0.5)
    src.send_next(99)  # the group [1, 2] is gone; the window restarts at 0.5 s
    src.send_next(3)
    sink.expect_no_message(0.999)
    clock.advance(0.001)
    sink.expect_next([3])
    src.send_complete()
    sink.expect_complete()


def test_negative_weight_fails_the_stream(mat):
    fut = Source.from_iterable([1, -2]).grouped_weighted_within(10, 1.0, lambda x: x).run_with(Sink.ignore(), mat)
    with pytest.raises(ValueError, match=r"^Negative weight \[-2\] for element \[-2\] is not allowed$"):
        fut.result(3)


# =========================================================================== validation
def test_validation():
    with pytest.raises(ValueError, match=r"^grouped_within: argument 'n' must be >= 1, got 0$"):
        Flow().grouped_within(0, 1.0)
    with pytest.raises(ValueError, match=r"^grouped_within: argument 'd' must be > 0, got 0$"):
        Flow().grouped_within(3, 0)
    with pytest.raises(ValueError, match=r"^grouped_weighted_within: argument 'max_weight' must be >= 1, got 0$"):
        Flow().grouped_weighted_within(0, 1.0, len)
    with pytest.raises(ValueError, match=r"^grouped_weighted_within: argument 'max_number' must be >= 1, got 0$"):
        Flow().grouped_weighted_within(5, 1.0, len, max_number=0)
    with pytest.raises(TypeError, match=r"^grouped_weighted_within: argument 'cost' must be callable"):
        Flow().grouped_weighted_within(5, 1.0, 3)
    with pytest.raises(ValueError, match=r"^grouped_weighted_within: argument 'd' must be > 0, got -1$"):
        Flow().grouped_weighted_within(5, -1, len)


from atoll._impl.ops.throttle import ThrottleMode  # noqa: E402
