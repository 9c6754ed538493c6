"""A channel's store budget: elements passed by reference (over Ray: put into the object store by the codec) are
bounded in bytes, not only by the input buffer's elements.

* The output boundary (its subscriber ref reports the store bytes of each frame, as ``RemoteSubscriberRef`` does)
  sends at most ``budget - store_chunk_bytes(budget)`` of them that the subscriber is not known to have consumed
  (every request after the first is for consumed elements), pulls upstream no further, and goes on when a request
  frees the budget; completion follows the last frame.
* The input boundary hands such elements downstream in chunks of at most ``store_chunk_bytes(budget)``, forgets
  what it handed on, and requests what was consumed as soon as it held store bytes.
* Elements that hold no store bytes (ints) flow exactly as without a budget.

No Ray here: the subscriber and the publisher are stand-ins driven by the test."""
from __future__ import annotations

import queue
from typing import Optional

import pytest

from atoll import Attributes, Keep, Source
from atoll._impl.islands.boundaries import (FrameSignals, FrameTimestamps, InputBoundary, OutputBoundary,
                                            store_chunk_bytes)
from atoll._impl.ops.base import SinkStage, SourceStage
from atoll.testkit import TestSink
from atoll.testkit.probes import TestPublisherProbe
from stage_helpers import IdentityLogic, LinearStage

BIG = 1000  # bytes of a stored element (a bytes value of BIG or more stands for one passed by reference)
BUDGET = 16_000
CHUNK = store_chunk_bytes(BUDGET)  # 4000: a chunk handed downstream holds at most 4 stored elements
LIMIT = BUDGET - CHUNK  # 12000: the sender keeps at most 12 stored elements not known consumed
QUIET = 0.3  # seconds without a call after which a sender counts as stopped (a negative check, as expect_no_message)


def stored_bytes(elems) -> int:
    return sum(len(x) for x in elems if type(x) is bytes and len(x) >= BIG)


