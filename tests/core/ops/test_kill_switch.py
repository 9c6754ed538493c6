"""Kill switches: ported from Pekko's FlowKillSwitchSpec (UniqueKillSwitch and SharedKillSwitch).

Pekko's ``Source.maybe`` (never emits until completed from outside) is ``Source.never()`` here: the
switch is what ends those streams.

Added beyond the Pekko spec: switches stop backpressured, idle and infinite streams, a unique
switch used before its stream started, every materialization of ``KillSwitches.single()`` gets its
own switch, the cancellation cause upstream sees (a non-failure cause for ``shutdown``, the
exception for ``abort``), and the validation of ``abort``'s argument and of a shared switch's name.
"""
from __future__ import annotations

import pytest
from ops_kit import TE

from atoll import Done, Flow, Keep, KillSwitches, SharedKillSwitch, Sink, Source, UniqueKillSwitch
from atoll.errors import NonFailureCancellation
from atoll.testkit import TestSink, TestSource


def _unique(mat):
    (src, switch), sink = (
        TestSource.probe().via_mat(KillSwitches.single(), Keep.both).to_mat(TestSink.probe(), Keep.both).run(mat)
    )
    return src, switch, sink


def _shared(mat, switch):
    return TestSource.probe().via(switch.flow()).to_mat(TestSink.probe(), Keep.both).run(mat)


def _one_element_through(src, sink, elem=1):
    sink.request(1)
    src.send_next(elem)
    sink.expect_next(elem)


# =========================================================================== UniqueKillSwitch
def test_unique_stops_a_stream_if_requested(mat):
    src, switch, sink = _unique(mat)
    _one_element_through(src, sink)
    switch.shutdown()
    assert isinstance(src.expect_cancellation(), NonFailureCancellation)
    sink.expect_complete()


def test_unique_fails_a_stream_if_requested(mat):
    src, switch, sink = _unique(mat)
    _one_element_through(src, sink)
    switch.abort(TE("Abort"))
    assert src.expect_cancellation() == TE("Abort")
    sink.expect_error(TE("Abort"))


def test_unique_works_if_used_multiple_times_in_a_flow(mat):
    ((src, switch1), switch2), sink = (
        TestSource.probe()
        .via_mat(KillSwitches.single(), Keep.both)
        .recover(lambda e: -1 if isinstance(e, TE) else _reraise(e))
        .via_mat(KillSwitches.single(), Keep.both)
        .to_mat(TestSink.probe(), Keep.both)
        .run(mat)
    )
    _one_element_through(src, sink)
    switch1.abort(TE("Abort"))
    src.expect_cancellation()
    sink.request_next(-1)
    switch2.shutdown()
    sink.expect_complete()


def test_unique_ignores_completion_after_already_completed(mat):
    src, switch, sink = _unique(mat)
    src.ensure_subscription()
    sink.ensure_subscription()
    switch.shutdown()
    src.expect_cancellation()
    sink.expect_complete()
    switch.abort(TE("Won't happen"))
    src.expect_no_message(0.05)
    sink.expect_no_message(0.05)


def test_unique_first_call_wins_abort_then_shutdown(mat):
    src, switch, sink = _unique(mat)
    _one_element_through(src, sink)
    switch.abort(TE("first"))
    switch.shutdown()
    switch.abort(TE("second"))
    src.expect_cancellation()
    sink.expect_error(TE("first"))
    sink.expect_no_message(0.05)


def test_unique_switch_used_before_its_stream_started_still_stops_it(mat):
    # the switch is triggered right after run() returns, possibly before the stage started
    for _ in range(5):
        src, switch, sink = _unique(mat)
        switch.shutdown()
        src.expect_cancellation()
        sink.expect_subscription_and_complete()


def test_unique_stops_a_backpressured_stream(mat):
    src, switch, sink = _unique(mat)
    src.send_next_many(1, 2, 3)  # nobody requested them: they wait in the stream
    switch.shutdown()
    src.expect_cancellation()
    sink.expect_complete()


def test_unique_aborts_an_infinite_stream(mat):
    switch, fut = (
        Source.repeat(1).via_mat(KillSwitches.single(), Keep.right).to_mat(Sink.ignore(), Keep.both).run(mat)
    )
    switch.abort(TE("stop"))
    assert fut.exception(3) == TE("stop")


def test_unique_stops_an_idle_stream(mat):
    switch, fut = Source.never().via_mat(KillSwitches.single(), Keep.right).to_mat(Sink.seq(), Keep.both).run(mat)
    switch.shutdown()
    assert fut.result(3) == []


