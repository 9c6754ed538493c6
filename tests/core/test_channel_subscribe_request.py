"""The first request riding on the subscription: on a transport where every channel signal is a call between
processes (``RemotePublisherRef.request_on_subscribe``), an input boundary sends its request #0 with ``subscribe``
instead of in answer to ``on_subscribe`` (one hop less before the first frame). Both ends are checked against
exact call sequences: the subscriber's calls (request #0 with the subscription, none after ``on_subscribe``,
request #1 after half its buffer was consumed) and the publisher's frames (never more than requested, request
numbering going on at #1, a refused second subscriber's request not counted). No Ray is started."""
from __future__ import annotations

import queue

from atoll import Keep, Sink, Source
from atoll._impl.actors.codec import decode_message
from atoll._impl.actors.refs import RemoteSubscriberRef
from atoll._impl.islands.boundaries import InputBoundary, OutputBoundary
from atoll._impl.ops.base import SinkStage, SourceStage
from atoll.errors import SpecViolationError
from atoll.testkit import TestSink
from channel_kit import RecordingActor

CH = 3


class _EarlyPublisher:
    """A publisher ref that takes request #0 with ``subscribe`` (as ``RemotePublisherRef``), recording its calls."""

    request_on_subscribe = True
    windowed = False

    def __init__(self):
        self.calls: queue.Queue = queue.Queue()

    def subscribe(self, subscriber, n: int = 0) -> None:
        self.subscriber = subscriber
        self.calls.put(("subscribe", n))

    def request(self, n: int, seq: int, acked=None) -> None:
        self.calls.put(("request", n, seq))

    def cancel(self, cause) -> None:
        self.calls.put(("cancel", type(cause).__name__))


class _InputSource(SourceStage):
    def __init__(self, publisher, size: int):
        super().__init__("EarlyInput")
        self.publisher, self.size = publisher, size

    def create_logic_and_materialized_value(self, attributes):
        return InputBoundary(self.publisher, self.size, out=self.out), None


class _OutputSink(SinkStage):
    def __init__(self):
        super().__init__("Out")

    def create_logic_and_materialized_value(self, attributes):
        logic = OutputBoundary("Out>", max_frame=100, in_=self.in_)
        return logic, logic


def test_subscriber_sends_request_0_with_the_subscription_and_none_on_subscribe(mat):
    pub = _EarlyPublisher()
    sink = Source.from_graph(_InputSource(pub, 4)).run_with(TestSink.probe(), mat)
    assert pub.calls.get(timeout=5) == ("subscribe", 4)
    pub.subscriber.on_subscribe(pub)
    pub.subscriber.on_next(0, [1, 2])
    sink.request(2)
    sink.expect_next(1, 2)
    assert pub.calls.get(timeout=5) == ("request", 2, 1)  # half the buffer consumed: request #1, not #0 again
    pub.subscriber.on_next(1, [3, 4, 5, 6])  # 4 outstanding: 2 left of request #0 and 2 of request #1
    pub.subscriber.on_complete()
    sink.request(10)
    sink.expect_next(3, 4, 5, 6)
    sink.expect_complete()
    assert pub.calls.empty()


def _frames(actor, until_elements: int, first_seq: int = 0) -> list:
    out = []
    while sum(len(f) for f in out) < until_elements:
        name, args = actor.calls.get(timeout=5)
        assert name == "on_frame", (name, args)
        ch, seq, frame = decode_message(args[0], None)
        assert (ch, seq) == (CH, first_seq + len(out))
        out.append(frame)
    return out


def test_publisher_sends_no_more_than_request_0_and_counts_requests_on_from_1(mat):
    boundary = Source.range(0, 8).to_mat(_OutputSink(), Keep.right).run(mat)
    actor = RecordingActor()
    boundary.publisher_ref.subscribe_with_request(RemoteSubscriberRef(actor, CH), 5)
    assert actor.calls.get(timeout=5) == ("on_subscribe", (CH,))
    first = _frames(actor, 5)
    assert [x for f in first for x in f] == [0, 1, 2, 3, 4]
    boundary.publisher_ref.ack(len(first))
    second = RemoteSubscriberRef(RecordingActor(), CH + 1)  # a second subscriber is refused ...
    boundary.publisher_ref.subscribe_with_request(second, 100)
    assert second.actor.calls.get(timeout=5) == ("on_subscribe", (CH + 1,))
    name, args = second.actor.calls.get(timeout=5)
    assert name == "on_error" and isinstance(args[1], SpecViolationError)
    assert actor.calls.empty()  # ... and its request gave the first one no demand
    boundary.publisher_ref.request(3, 1, len(first))  # request #1: #0 came with the subscription
    rest = _frames(actor, 3, len(first))
    assert [x for f in rest for x in f] == [5, 6, 7]
    assert actor.calls.get(timeout=5) == ("on_complete", (CH,))


class _EarlyWindowedPublisher(_EarlyPublisher):
    """As ``_EarlyPublisher`` with a window of unconfirmed frames (requests carry the frames received)."""

    windowed = True
    window = 2

    def request(self, n: int, seq: int, acked=None) -> None:
        self.calls.put(("request", n, seq, acked))

    def ack(self, received: int) -> None:
        self.calls.put(("ack", received))


def test_frames_arriving_before_on_subscribe_are_taken_confirmed_and_answered_with_requests(mat):
    # on Ray, frames come in the receiver's ``data`` call group and ``on_subscribe`` in ``signals``: frames sent
    # for request #0 may overtake the publisher's ``on_subscribe``
    pub = _EarlyWindowedPublisher()
    sink = Source.from_graph(_InputSource(pub, 4)).run_with(TestSink.probe(), mat)
    assert pub.calls.get(timeout=5) == ("subscribe", 4)
    pub.subscriber.on_next(0, [1, 2])
    sink.request(2)
    sink.expect_next(1, 2)
    # half the buffer consumed: request #1, confirming the frame received, with no on_subscribe seen yet
    assert pub.calls.get(timeout=5) == ("request", 2, 1, 1)
    pub.subscriber.on_subscribe(pub)  # the confirmation arrives late: nothing more happens
    pub.subscriber.on_next(1, [3, 4, 5, 6])
    pub.subscriber.on_complete()
    sink.request(10)
    sink.expect_next(3, 4, 5, 6)
    sink.expect_complete()
    assert pub.calls.empty()
