"""Channel calls that return nothing (frames, requests, acks): what arrives, in which order, when the sending
island ends right after its last frame and its actor is let go at once.

Frames are fire-and-forget calls without a return object; an ending island waits only for its subscription
and terminal calls, which follow the frames in the receiver's ordered ``data`` group. These tests use tiny
frames and a window of 2 so that a short stream is many frames, many acks and many requests."""
from __future__ import annotations

import pytest

from atoll import Keep, Materializer, Sink, Source
from atoll.testkit import assert_all_stages_stopped


@pytest.fixture(scope="module")
def small_frames(ray_session):
    m = Materializer.ray(start_timeout=30, frame_size=7, channel_window=2, input_buffer=(16, 16))
    yield m
    m.shutdown()


@pytest.fixture
def smat(small_frames):
    yield small_frames
    assert_all_stages_stopped(small_frames, timeout=15.0)


def test_every_frame_arrives_in_order_before_completion_across_two_boundaries(smat):
    # three islands, two channels; each run's actors are given back (or killed) as soon as the islands end
    for n in (1, 7, 8, 500):
        graph = Source.range(0, n).island().map(lambda x: x * 3).island().to_mat(Sink.seq(), Keep.right)
        assert graph.run(smat).result(30) == [x * 3 for x in range(n)]


def test_an_empty_stream_completes_across_a_boundary(smat):
    assert Source.empty().island().to_mat(Sink.seq(), Keep.right).run(smat).result(30) == []


def test_a_failure_arrives_after_the_elements_sent_before_it(smat):
    def boom(x):
        if x == 40:
            raise ValueError("boom at 40")
        return x

    graph = (Source.range(0, 100).map(boom).island()
             .recover(lambda e: f"recovered {e}").to_mat(Sink.seq(), Keep.right))
    assert graph.run(smat).result(30) == list(range(40)) + ["recovered boom at 40"]
