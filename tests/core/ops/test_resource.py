"""Source.unfold_resource and map_with_resource: ported from Pekko's UnfoldResourceSourceSpec and
FlowMapWithResourceSpec (the file reader is an in-memory line reader; the dispatcher cases do not apply:
Atoll has no dispatchers). Every case checks how often the resource was closed."""
from __future__ import annotations

import pytest
from ops_kit import TE, fmat  # noqa: F401 - fmat is a fixture

from atoll import Attributes, Keep, Materializer, Sink, Source, Supervision
from atoll.testkit import TestSink, TestSource, assert_all_stages_stopped

RESUME = Attributes.supervision_strategy(Supervision.resuming_decider)
RESTART = Attributes.supervision_strategy(Supervision.restarting_decider)
STOP = Attributes.supervision_strategy(Supervision.stopping_decider)

MANY_LINES = [c * 100 for c in "abcdef" for _ in range(10)]


class Reader:
    """An in-memory ``BufferedReader`` of MANY_LINES: ``read_line()`` gives None at the end."""

    opened = 0
    closed = 0

    def __init__(self, lines=MANY_LINES):
        self.lines = list(lines)
        self.i = 0
        self.is_closed = False
        Reader.opened += 1

    def read_line(self):
        if self.is_closed:
            raise AssertionError("read from a closed reader")
        if self.i >= len(self.lines):
            return None
        self.i += 1
        return self.lines[self.i - 1]

    def close(self):
        assert not self.is_closed, "closed twice"
        self.is_closed = True
        Reader.closed += 1


@pytest.fixture(autouse=True)
def _counts():
    Reader.opened = Reader.closed = 0
    yield


def _reader_source(read=Reader.read_line, close=Reader.close, create=Reader):
    return Source.unfold_resource(create, read, close)


# ============================================================================ unfold_resource
def test_read_contents_from_a_file(fmat):
    p = _reader_source().run_with(TestSink.probe(), fmat)
    lines = iter(MANY_LINES)
    p.request(1).expect_next(next(lines))
    p.request(1).expect_next(next(lines))
    p.expect_no_message(0.05)
    for line in lines:
        p.request(1).expect_next(line)
    p.request(1).expect_complete()
    assert (Reader.opened, Reader.closed) == (1, 1)


def _failing_on_b(reader):
    s = reader.read_line()
    if s is not None and "b" in s:
        raise TE("")
    return s


def test_continue_when_strategy_is_resume_and_exception_happened(fmat):
    p = _reader_source(read=_failing_on_b).with_attributes(RESUME).run_with(TestSink.probe(), fmat)
    for i in range(50):
        p.request(1).expect_next(MANY_LINES[i] if i < 10 else MANY_LINES[i + 10])
    p.request(1).expect_complete()
    assert (Reader.opened, Reader.closed) == (1, 1)


def test_close_and_open_stream_again_when_strategy_is_restart(fmat):
    p = _reader_source(read=_failing_on_b).with_attributes(RESTART).run_with(TestSink.probe(), fmat)
    for _ in range(20):
        p.request(1).expect_next(MANY_LINES[0])
    p.cancel()
    assert_all_stages_stopped(fmat, timeout=5.0)
    assert Reader.opened == Reader.closed == 2  # the first reader hit a "b" line, the second was cancelled


def test_work_with_bytes_as_well(fmat):
    text = "".join(line + "\n" for line in MANY_LINES).encode()

    class Chunks:
        def __init__(self):
            self.pos = 0

    def read(r):
        if r.pos >= len(text):
            return None
        chunk = text[r.pos:r.pos + 50]
        r.pos += 50
        return chunk

    got = Source.unfold_resource(Chunks, read, lambda r: None).run_with(Sink.seq(), fmat).result(3)
    assert len(got) == 122 and b"".join(got) == text


def test_fail_when_create_throws_exception(fmat):
    def create():
        raise TE("")

    p = _reader_source(create=create).run_with(TestSink.probe(), fmat)
    p.ensure_subscription()
    assert p.expect_error() == TE("")