def test_single_materializes_a_new_unique_switch_each_time(mat):
    flow = KillSwitches.single()
    s1, f1 = Source.never().via_mat(flow, Keep.right).to_mat(Sink.ignore(), Keep.both).run(mat)
    s2, f2 = Source.never().via_mat(flow, Keep.right).to_mat(Sink.ignore(), Keep.both).run(mat)
    assert isinstance(s1, UniqueKillSwitch) and isinstance(s2, UniqueKillSwitch) and s1 is not s2
    s1.shutdown()
    assert f1.result(3) is Done
    assert not f2.done()
    s2.abort(TE("two"))
    assert f2.exception(3) == TE("two")


def test_unique_passes_elements_unchanged_and_completes_with_upstream(mat):
    switch, fut = Source.range(0, 100).via_mat(KillSwitches.single(), Keep.right).to_mat(Sink.seq(), Keep.both).run(mat)
    assert fut.result(3) == list(range(100))
    switch.shutdown()  # after the stream ended: no effect, no error


# =========================================================================== SharedKillSwitch
def test_shared_stops_a_stream_if_requested(mat):
    switch = KillSwitches.shared("switch")
    src, sink = _shared(mat, switch)
    _one_element_through(src, sink)
    switch.shutdown()
    assert isinstance(src.expect_cancellation(), NonFailureCancellation)
    sink.expect_complete()


def test_shared_fails_a_stream_if_requested(mat):
    switch = KillSwitches.shared("switch")
    src, sink = _shared(mat, switch)
    _one_element_through(src, sink)
    switch.abort(TE("Abort"))
    assert src.expect_cancellation() == TE("Abort")
    sink.expect_error(TE("Abort"))


def test_shared_passes_through_all_elements_unmodified(mat):
    switch = KillSwitches.shared("switch")
    assert Source.range(1, 101).via(switch.flow()).run_with(Sink.seq(), mat).result(3) == list(range(1, 101))


def _two_streams(mat, switch):
    src1, sink1 = _shared(mat, switch)
    src2, sink2 = _shared(mat, switch)
    _one_element_through(src1, sink1)
    sink2.request(2)
    src2.send_next("A").send_next("B")
    sink2.expect_next("A", "B")
    return src1, sink1, src2, sink2


def test_shared_flow_materialized_multiple_times_stops_all_streams_if_requested(mat):
    switch = KillSwitches.shared("switch")
    src1, sink1, src2, sink2 = _two_streams(mat, switch)
    switch.shutdown()
    src1.expect_cancellation()
    src2.expect_cancellation()
    sink1.expect_complete()
    sink2.expect_complete()


def test_shared_flow_materialized_multiple_times_fails_all_streams_if_requested(mat):
    switch = KillSwitches.shared("switch")
    src1, sink1, src2, sink2 = _two_streams(mat, switch)
    switch.abort(TE("Abort"))
    src1.expect_cancellation()
    src2.expect_cancellation()
    sink1.expect_error(TE("Abort"))
    sink2.expect_error(TE("Abort"))


def test_shared_ignores_subsequent_aborts_and_shutdowns_after_shutdown(mat):
    switch = KillSwitches.shared("switch")
    src, sink = _shared(mat, switch)
    _one_element_through(src, sink)
    switch.shutdown()
    src.expect_cancellation()
    sink.expect_complete()
    switch.shutdown()
    src.expect_no_message(0.05)
    sink.expect_no_message(0.05)
    switch.abort(TE("Abort"))
    src.expect_no_message(0.05)
    sink.expect_no_message(0.05)


def test_shared_ignores_subsequent_aborts_and_shutdowns_after_abort(mat):
    switch = KillSwitches.shared("switch")
    src, sink = _shared(mat, switch)
    _one_element_through(src, sink)
    switch.abort(TE("Abort"))
    src.expect_cancellation()
    sink.expect_error(TE("Abort"))
    switch.shutdown()
    src.expect_no_message(0.05)
    sink.expect_no_message(0.05)
    switch.abort(TE("Abort_Late"))
    src.expect_no_message(0.05)
    sink.expect_no_message(0.05)


def test_shared_completes_immediately_flows_materialized_after_switch_shutdown(mat):
    switch = KillSwitches.shared("switch")
    switch.shutdown()
    src, sink = _shared(mat, switch)
    src.expect_cancellation()
    sink.expect_subscription_and_complete()


