"""Frames cut by elements and bytes between island actors, end to end on ``Materializer.ray()``'s defaults: small
elements (many to a frame, up to 16384), 20 KB elements (a few to a frame), elements above the byte budget (one to
a frame), and a mix of them arrive exactly, in order, with completion after every element and a failure after the elements sent before it.
(How the frames are cut is checked in ``tests/core/test_channel_frame_bytes.py``.)"""
from __future__ import annotations

from atoll import Keep, Sink, Source
from atoll._impl.islands.boundaries import FRAME_BYTES


def blob(i: int) -> bytes:
    return i.to_bytes(4, "big") * 5_000  # 20 KB


def test_small_elements_cross_two_boundaries_exactly(rmat):
    n = 100_000
    graph = Source.range(0, n).island().map(lambda x: x * 3).island().to_mat(Sink.seq(), Keep.right)
    assert graph.run(rmat).result(60) == [x * 3 for x in range(n)]


def test_20kb_elements_cross_a_boundary_exactly(rmat):
    graph = Source.range(0, 300).map(blob).island().to_mat(Sink.seq(), Keep.right)
    assert graph.run(rmat).result(60) == [blob(i) for i in range(300)]


def test_a_mix_of_small_mid_and_oversized_elements_arrives_in_order(rmat):
    huge = b"z" * (FRAME_BYTES + 3_000)  # above the frame budget, below the codec's object-store threshold

    def make(i: int):
        if i % 1000 == 999:
            return huge
        return blob(i) if i % 7 == 0 else i

    n = 5_000
    graph = Source.range(0, n).map(make).island().to_mat(Sink.seq(), Keep.right)
    assert graph.run(rmat).result(60) == [make(i) for i in range(n)]


def test_a_failure_follows_the_elements_sent_before_it(rmat):
    # as before frames were cut by bytes: a failure is not held back for frames the window has not let out yet
    def boom(x):
        if x == 50_000:
            raise ValueError("boom at 50000")
        return x

    graph = (Source.range(0, 100_000).map(boom).island()
             .recover(lambda e: f"recovered {e}").to_mat(Sink.seq(), Keep.right))
    got = graph.run(rmat).result(60)
    assert got[-1] == "recovered boom at 50000" and got[:-1] == list(range(len(got) - 1))
