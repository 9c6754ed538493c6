"""IslandActor: the Ray actor hosting one island (its interpreter runs on a thread of the actor).

The driver sends the island's *plan* (its stages and island-local wiring, recorded by the materializer
on the driver) to ``start``; the actor replays it with ``assemble_island`` (as the local materializer
does), its channel ends reaching the peer island actors (``ActorTransport``), and then starts the
interpreter thread. Incoming channel signals are routed
by channel id to the boundary logics through the host's inbox, so the actor's call threads never touch
the interpreter. Methods are split in three concurrency groups: ``data`` (one thread: frames and
terminal signals stay in order), ``signals`` (one thread: subscription, demand and cancellation, in
order) and ``control`` (kill switches, the driver's ``poll`` and handle calls); the last two are
served even while frames are queued.
"""
from __future__ import annotations

import logging
import queue
from concurrent.futures import Future
from typing import Any, Dict, List, Optional

import ray

from ..islands.boundaries import InputBoundary, OutputBoundary
from ..islands.island_assembly import assemble_island
from ..islands.island_plan import IslandPlan
from ..islands.thread_host import ThreadHost
from .codec import decode_message
from .exports import ExportTable
from .messages import FutureCompleted, FutureFailed, IslandEnded, PollEvent
from .refs import RemotePublisherRef, RemoteSubscriberRef
from .portable import portable_exception

log = logging.getLogger("atoll.actor")


class _ActorContextMaterializer:
    """What stages running in an actor see as ``logic.materializer``: settings, and in-host
    materialization for stages that run substreams."""

    def __init__(self, settings):
        self.settings = settings

    def __repr__(self):
        return "Materializer(in island actor)"


class ActorTransport:
    """Channels between island actors: an input boundary's publisher is the producing island's actor,
    reached by channel id (``refs``); frame size and window come from the Ray settings."""

    def __init__(self, own_actor, peers: Dict[int, Any], settings):
        self.own_actor = own_actor
        self.peers = peers
        self.max_frame: int = settings.frame_size
        self.window: int = settings.channel_window

    def publisher(self, island: int, channel: int) -> RemotePublisherRef:
        return RemotePublisherRef(self.peers[island], channel, self.own_actor, self.window)

    def on_output(self, channel: int, boundary: OutputBoundary) -> None:
        pass  # the actor routes the subscriber's signals by channel id (``AssembledIsland.outputs``)