def test_fail_when_close_throws_exception(fmat):
    def close(it):
        raise TE("")

    p = Source.unfold_resource(lambda: iter(["a"]), lambda it: next(it, None), close).run_with(TestSink.probe(), fmat)
    p.request(61).expect_next("a")
    assert p.expect_error() == TE("")


def test_not_close_the_resource_twice_when_close_fails_during_completion(fmat):
    closes = []

    def close(it):
        closes.append(1)
        raise TE("close failed")

    p = Source.unfold_resource(lambda: iter([1]), lambda it: next(it, None), close).run_with(TestSink.probe(), fmat)
    p.request(1).expect_next(1)
    p.request(1)
    assert p.expect_error() == TE("close failed")
    p.expect_no_message(0.05)
    assert closes == [1]


def test_not_close_the_resource_twice_when_close_fails_during_downstream_cancel(fmat):
    closes = []

    def close(it):
        closes.append(1)
        raise TE("close failed")

    p = Source.unfold_resource(lambda: 1, lambda r: 1, close).run_with(TestSink.probe(), fmat)
    p.request(1).expect_next(1)
    p.cancel()
    assert_all_stages_stopped(fmat, timeout=5.0)
    assert closes == [1]


def _failing_read(r):
    raise TE("failing read")


def test_not_close_the_resource_twice_when_read_fails(fmat):
    closes = []
    p = Source.unfold_resource(lambda: 23, _failing_read, lambda r: closes.append(r)).run_with(TestSink.probe(), fmat)
    p.request(1)
    assert p.expect_error() == TE("failing read")
    assert closes == [23]


def test_not_close_the_resource_twice_when_read_fails_and_then_close_fails(fmat):
    closes = []

    def close(r):
        closes.append(r)
        if len(closes) == 1:
            raise TE("boom")

    p = Source.unfold_resource(lambda: 23, _failing_read, close).run_with(TestSink.probe(), fmat)
    p.request(1)
    assert p.expect_error() == TE("boom")
    assert closes == [23]


def test_resource_is_closed_when_the_materializer_shuts_down():
    m = Materializer.local()
    p = _reader_source().run_with(TestSink.probe(), m)
    p.request(1).expect_next(MANY_LINES[0])
    m.shutdown()
    assert_all_stages_stopped(m, timeout=5.0)
    assert (Reader.opened, Reader.closed) == (1, 1)


def test_unfold_resource_validation():
    with pytest.raises(TypeError, match="Source.unfold_resource: argument 'create' must be callable"):
        Source.unfold_resource(1, len, len)
    with pytest.raises(TypeError, match="Source.unfold_resource: argument 'read' must be callable"):
        Source.unfold_resource(list, 1, len)
    with pytest.raises(TypeError, match="Source.unfold_resource: argument 'close' must be callable"):
        Source.unfold_resource(list, len, None)


# ============================================================================ map_with_resource
class Writer:
    """The resource of map_with_resource cases: records what it saw and how often it was closed."""

    instances: list = []

    def __init__(self):
        self.seen = []
        self.closes = 0
        Writer.instances.append(self)

    def close(self):
        self.closes += 1
        return None


@pytest.fixture(autouse=True)
def _writers():
    Writer.instances = []
    yield


def _upper(w, s):
    w.seen.append(s)
    return s.upper()


def test_map_with_resource_reads_contents(fmat):
    got = Source.from_iterable(MANY_LINES).map_with_resource(Writer, _upper, Writer.close).run_with(Sink.seq(), fmat)
    assert got.result(3) == [s.upper() for s in MANY_LINES]
    assert [w.closes for w in Writer.instances] == [1]


def _failing_on_b_line(w, s):
    if "b" in s:
        raise TE("")
    return s


