"""Channel peer refs across island actors: the Reactive Streams signals as Ray actor calls.

A boundary logic talks to its peer through a *ref* with the protocol methods; these refs turn each
signal into a call on the peer island's actor, tagged with the channel id. Data signals (frames and
terminal signals) go to the actor's ordered ``data`` concurrency group; demand and cancellation go
to its ``signals`` group, so they are served even while frames are queued. The subscriber confirms the
frames it received (in its requests, or with ``ack`` every few frames), which lets the output
boundary keep a bounded window of frames in flight without a reply per call: frame, request and ack
calls return nothing (``num_returns=0`` on the actor's methods), so no return object is made for them.
"""
from __future__ import annotations

from typing import Any

from .codec import encode_message
from ..._portable import portable_exception


class RemotePublisherRef:
    """The publisher end of channel ``ch`` as seen from the subscribing island."""

    __slots__ = ("actor", "ch", "own_actor", "window")

    #: the subscriber confirms received frames (with its requests, or ``ack`` every half ``window``)
    windowed = True
    #: the subscriber's first request goes with ``subscribe`` (one call less before the first frame)
    request_on_subscribe = True

    def __init__(self, actor, ch: int, own_actor, window: int = 8):
        self.actor = actor
        self.ch = ch
        self.own_actor = own_actor
        self.window = window  # frames the publisher keeps in flight unconfirmed (the channel window)

    def subscribe(self, _local_subscriber, n: int = 0) -> None:
        """Subscribe; ``n`` > 0 is request #0 of ``n`` elements, carried by the same call."""
        # the publisher's island answers to our actor, which routes by channel id
        self.actor.subscribe.remote(self.ch, self.own_actor, n)

    def request(self, n: int, seq: int, acked=None) -> None:
        self.actor.request.remote(self.ch, n, seq, acked)

    def ack(self, frames: int) -> None:
        self.actor.ack.remote(self.ch, frames)

    def cancel(self, cause: BaseException) -> None:
        self.actor.cancel.remote(self.ch, portable_exception(cause))


class RemoteSubscriberRef:
    """The subscriber end of channel ``ch`` as seen from the publishing island. It keeps the object refs of its
    subscription and terminal calls, so that the island can wait for them to be delivered before it ends (an
    actor killed with calls still queued in it would lose them). Frame calls have no object ref: they run
    before the terminal call that follows them (same caller, the receiver's ordered one-thread ``data`` group),
    and a subscriber that cancelled needs none of them."""

    __slots__ = ("actor", "ch", "sent", "stored", "stored_largest")

    #: the publisher keeps at most ``window`` unconfirmed frames in flight
    windowed = True
    #: ``on_next`` returns the frame's encoded bytes (the publisher keeps frames under a byte budget with them)
    sized = True
    #: after ``on_next``, ``stored`` holds the bytes the frame put into the object store (its elements passed by
    #: reference) and ``stored_largest`` the largest object's: the publisher keeps what the channel holds there
    #: under its store budget with them
    reports_stored = True

    def __init__(self, actor, ch: int):
        self.actor = actor
        self.ch = ch
        self.sent = [None, None]  # on_subscribe, the terminal call
        self.stored = 0  # object-store bytes of the last frame sent
        self.stored_largest = 0  # of its objects in the store, the largest's bytes

    def on_subscribe(self, _local_publisher) -> None:
        self.sent[0] = self.actor.on_subscribe.remote(self.ch)

    def on_next(self, seq: int, frame: list) -> int:
        """Send frame ``seq``; returns the bytes of its encoded payload (object-store references not counted) and
        sets ``stored`` to the bytes its elements passed by reference take in the object store, which the
        subscriber is told too (it hands such elements on in chunks of bounded bytes)."""
        sizes: list = []
        payload, refs = encode_message(self.ch, seq, frame, sizes)
        if refs:
            stored = self.stored = sum(sizes)
            if stored:
                self.stored_largest = max(sizes)
                self.actor.on_frame_with_refs.remote(payload, refs, stored)
            else:  # only ObjectRefs the stream carries as elements
                self.actor.on_frame_with_refs.remote(payload, refs)
        else:
            self.stored = 0
            self.actor.on_frame.remote(payload)  # one argument: the cheapest call
        return len(payload)

    def on_complete(self) -> None:
        self.sent[1] = self.actor.on_complete.remote(self.ch)

    def on_error(self, exc: BaseException) -> None:
        self.sent[1] = self.actor.on_error.remote(self.ch, portable_exception(exc))

    def in_flight(self) -> list:
        """The refs of the calls whose delivery the island waits for when it ends."""
        return [r for r in self.sent if r is not None]
