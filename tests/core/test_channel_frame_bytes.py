"""Frames cut by elements and bytes: an output boundary sending through the Ray subscriber ref keeps each encoded
frame under ``FRAME_BYTES`` (adapting to the bytes per element of the frames it sent) and never above its element
maximum; small elements go many to a frame, large ones few, one above the budget alone.

The subscriber here is the real ``RemoteSubscriberRef`` (the real encoding) talking to a stand-in actor that
records its calls; the test decodes the frames as the receiving island does, confirms them (the window) and
checks what arrived: frame sizes, elements, signals and the terminal call, in order. No Ray is started."""
from __future__ import annotations


import pytest

from atoll import Keep, Source
from atoll._impl.actors.codec import decode_message
from atoll._impl.actors.refs import RemoteSubscriberRef
from atoll._impl.islands.boundaries import (FRAME_BYTES, MAX_DEMAND, ChannelBarrier, FrameSignals, OutputBoundary)
from atoll._impl.ops.base import SinkStage
from channel_kit import RecordingActor

CH = 7


class _BarrierBoundary(OutputBoundary):
    """An output boundary that emits checkpoint barrier ``i`` once ``every * i`` elements were pushed to it (on the
    island's thread, between pushes), recording where each went."""

    every = 0

    def on_push(self) -> None:
        super().on_push()
        if self.every:
            total = self.sent + len(self.frame)
            while total >= self.every * (len(self.barriers) + 1):
                cid = len(self.barriers) + 1
                self.barriers.append((total, cid))
                self.emit_barrier(cid)


class _FrameSink(SinkStage):
    """A sink that is an output boundary subscribed by a ``RemoteSubscriberRef`` to ``actor``."""

    def __init__(self, actor, max_frame: int, every: int = 0):
        super().__init__("FrameSink")
        self.actor = actor
        self.max_frame = max_frame
        self.every = every

    def create_logic_and_materialized_value(self, attributes):
        logic = _BarrierBoundary("FrameSink>", max_frame=self.max_frame, in_=self.in_)
        logic.every = self.every
        logic.barriers = []
        logic.publisher_ref.subscribe(RemoteSubscriberRef(self.actor, CH))
        return logic, logic


def _receive(source, mat, max_frame: int, every: int = 0):
    """Run ``source`` into a frame sink; returns (frames as (payload bytes, elements, signals), terminal call, the
    boundary). Every frame is confirmed as it is read; demand is unbounded."""
    actor = RecordingActor()
    logic = source.to_mat(_FrameSink(actor, max_frame, every), Keep.right).run(mat)
    name, args = actor.calls.get(timeout=10)
    assert (name, args) == ("on_subscribe", (CH,))
    logic.publisher_ref.request(MAX_DEMAND, 0, None)
    frames = []
    while True:
        name, args = actor.calls.get(timeout=10)
        if name != "on_frame":
            assert name in ("on_complete", "on_error"), name
            assert actor.calls.empty()
            return frames, (name, args), logic
        ch, seq, frame = decode_message(args[0], None)
        assert (ch, seq) == (CH, len(frames))
        signals = []
        if frame and type(frame[-1]) is FrameSignals:
            signals = frame[-1].signals
            frame = frame[:-1]
        frames.append((len(args[0]), frame, signals))
        logic.publisher_ref.ack(len(frames))


def _elements(frames):
    return [x for _, frame, _ in frames for x in frame]


def test_small_elements_travel_in_frames_of_more_than_4096(mat):
    n = 200_000
    frames, end, _ = _receive(Source.range(0, n), mat, max_frame=16384)
    assert end == ("on_complete", (CH,))
    assert _elements(frames) == list(range(n))
    assert len(frames[0][1]) == 1  # the first frame measures the elements' size
    assert max(len(f) for _, f, _ in frames) == 16384  # the element maximum still holds
    assert sum(1 for _, f, _ in frames if len(f) > 4096) >= n // 16384 - 1
    assert all(size <= FRAME_BYTES for size, _, _ in frames)


