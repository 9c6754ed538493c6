"""BackgroundSource: a blocking iterator on a helper thread, a bounded number of chunks ahead of demand."""
from __future__ import annotations

import threading

import pytest

from atoll import Sink, Source
from atoll.errors import PortStateError
from atoll.interop.background_source import BackgroundSource
from atoll.testkit import TestSink


class Recorder:
    """An iterator factory that records how far it was consumed and whether it was closed."""

    def __init__(self, chunks, fail_at=None):
        self.chunks = chunks
        self.fail_at = fail_at
        self.produced = 0
        self.closed = threading.Event()

    def __call__(self):
        def gen():
            try:
                for i, c in enumerate(self.chunks):
                    if i == self.fail_at:
                        raise KeyError("broken chunk")
                    self.produced += 1
                    yield c
            finally:
                self.closed.set()
        return gen()


def source(factory, chunked=True, prefetch=2):
    return Source.from_graph(BackgroundSource("bg", factory, prefetch=prefetch, chunked=chunked))


def test_chunks_are_emitted_element_by_element_in_order(mat):
    rec = Recorder([[1, 2], [], [3], [4, 5, 6]])
    assert source(rec).run_with(Sink.seq(), mat).result(10) == [1, 2, 3, 4, 5, 6]
    assert rec.closed.wait(5)


def test_unchunked_items_are_elements(mat):
    assert source(Recorder(["a", "b"]), chunked=False).run_with(Sink.seq(), mat).result(10) == ["a", "b"]


def test_production_stays_within_prefetch_of_demand(mat):
    rec = Recorder([[i] for i in range(100)])
    probe = source(rec, prefetch=3).run_with(TestSink.probe(), mat)
    probe.request(2)
    probe.expect_next(0, 1)
    probe.expect_no_message(0.3)
    # two chunks taken, at most three more produced ahead of demand
    assert rec.produced <= 2 + 3
    probe.cancel()
    assert rec.closed.wait(5)


def test_elements_before_a_failure_come_first(mat):
    rec = Recorder([[1], [2, 3], [4]], fail_at=2)
    probe = source(rec).run_with(TestSink.probe(), mat)
    probe.request(10)
    probe.expect_next(1, 2, 3)
    err = probe.expect_error()
    assert isinstance(err, KeyError) and "broken chunk" in str(err)


def test_a_failing_factory_fails_the_stream(mat):
    def factory():
        raise ValueError("no file")

    with pytest.raises(ValueError, match="no file"):
        source(factory).run_with(Sink.seq(), mat).result(10)


def test_none_is_refused(mat):
    with pytest.raises(PortStateError, match="bg: the iterator yielded None"):
        source(Recorder([[1, None]])).run_with(Sink.seq(), mat).result(10)


def test_completes_without_a_further_pull_after_the_last_element(mat):
    probe = source(Recorder([[1]])).run_with(TestSink.probe(), mat)
    probe.request(1)
    probe.expect_next(1)
    probe.expect_complete()


def test_bad_arguments_fail_when_built():
    with pytest.raises(ValueError, match="prefetch must be an int >= 1"):
        BackgroundSource("bg", lambda: iter(()), prefetch=0)
    with pytest.raises(TypeError, match="factory must be callable"):
        BackgroundSource("bg", [1, 2])


@pytest.mark.parametrize("fusion", [True, False])
def test_same_elements_and_errors_fused_or_not(fusion):
    """Next to fusible stages the source hands over whole lists to the fused run; the outcome is the same."""
    from atoll import Materializer

    m = Materializer.local(fusion=fusion)
    try:
        out = (source(Recorder([[1, 2, 3], [4], [], [5, 6]])).map(lambda x: x * 10).filter(lambda x: x != 20)
               .run_with(Sink.seq(), m).result(10))
        assert out == [10, 30, 40, 50, 60]
        with pytest.raises(KeyError, match="broken chunk"):
            source(Recorder([[1], [2]], fail_at=1)).map(lambda x: x).run_with(Sink.seq(), m).result(10)
        with pytest.raises(PortStateError, match="bg: the iterator yielded None"):
            source(Recorder([[1, None]])).map(lambda x: x).run_with(Sink.seq(), m).result(10)
        assert source(Recorder(["a", "b", "c"]), chunked=False).map(str.upper).run_with(Sink.seq(), m).result(10) == [
            "A", "B", "C"]
    finally:
        m.shutdown()
