"""Channel peer refs across island actors: the Reactive Streams signals as Ray actor calls.

A boundary logic talks to its peer through a *ref* with the protocol methods; these refs turn each
signal into a call on the peer island's actor, tagged with the channel id. Data signals (frames and
terminal signals) go to the actor's ordered ``data`` concurrency group; demand and cancellation go
to its ``control`` group, so they are served even while frames are queued. ``on_next`` returns a
future that completes when the peer has taken the frame: the output boundary uses it to keep a
bounded window of frames in flight.
"""
from __future__ import annotations

from typing import Any

from .codec import encode


class RemotePublisherRef:
    """The publisher end of channel ``ch`` as seen from the subscribing island."""

    __slots__ = ("actor", "ch", "own_actor")

    def __init__(self, actor, ch: int, own_actor):
        self.actor = actor
        self.ch = ch
        self.own_actor = own_actor

    def subscribe(self, _local_subscriber) -> None:
        # the publisher's island answers to our actor, which routes by channel id
        self.actor.subscribe.remote(self.ch, self.own_actor)

    def request(self, n: int, seq: int) -> None:
        self.actor.request.remote(self.ch, n, seq)

    def cancel(self, cause: BaseException) -> None:
        self.actor.cancel.remote(self.ch, cause)


class RemoteSubscriberRef:
    """The subscriber end of channel ``ch`` as seen from the publishing island."""

    __slots__ = ("actor", "ch")

    def __init__(self, actor, ch: int):
        self.actor = actor
        self.ch = ch

    def on_subscribe(self, _local_publisher) -> None:
        self.actor.on_subscribe.remote(self.ch)

    def on_next(self, seq: int, frame: list) -> Any:
        payload, refs = encode(frame)
        return self.actor.on_next.remote(self.ch, seq, payload, refs).future()

    def on_complete(self) -> None:
        self.actor.on_complete.remote(self.ch)

    def on_error(self, exc: BaseException) -> None:
        self.actor.on_error.remote(self.ch, exc)