def test_map_with_resource_continue_when_strategy_is_resume(fmat):
    got = (Source.from_iterable(MANY_LINES).map_with_resource(Writer, _failing_on_b_line, Writer.close)
           .with_attributes(RESUME).run_with(Sink.seq(), fmat).result(3))
    assert got == MANY_LINES[:10] + MANY_LINES[20:]
    assert [w.closes for w in Writer.instances] == [1]


def test_map_with_resource_close_and_open_again_when_strategy_is_restart(fmat):
    got = (Source.from_iterable(MANY_LINES).map_with_resource(Writer, _failing_on_b_line, Writer.close)
           .with_attributes(RESTART).run_with(Sink.seq(), fmat).result(3))
    assert got == MANY_LINES[:10] + MANY_LINES[20:]
    assert [w.closes for w in Writer.instances] == [1] * 11  # one per "b" line, and the last


def test_map_with_resource_fail_when_create_throws(fmat):
    def create():
        raise TE("create")

    p = Source.from_iterable([1]).map_with_resource(create, lambda r, x: x, lambda r: None).run_with(TestSink.probe(), fmat)
    p.request(1)
    assert p.expect_error() == TE("create")


def test_map_with_resource_fail_when_close_throws(fmat):
    def close(r):
        raise TE("close")

    p = Source.from_iterable([1]).map_with_resource(lambda: 1, lambda r, x: x, close).run_with(TestSink.probe(), fmat)
    p.request(2).expect_next(1)
    assert p.expect_error() == TE("close")


def test_map_with_resource_not_close_twice_when_fn_fails(fmat):
    closes = []

    def fn(r, x):
        raise TE("failing read")

    p = Source.from_iterable([1]).map_with_resource(lambda: 23, fn, closes.append).run_with(TestSink.probe(), fmat)
    p.request(1)
    assert p.expect_error() == TE("failing read")
    assert closes == [23]


def test_map_with_resource_close_when_upstream_completes_emits_its_element(fmat):
    src, p = (TestSource.probe().map_with_resource(Writer, _upper, lambda w: w.close() or "closed")
              .to_mat(TestSink.probe(), Keep.both).run(fmat))
    p.request(3)
    src.send_next("a")
    p.expect_next("A")
    src.send_complete()
    p.expect_next("closed")
    p.expect_complete()
    assert [w.closes for w in Writer.instances] == [1]


def test_map_with_resource_close_when_upstream_fails(fmat):
    src, p = (TestSource.probe().map_with_resource(Writer, _upper, lambda w: w.close() or "closed")
              .to_mat(TestSink.probe(), Keep.both).run(fmat))
    p.request(3)
    src.send_next("a")
    p.expect_next("A")
    src.send_error(TE("up"))
    p.expect_next("closed")
    assert p.expect_error() == TE("up")
    assert [w.closes for w in Writer.instances] == [1]


def test_map_with_resource_close_when_downstream_cancels(fmat):
    src, p = (TestSource.probe().map_with_resource(Writer, _upper, Writer.close)
              .to_mat(TestSink.probe(), Keep.both).run(fmat))
    p.request(1)
    src.send_next("a")
    p.expect_next("A")
    p.cancel()
    src.expect_cancellation()
    assert_all_stages_stopped(fmat, timeout=5.0)
    assert [w.closes for w in Writer.instances] == [1]


def test_map_with_resource_close_on_abrupt_materializer_termination():
    m = Materializer.local()
    src, p = (TestSource.probe().map_with_resource(Writer, _upper, Writer.close)
              .to_mat(TestSink.probe(), Keep.both).run(m))
    p.request(1)
    src.send_next("a")
    p.expect_next("A")
    m.shutdown()
    assert_all_stages_stopped(m, timeout=5.0)
    assert [w.closes for w in Writer.instances] == [1]


def test_map_with_resource_validation():
    for args, arg in (((1, len, len), "create"), ((list, 1, len), "fn"), ((list, len, 1), "close")):
        with pytest.raises(TypeError, match=f"map_with_resource: argument '{arg}' must be callable"):
            Source.empty().map_with_resource(*args)