@ray.remote(concurrency_groups={"data": 1, "signals": 1, "control": 8})
class IslandActor:
    def __init__(self, name: str, switch_interval: float = 0.0005):
        # The interpreter thread and Ray's call threads share the GIL; a short switch interval keeps
        # frames and demand flowing while the interpreter is busy (CPython's default is 5 ms).
        import sys

        sys.setswitchinterval(switch_interval)
        self.name = name
        self.host: Optional[ThreadHost] = None
        self.outputs: Dict[int, OutputBoundary] = {}
        self.inputs: Dict[int, InputBoundary] = {}
        self.exports = ExportTable()
        self.events: "queue.Queue" = queue.Queue()
        self.ended = False

    # ------------------------------------------------------------------ lifecycle
    @ray.method(concurrency_group="control")
    def start(self, plan: IslandPlan, peers: Dict[int, Any], settings) -> List[Any]:
        """Build the island from ``plan``; returns the exported materialized values."""
        me = ray.get_runtime_context().current_actor
        host = ThreadHost(plan.name, event_limit=settings.event_limit)
        transport = ActorTransport(me, peers, settings)
        island = assemble_island(plan, transport, host, _ActorContextMaterializer(settings), settings)
        host.interpreter = island.interpreter
        self.outputs = island.outputs
        self.inputs = island.inputs
        self.exports.on_future_done = self._future_done
        exported = [self.exports.export(m, me, plan.name) for m in island.materialized]
        host.on_done = self._island_done
        self.host = host
        return exported

    @ray.method(concurrency_group="control")
    def run(self) -> None:
        """Start the interpreter thread (after every island of the graph was built, so that no
        channel signal can reach an island before its boundaries exist)."""
        self.host.start()

    def _island_done(self, host) -> None:
        self.ended = True
        err = host.error
        copies = self.exports.detach()
        self.events.put(IslandEnded(host.state, portable_exception(err) if err is not None else None, copies))

    def _future_done(self, fid: int, fut: Future) -> None:
        exc = fut.exception()
        if exc is None:
            self.events.put(FutureCompleted(fid, fut.result()))
        else:
            self.events.put(FutureFailed(fid, portable_exception(exc)))

    @ray.method(concurrency_group="control")
    def poll(self, timeout: float = 10.0) -> List[PollEvent]:
        """Block until something happened (a future completed, the island ended); return it all."""
        try:
            first = self.events.get(timeout=timeout)
        except queue.Empty:
            return []
        out = [first]
        while True:
            try:
                out.append(self.events.get_nowait())
            except queue.Empty:
                return out

    @ray.method(concurrency_group="control")
    def info(self) -> dict:
        ctx = ray.get_runtime_context()
        d = self.host.info() if self.host is not None else {"name": self.name, "state": "starting"}
        d["node_id"] = ctx.get_node_id()
        d["actor_id"] = ctx.get_actor_id()
        d["pid"] = __import__("os").getpid()
        return d

    @ray.method(concurrency_group="control")
    def cancel_island(self, cause: BaseException) -> None:
        """Fail every stage of the island with ``cause``."""
        if self.host is not None:
            self.host.cancel(cause)

    @ray.method(concurrency_group="control")
    def call_handle(self, hid: int, method: str, args, kwargs):
        """Call ``method`` on an exported handle (kill switch, probe ...); a ``messages.CallResult``."""
        return self.exports.call(hid, method, args, kwargs)

    # ------------------------------------------------------------------ channel signals (subscriber side)
    @ray.method(concurrency_group="data", enable_task_events=False)
    def on_frame(self, payload: bytes) -> None:
        """A frame (``codec.encode_message``: channel id, sequence number, elements) without object refs."""
        ch, seq, frame = decode_message(payload, None)
        b = self.inputs.get(ch)
        if b is not None:
            b.subscriber_ref.on_next(seq, frame)

    @ray.method(concurrency_group="data", enable_task_events=False)
    def on_frame_with_refs(self, payload: bytes, refs: list) -> None:
        """A frame whose large elements travel as the object refs ``refs`` (borrowed while decoding)."""
        ch, seq, frame = decode_message(payload, refs)
        b = self.inputs.get(ch)
        if b is not None:
            b.subscriber_ref.on_next(seq, frame)

    @ray.method(concurrency_group="data")
    def on_complete(self, ch: int) -> None:
        b = self.inputs.get(ch)
        if b is not None:
            b.subscriber_ref.on_complete()

    @ray.method(concurrency_group="data")
    def on_error(self, ch: int, exc: BaseException) -> None:
        b = self.inputs.get(ch)
        if b is not None:
            b.subscriber_ref.on_error(exc)

    @ray.method(concurrency_group="signals")
    def on_subscribe(self, ch: int) -> None:
        b = self.inputs.get(ch)
        if b is not None:
            b.subscriber_ref.on_subscribe(b.publisher)

    # ------------------------------------------------------------------ channel signals (publisher side)
    @ray.method(concurrency_group="signals")
    def subscribe(self, ch: int, subscriber_actor) -> None:
        b = self.outputs.get(ch)
        if b is not None:
            b.publisher_ref.subscribe(RemoteSubscriberRef(subscriber_actor, ch))

    @ray.method(concurrency_group="signals", enable_task_events=False)
    def request(self, ch: int, n: int, seq: int, acked=None) -> None:
        b = self.outputs.get(ch)
        if b is not None:
            b.publisher_ref.request(n, seq, acked)

    @ray.method(concurrency_group="signals", enable_task_events=False)
    def ack(self, ch: int, frames: int) -> None:
        b = self.outputs.get(ch)
        if b is not None:
            b.publisher_ref.ack(frames)

    @ray.method(concurrency_group="signals")
    def cancel(self, ch: int, cause: BaseException) -> None:
        b = self.outputs.get(ch)
        if b is not None:
            b.publisher_ref.cancel(cause)