def test_shared_fails_immediately_flows_materialized_after_switch_failure(mat):
    switch = KillSwitches.shared("switch")
    switch.abort(TE("Abort"))
    src, sink = _shared(mat, switch)
    src.expect_cancellation()
    sink.expect_subscription_and_error(TE("Abort"))


def test_shared_later_materializations_keep_the_first_outcome(mat):
    switch = KillSwitches.shared("switch")
    switch.abort(TE("first"))
    switch.shutdown()
    for _ in range(2):
        fut = Source.never().via(switch.flow()).run_with(Sink.seq(), mat)
        assert fut.exception(3) == TE("first")


def test_shared_does_not_cause_problems_if_shutdown_after_flow_completed_normally(mat):
    switch = KillSwitches.shared("switch")
    assert Source.range(1, 11).via(switch.flow()).run_with(Sink.seq(), mat).result(3) == list(range(1, 11))
    switch.shutdown()


def test_shared_provides_flows_that_materialize_to_its_owner_switch(mat):
    switch = KillSwitches.shared("switch")
    switch2, completion = Source.never().via_mat(switch.flow(), Keep.right).to_mat(Sink.ignore(), Keep.both).run(mat)
    assert switch2 is switch
    switch2.shutdown()
    assert completion.result(3) is Done


def test_shared_does_not_affect_streams_corresponding_to_another_switch(mat):
    switch1 = KillSwitches.shared("switch")
    switch2 = KillSwitches.shared("switch")
    assert switch1 != switch2
    src1, sink1 = _shared(mat, switch1)
    src2, sink2 = _shared(mat, switch2)
    _one_element_through(src1, sink1, 1)
    _one_element_through(src2, sink2, 2)
    switch1.shutdown()
    src1.expect_cancellation()
    sink1.expect_complete()
    src2.expect_no_message(0.05)
    sink2.expect_no_message(0.05)
    switch2.abort(TE("Abort"))
    src1.expect_no_message(0.05)
    sink1.expect_no_message(0.05)
    src2.expect_cancellation()
    sink2.expect_error(TE("Abort"))


def test_shared_allows_using_multiple_switches_in_one_graph(mat):
    switch1 = KillSwitches.shared("switch")
    switch2 = KillSwitches.shared("switch")
    sink = (
        Source.never()
        .via(switch1.flow())
        .merge(Source.never().via(switch2.flow()))
        .run_with(TestSink.probe(), mat)
    )
    sink.ensure_subscription()
    sink.expect_no_message(0.05)
    switch1.shutdown()
    sink.expect_no_message(0.05)
    switch2.shutdown()
    sink.expect_complete()


def test_shared_switch_in_one_stream_several_times(mat):
    switch = KillSwitches.shared("switch")
    sink = Source.never().via(switch.flow()).map(lambda x: x).via(switch.flow()).run_with(TestSink.probe(), mat)
    sink.request(1)
    switch.abort(TE("both"))
    sink.expect_error(TE("both"))


def test_shared_stops_a_backpressured_stream(mat):
    switch = KillSwitches.shared("switch")
    src, sink = _shared(mat, switch)
    src.send_next_many(1, 2, 3)
    switch.shutdown()
    src.expect_cancellation()
    sink.expect_complete()


# =========================================================================== validation
@pytest.mark.parametrize("make", ["unique", "shared"])
@pytest.mark.parametrize("bad", ["boom", None, 42, TE])
def test_abort_rejects_a_non_exception(mat, make, bad):
    if make == "shared":
        switch = KillSwitches.shared("s")
        fut = Source.never().via(switch.flow()).run_with(Sink.ignore(), mat)
    else:
        switch, fut = Source.never().via_mat(KillSwitches.single(), Keep.right).to_mat(Sink.ignore(), Keep.both).run(mat)
    with pytest.raises(TypeError, match="abort"):
        switch.abort(bad)
    assert not fut.done()
    switch.shutdown()  # the rejected call did not use the switch up
    assert fut.result(3) is Done


@pytest.mark.parametrize("name, exc", [("", ValueError), (None, TypeError), (3, TypeError)])
def test_shared_rejects_a_bad_name(name, exc):
    with pytest.raises(exc, match="KillSwitches.shared.*name"):
        KillSwitches.shared(name)


def test_shared_switch_knows_its_name_and_flows_are_flows():
    switch = KillSwitches.shared("mySwitchName")
    assert isinstance(switch, SharedKillSwitch) and switch.name == "mySwitchName"
    assert "mySwitchName" in repr(switch)
    assert isinstance(switch.flow(), Flow)


def _reraise(e):
    raise e
