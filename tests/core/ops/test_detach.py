"""detach: ported from Pekko's FlowDetacherSpec, plus the one-element look-ahead itself (upstream
runs one element ahead of demand, no further)."""
from __future__ import annotations

import pytest
from ops_kit import TE, fmat  # noqa: F401

from atoll import Keep, Sink, Source
from atoll.testkit import TestSink, TestSource


def test_pass_through_all_elements(fmat):
    assert Source.range(1, 101).detach().run_with(Sink.seq(), fmat).result(3) == list(range(1, 101))


def test_pass_through_failure(fmat):
    def fail_50(x):
        if x == 50:
            raise TE("buh")
        return x

    fut = Source.range(1, 101).map(fail_50).detach().run_with(Sink.seq(), fmat)
    with pytest.raises(TE, match="buh"):
        fut.result(3)


def test_emit_the_last_element_when_completed_without_demand(fmat):
    sink = Source.single(42).detach().run_with(TestSink.probe(), fmat)
    sink.ensure_subscription()
    sink.expect_no_message(0.2)
    assert sink.request_next() == 42
    sink.expect_complete()


def test_holds_one_element_ahead_of_demand(fmat):
    pulled = []

    def record(x):
        pulled.append(x)
        return x

    src, sink = TestSource.probe().map(record).detach().to_mat(TestSink.probe(), Keep.both).run(fmat)
    sink.ensure_subscription()
    src.send_next(1)
    src.send_next(2)  # waits in the input buffer: detach holds 1 and does not pull again
    sink.expect_no_message(0.2)
    assert pulled == [1]
    assert sink.request_next() == 1
    assert sink.request_next() == 2
    src.send_complete()
    sink.expect_complete()