def big(i: int) -> bytes:
    return i.to_bytes(4, "big") * (BIG // 4)


class StoreSubscriber:
    """A subscriber ref as ``RemoteSubscriberRef`` is: windowed, reporting a frame's payload bytes (10 per element)
    and, in ``stored``, the store bytes its elements hold. Records its calls."""

    sized = True
    windowed = True
    reports_stored = True

    def __init__(self):
        self.calls: queue.Queue = queue.Queue()
        self.stored = 0
        self.stored_largest = 0

    def on_subscribe(self, _publisher) -> None:
        self.calls.put(("on_subscribe",))

    def on_next(self, seq: int, frame: list) -> int:
        elems = [x for x in frame if not isinstance(x, (FrameSignals, FrameTimestamps))]
        self.stored = stored_bytes(elems)
        self.stored_largest = max((len(x) for x in elems if type(x) is bytes and len(x) >= BIG), default=0)
        self.calls.put(("on_next", seq, elems, self.stored))
        return 10 * len(frame) + 10

    def on_complete(self) -> None:
        self.calls.put(("on_complete",))

    def on_error(self, exc) -> None:
        self.calls.put(("on_error", exc))


class _StoreSink(SinkStage):
    """An output boundary with a store budget, subscribed by a ``StoreSubscriber``."""

    def __init__(self, budget: int):
        super().__init__("StoreSink")
        self.budget = budget

    def create_logic_and_materialized_value(self, attributes):
        logic = OutputBoundary("StoreSink>", in_=self.in_, store_budget=self.budget)
        logic.sub = StoreSubscriber()
        logic.publisher_ref.subscribe(logic.sub)
        return logic, logic


class Receiver:
    """Plays the input boundary on the far side: reads the sender's calls, consumes elements and requests them
    again (with the frames received, as the real one confirms them), checking at every frame that the stored bytes
    sent and not yet requested stay within ``LIMIT``."""

    def __init__(self, logic, first_request: int, strict: bool = True):
        self.logic = logic
        self.strict = strict
        self.calls = logic.sub.calls
        assert self.calls.get(timeout=10) == ("on_subscribe",)
        self.elements: list = []
        self.stored: list = []  # per element received: its store bytes
        self.consumed = 0
        self.frames = 0
        self.seq = 1
        self.completed = False
        self.peak = 0
        self.log: list = []  # per frame: (its stored bytes, stored bytes sent and not requested after it)
        logic.publisher_ref.request(first_request, 0, None)

    def outstanding(self) -> int:
        return sum(self.stored[self.consumed:])

    def read(self, timeout: float = 10) -> Optional[tuple]:
        try:
            call = self.calls.get(timeout=timeout)
        except queue.Empty:
            return None
        if call[0] == "on_next":
            _, seq, elems, stored = call
            assert seq == self.frames
            assert stored == stored_bytes(elems)
            assert not self.completed
            self.frames += 1
            if stored:  # sent only while the sender's stored bytes not known consumed were under its limit
                assert self.outstanding() < LIMIT, (self.outstanding(), LIMIT)
            self.elements.extend(elems)
            self.stored.extend(len(x) if type(x) is bytes and len(x) >= BIG else 0 for x in elems)
            self.peak = max(self.peak, self.outstanding())
            self.log.append((stored, self.outstanding()))
            if self.strict:  # and with elements of one size, the frame fitted
                assert self.outstanding() <= LIMIT, (self.outstanding(), LIMIT)
        elif call[0] == "on_complete":
            self.completed = True
        else:
            raise AssertionError(call)
        return call

    def read_until_quiet(self) -> None:
        """Read calls until none comes for ``QUIET`` seconds."""
        while self.read(timeout=QUIET) is not None:
            pass

    def consume(self, n: int) -> None:
        """Consume ``n`` received elements and request them again."""
        assert self.consumed + n <= len(self.elements)
        self.consumed += n
        self.logic.publisher_ref.request(n, self.seq, self.frames)
        self.seq += 1


def identity() -> LinearStage:
    """A custom stage with no chunk form: the output boundary after it pulls element by element."""
    return LinearStage("id", IdentityLogic)


@pytest.mark.parametrize("chunked", [True, False], ids=["chunks", "elements"])
def test_the_sender_stops_at_its_share_of_the_budget_and_goes_on_when_a_request_frees_it(mat, chunked):
    n = 3000
    produced = []

    def elements():
        for i in range(n):
            produced.append(i)
            yield big(i)

    src = Source.from_iterator(elements)
    if not chunked:
        src = src.via(identity())
    logic = src.to_mat(_StoreSink(BUDGET), Keep.right).run(mat)
    rx = Receiver(logic, 65536)  # demand for everything, in elements
    rx.read_until_quiet()
    assert len(rx.elements) == LIMIT // BIG  # 12: demand was not the limit, the store budget was
    assert logic.chunked is chunked
    if not chunked:
        assert len(produced) == LIMIT // BIG  # and nothing more was pulled
    else:
        # the first pull, before any element's size was known, asked for the demand and took all: what the budget
        # does not let go waits in the boundary (the island's memory, not the store)
        assert len(produced) == n and len(logic.frame) == n - LIMIT // BIG
    pulled = len(produced)
    rx.read_until_quiet()
    assert len(produced) == pulled

    rx.consume(3)  # three consumed: three more fit
    for _ in range(100):
        if len(rx.elements) == LIMIT // BIG + 3:
            break
        assert rx.read() is not None
    rx.read_until_quiet()
    assert len(rx.elements) == LIMIT // BIG + 3

    while not rx.completed:  # consume everything, a few at a time; completion comes after the last frame
        if rx.consumed < len(rx.elements):
            rx.consume(min(5, len(rx.elements) - rx.consumed))
        rx.read()
    assert rx.elements == [big(i) for i in range(n)]
    assert rx.peak <= LIMIT
    assert logic.stored_out <= LIMIT


def test_small_elements_flow_as_without_a_budget(mat):
    """Ints hold no store bytes: the same frames as without a budget, all of them on the first request alone."""
    n = 5000

    def run(budget: int):
        logic = Source.range(0, n).to_mat(_StoreSink(budget), Keep.right).run(mat)
        rx = Receiver(logic, n)
        frames = []
        while not rx.completed:
            before = len(rx.elements)
            call = rx.read()
            assert call is not None
            if call[0] == "on_next":
                frames.append(len(rx.elements) - before)
        assert rx.elements == list(range(n))
        assert not logic.store_gated and logic.stored_out == 0 and logic.demand_held == 0
        return frames

    assert run(BUDGET) == run(0)


def test_stored_and_small_elements_mixed_arrive_in_order(mat):
    n = 600

    def make(i: int):
        return big(i) if (i // 50) % 2 else i  # 50 ints, 50 stored elements, ...

    logic = Source.range(0, n).map(make).to_mat(_StoreSink(BUDGET), Keep.right).run(mat)
    rx = Receiver(logic, 64, strict=False)
    while not rx.completed:
        if rx.consumed < len(rx.elements):
            rx.consume(len(rx.elements) - rx.consumed)
        rx.read()
    assert rx.elements == [make(i) for i in range(n)]
    # the first frame holding stored elements came before the sender knew their size: it was cut by payload bytes
    # alone and may go past the limit; every frame after it fitted the limit, give or take what the sender's
    # expectation of the next elements' size lags behind (it shrinks by at most 1/8 a frame: a fit 8/7 too large)
    first = next(i for i, (stored, _) in enumerate(rx.log) if stored)
    assert all(outstanding <= LIMIT * 8 // 7 for _, outstanding in rx.log[first + 1:])


# ---------------------------------------------------------------------------------------------- the receiver side
class _StoreProbeSource(SourceStage):
    """``TestSource.probe()`` with a store budget on its input boundary."""

    def __init__(self, budget: int):
        super().__init__("StoreSource")
        self.budget = budget

    def create_logic_and_materialized_value(self, attributes):
        from atoll.stage.attributes import InputBuffer

        probe = TestPublisherProbe(10.0)
        logic = InputBoundary(probe, attributes.get(InputBuffer).max, "StoreSource", out=self.out,
                              store_budget=self.budget)
        probe._logic = logic
        return logic, (probe, logic)


def requests(probe) -> list:
    """The requests that came since the last call (none waited for)."""
    out = []
    while True:
        try:
            ev = probe._events.next(0.0, "a request")
        except AssertionError:
            return out
        assert ev[0] == "request", ev
        out.append(ev[1])


def wait_requests(probe, total: int) -> list:
    """Requests until they add up to ``total``."""
    out = []
    while sum(out) < total:
        out.append(probe.expect_request())
    return out


def run_receiver(mat, budget: int, via=None):
    """A receiver (``_StoreProbeSource(budget)``, input buffer 64) into a ``TestSink.probe``, optionally through
    ``via``; checks its first request (the whole buffer) and returns ``(probe, logic), sink``."""
    src = Source.from_graph(_StoreProbeSource(budget)).with_attributes(Attributes.input_buffer(64, 64))
    if via is not None:
        src = src.via(via)
    (probe, logic), sink = src.to_mat(TestSink.probe(), Keep.both).run(mat)
    assert probe.expect_request() == 64
    return (probe, logic), sink


def test_the_receiver_hands_stored_elements_on_in_chunks_of_its_share_and_requests_them_at_once(mat):
    (probe, logic), sink = run_receiver(mat, BUDGET)
    frame = [big(i) for i in range(12)]
    probe._subscriber.on_next(0, frame, stored_bytes(frame))
    sink.request(5)
    for i in range(5):
        sink.expect_next(big(i))
    # a chunk of 4 (CHUNK bytes: requested again at once), then one of 1 (half a share not reached yet)
    assert wait_requests(probe, 4) == [4]
    assert logic.buffer.frames[0][:5] == [None] * 5  # what went downstream is not kept by the buffer
    assert logic.buffer.frames[0][5:] == frame[5:]
    sink.request(100)
    for i in range(5, 12):
        sink.expect_next(big(i))
    assert wait_requests(probe, 8) == [5, 3]  # chunks of 4 and 3, each requested with what was consumed before
    assert logic.stored_in is None and logic.request_at == logic.batch  # no stored frame left: back to batches
    ints = list(range(100, 120))
    probe._subscriber.on_next(1, ints)
    sink.request(100)
    for x in ints:
        sink.expect_next(x)
    assert requests(probe) == []  # 20 consumed, below the batch of 32: ints are requested by batches as ever
    probe._subscriber.on_complete()
    sink.expect_complete()


def test_element_by_element_the_receiver_requests_each_half_share_and_when_it_runs_dry(mat):
    (probe, logic), sink = run_receiver(mat, BUDGET, via=identity())
    frame = [big(i) for i in range(5)]
    probe._subscriber.on_next(0, frame, stored_bytes(frame))
    sink.request(100)
    for i in range(5):
        sink.expect_next(big(i))
    assert not logic.chunked
    assert wait_requests(probe, 5) == [2, 2, 1]  # CHUNK / 2 = 2000 bytes each, the last as the buffer ran dry
    probe._subscriber.on_complete()
    sink.expect_complete()


def test_a_receiver_without_a_budget_ignores_store_bytes(mat):
    (probe, logic), sink = run_receiver(mat, 0)
    frame = [big(i) for i in range(12)]
    probe._subscriber.on_next(0, frame, stored_bytes(frame))
    sink.request(12)
    for i in range(12):
        sink.expect_next(big(i))
    assert logic.stored_in is None
    assert requests(probe) == []  # 12 consumed, below the batch of 32
    probe._subscriber.on_complete()
    sink.expect_complete()


def test_the_codec_counts_what_an_object_takes_in_the_store():
    import numpy as np
    import pyarrow as pa

    from atoll._impl.actors import codec

    codec._encoder([])  # loads the large types
    assert codec.stored_size(b"x" * 200_000) == 200_000
    assert codec.stored_size(bytearray(150_000)) == 150_000
    assert codec.stored_size(memoryview(b"y" * 120_000)) == 120_000
    assert codec.stored_size(np.zeros((100, 100), dtype=np.float64)) == 80_000
    batch = pa.record_batch([pa.array(np.arange(10_000, dtype=np.int64))], names=["v"])
    assert codec.stored_size(batch) == 80_000
    assert codec.stored_size(pa.Table.from_batches([batch, batch])) == 160_000  # one buffer twice: pickled twice
    assert codec.stored_size(batch.slice(0, 100)) == 80_000  # a slice pickles its parent's buffers


@pytest.mark.parametrize("bad", [-1, 1.5, "64MiB", True])
def test_the_setting_is_checked(bad):
    from atoll._impl.actors.ray_materializer import RaySettings

    with pytest.raises(ValueError, match="channel_store_bytes"):
        RaySettings(channel_store_bytes=bad)
    assert RaySettings().channel_store_bytes is None  # the default, taken from the cluster when Ray is there
    assert RaySettings(channel_store_bytes=0).channel_store_bytes == 0