def test_large_elements_travel_in_frames_under_the_byte_budget(mat):
    n = 60
    blob = lambda i: bytes([i]) * 20_000  # noqa: E731
    frames, end, _ = _receive(Source.range(0, n).map(blob), mat, max_frame=16384)
    assert end == ("on_complete", (CH,))
    assert _elements(frames) == [blob(i) for i in range(n)]
    assert all(size <= FRAME_BYTES for size, _, _ in frames)
    assert all(1 <= len(f) <= FRAME_BYTES // 20_000 for _, f, _ in frames)
    assert len(frames) <= 1 + n // (FRAME_BYTES // 20_000 - 1)  # several to a frame, not one each


def test_elements_above_the_budget_go_alone_and_small_ones_after_them_regroup(mat):
    big = b"x" * (FRAME_BYTES + 5000)  # still below the codec's object-store threshold: inline
    items = [big, big, big] + list(range(10_000))
    frames, end, _ = _receive(Source.from_iterable(items), mat, max_frame=16384)
    assert end == ("on_complete", (CH,))
    assert _elements(frames) == items
    assert [f for _, f, _ in frames[:3]] == [[big], [big], [big]] and all(s > FRAME_BYTES for s, _, _ in frames[:3])
    assert all(size <= FRAME_BYTES for size, _, _ in frames[3:])
    assert len(frames[-1][1]) > 1000  # after the big ones, small elements go many to a frame again


def test_a_sudden_big_element_still_travels_and_the_next_frames_adapt(mat):
    # sizes are learnt from the frames sent: the frame that first holds big elements among small ones may exceed
    # the budget (it then goes through Ray's object store: slower, still exact); the frames after it are cut again
    big = b"y" * 30_000
    items = list(range(5_000)) + [big] * 40 + list(range(5_000))
    frames, end, _ = _receive(Source.from_iterable(items), mat, max_frame=16384)
    assert end == ("on_complete", (CH,))
    assert _elements(frames) == items
    for (_, before, _), (size, frame, _) in zip(frames, frames[1:]):
        if before and all(x == big for x in before) and all(x == big for x in frame):
            assert size <= FRAME_BYTES and len(frame) <= FRAME_BYTES // 30_000  # learnt from a frame of big ones
    last_big = max(i for i, (_, f, _) in enumerate(frames) if big in f)
    assert all(size <= FRAME_BYTES for size, _, _ in frames[last_big + 1:])


def test_the_element_maximum_bounds_frames_of_tiny_elements(mat):
    frames, end, _ = _receive(Source.range(0, 1000), mat, max_frame=7)
    assert end == ("on_complete", (CH,))
    assert _elements(frames) == list(range(1000))
    assert max(len(f) for _, f, _ in frames) == 7


def test_a_failure_arrives_after_the_elements_sent_before_it(mat):
    # a failure is not held back for frames the window has not let out yet (as before): what was sent is a prefix
    def boom(x):
        if x == 30_000:
            raise ValueError("boom at 30000")
        return x

    frames, (name, args), _ = _receive(Source.range(0, 100_000).map(boom), mat, max_frame=16384)
    assert name == "on_error" and args[0] == CH and "boom at 30000" in str(args[1])
    got = _elements(frames)
    assert got == list(range(len(got))) and len(got) <= 30_000


def test_empty_stream_completes_with_no_frame(mat):
    frames, end, _ = _receive(Source.empty(), mat, max_frame=16384)
    assert frames == [] and end == ("on_complete", (CH,))


@pytest.mark.parametrize("size", [1, 20_000])
def test_barriers_keep_their_places_among_the_elements(mat, size):
    n = 2_000 if size > 1 else 100_000
    every = 150 if size > 1 else 9_000
    make = (lambda i: i) if size == 1 else (lambda i: i.to_bytes(4, "big") * (size // 4))
    frames, end, logic = _receive(Source.range(0, n).map(make), mat, max_frame=16384, every=every)
    assert end == ("on_complete", (CH,))
    got, stream = 0, []
    for size_, frame, signals in frames:
        assert size_ <= FRAME_BYTES
        at = 0
        for pos, sig in signals:
            stream.extend(frame[at:pos])
            stream.append(sig)
            at = pos
        stream.extend(frame[at:])
        got += len(frame)
    # the barriers where the boundary emitted them: after exactly the elements pushed to it before
    want = [make(i) for i in range(n)]
    for total, cid in reversed(logic.barriers):
        want.insert(total, ChannelBarrier(cid))
    assert got == n and len(logic.barriers) == n // every
    assert stream == want
