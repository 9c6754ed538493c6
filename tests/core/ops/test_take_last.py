"""take_last (the Flow form) and Sink.take_last: ported from Pekko's TakeLastSinkSpec (every case but the
student example, which is the first case again; "fail future when stream abruptly terminated" uses a
materializer shutdown as Pekko does), run through both forms; plus the chunk form's parity with the
element-only run, signal holding and build-time validation."""
from __future__ import annotations

import pytest
from chunk_kit import check
from ops_kit import TE, fmat  # noqa: F401 - fmat is a fixture

from atoll import Flow, Keep, Materializer, Sink, Source
from atoll.errors import AbruptTerminationError
from atoll.testkit import TestSink, TestSource


def _both(src, n, mat):
    """Sink.take_last(n) and take_last(n) into Sink.head give the same list."""
    a = src.run_with(Sink.take_last(n), mat).result(3)
    b = src.take_last(n).run_with(Sink.head(), mat).result(3)
    assert a == b
    return a


def test_return_the_last_3_elements(fmat):
    assert _both(Source.range(1, 7), 3, fmat) == [4, 5, 6]


def test_return_what_there_is_when_the_stream_is_shorter(fmat):
    assert _both(Source.range(1, 5), 5, fmat) == [1, 2, 3, 4]


def test_yield_empty_list_for_empty_stream(fmat):
    assert _both(Source.empty(), 3, fmat) == []


def test_return_the_last_element(fmat):
    assert _both(Source.range(1, 5), 1, fmat) == [4]


def test_fail_future_when_stream_abruptly_terminated():
    m = Materializer.local()
    fut = TestSource.probe().run_with(Sink.take_last(2), m)
    m.shutdown()
    with pytest.raises(AbruptTerminationError):
        fut.result(3)


def test_upstream_failure_fails_both_forms(fmat):
    with pytest.raises(TE):
        Source.failed(TE("x")).run_with(Sink.take_last(2), fmat).result(3)
    with pytest.raises(TE):
        Source.failed(TE("x")).take_last(2).run_with(Sink.seq(), fmat).result(3)


def test_flow_form_emits_only_at_completion(fmat):
    src, p = TestSource.probe().take_last(2).to_mat(TestSink.probe(), Keep.both).run(fmat)
    p.request(1)
    for x in (1, 2, 3):
        src.send_next(x)
    p.expect_no_message(0.05)
    src.send_complete()
    p.expect_next([2, 3])
    p.expect_complete()


def test_flow_form_holds_signals_until_its_list_went_out(fmat):
    src, p = TestSource.probe().take_last(2).to_mat(TestSink.probe(signals=True), Keep.both).run(fmat)
    p.request(1)
    src.send_next(1)
    src.send_watermark(5)
    p.expect_no_message(0.05)
    src.send_complete()
    p.expect_next([1])
    p.expect_watermark(5)
    p.expect_complete()


DATA = list(range(1, 41))


@pytest.mark.parametrize("n", [1, 3, 40, 100])
def test_chunk_form_matches_element_form(n):
    assert check(lambda f: f.take_last(n), DATA) == ("ok", [DATA[-n:]])


def test_validation():
    for make in (lambda n: Flow().take_last(n), Sink.take_last):
        with pytest.raises(ValueError, match="take_last: n must be > 0, got 0"):
            make(0)
        with pytest.raises(TypeError, match="take_last: n must be an int"):
            make(1.0)
