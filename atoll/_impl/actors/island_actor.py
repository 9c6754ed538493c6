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

An actor whose island ended cleanly may be *reset* and lent to a later graph (``warm_pool``): ``reset`` drops
everything the island left and refuses (the driver then kills the actor) while a thread the island started
is still running. Each ``start`` gets a wire base, added to the plan's channel ids on the wire, and the
coordinator's calls carry it as the actor's generation: a late call meant for an earlier graph finds no
channel and no generation to act on.
"""
from __future__ import annotations

import gc
import logging
import queue
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Dict, List, Optional

import ray

from ..islands.boundaries import InputBoundary, OutputBoundary
from ...checkpoint.snapshot import dumps
from ...checkpoint.storage import CheckpointStorage
from ..islands.checkpoint_coordinator import blob_name
from ..islands.checkpoint_setup import replay_hook
from ..islands.checkpointer import IslandCheckpointer, ended_cleanly, failure_in
from ..islands.island_assembly import assemble_island, island_fingerprint
from ..islands.island_plan import IslandPlan
from ..islands.thread_host import ThreadHost
from .codec import decode_message
from .exports import ExportTable
from .messages import (
    CheckpointAcked,
    CheckpointDeclined,
    CheckpointRequested,
    FinalSnapshot,
    FutureCompleted,
    FutureFailed,
    IslandEnded,
    PollEvent,
)
from .refs import RemotePublisherRef, RemoteSubscriberRef
from ..._portable import portable_exception

log = logging.getLogger("atoll.actor")

#: The cyclic garbage collector's thresholds in an island actor's process (``gc.set_threshold``; CPython's default
#: is (700, 10, 10)). An island allocates and drops containers by the hundred thousand a second (rows, lists of a
#: chunk, a map_pool's held elements, Ray's deserialized replies): with the default a young collection ran every 700
#: of them, each walking the elements still held: the demo's warm runs went from ~80 k to ~90 k events/s with it.
#: What it costs: up to 10,000 young container objects wait for a collection (garbage without cycles is still freed
#: at once, by reference counting). The process is Atoll's own (a Ray worker hosting islands): no user process's
#: collector is changed.
ISLAND_GC_THRESHOLD = (10_000, 10, 10)


class _ActorContextMaterializer:
    """What stages running in an actor see as ``logic.materializer``: settings, and in-host
    materialization for stages that run substreams."""

    def __init__(self, settings):
        self.settings = settings

    def __repr__(self):
        return "Materializer(in island actor)"


class ActorTransport:
    """Channels between island actors: an input boundary's publisher is the producing island's actor,
    reached by channel id (``refs``); frame size, window and store budget come from the Ray settings."""

    def __init__(self, own_actor, peers: Dict[int, Any], settings, wire_base: int = 0):
        self.own_actor = own_actor
        self.peers = peers
        self.max_frame: int = settings.frame_size
        self.window: int = settings.channel_window
        #: object-store bytes a channel's elements passed by reference may hold (``RaySettings.channel_store_bytes``)
        self.store_budget: int = settings.channel_store_bytes or 0
        self.wire_base = wire_base  # added to channel ids on the wire (unique per started graph attempt)

    def publisher(self, island: int, channel: int) -> RemotePublisherRef:
        return RemotePublisherRef(self.peers[island], channel + self.wire_base, self.own_actor, self.window)

    def on_output(self, channel: int, boundary: OutputBoundary) -> None:
        pass  # the actor routes the subscriber's signals by channel id (``AssembledIsland.outputs``)


@ray.remote(concurrency_groups={"data": 1, "signals": 1, "control": 8})
class IslandActor:
    def __init__(self, name: str, switch_interval: float = 0.0005):
        # The interpreter thread and Ray's call threads share the GIL; a short switch interval keeps
        # frames and demand flowing while the interpreter is busy (CPython's default is 5 ms).
        import sys

        sys.setswitchinterval(switch_interval)
        gc.set_threshold(*ISLAND_GC_THRESHOLD)
        self.name = name
        self.host: Optional[ThreadHost] = None
        self.outputs: Dict[int, OutputBoundary] = {}
        self.inputs: Dict[int, InputBoundary] = {}
        self.exports = ExportTable()
        self.events: "queue.Queue" = queue.Queue()
        self.ended = False
        self.checkpoint: Optional[dict] = None
        self.writer: Optional[ThreadPoolExecutor] = None
        self.gen: Optional[int] = None  # the wire base of the graph attempt using the actor now
        self._threads = _own_threads()  # what a fresh actor runs: reset refuses while more is left

    @ray.method(concurrency_group="control")
    def ready(self) -> bool:
        """Answers once the actor process is up (warm actors started ahead of any graph)."""
        return True

    #: how long ``reset`` waits for threads the island started to end
    RESET_THREAD_WAIT = 2.0

    @ray.method(concurrency_group="control")
    def reset(self) -> bool:
        """Forget the ended island so that the actor can host another graph's island; False (not reusable)
        while the island still runs or a thread it started has not ended within ``RESET_THREAD_WAIT``."""
        if self.host is not None and not self.ended:
            return False
        deadline = time.monotonic() + self.RESET_THREAD_WAIT
        while True:
            left = [t for t in _own_threads() - self._threads if t.is_alive()]
            if not left:
                break
            if time.monotonic() >= deadline:
                log.info("island actor %s not reusable: threads left running: %s", self.name,
                         [t.name for t in left])
                return False
            left[0].join(timeout=0.05)
        self.host = None
        self.outputs = {}
        self.inputs = {}
        self.exports.reset()
        self.events = queue.Queue()
        self.ended = False
        self.checkpoint = None
        self.writer = None
        self.gen = None
        return True

    # ------------------------------------------------------------------ lifecycle
    @ray.method(concurrency_group="control")
    def start(self, plan: IslandPlan, peers: Dict[int, Any], settings, checkpoint: Optional[dict] = None,
              restore: Any = None, wire_base: int = 0) -> List[Any]:
        """Build the island from ``plan``; returns the exported materialized values. ``checkpoint``: where the
        graph's checkpoints go (``storage``, ``graph``, ``attempt``), None without checkpoints; ``restore``: the
        island's ``IslandSnapshot`` to start from; ``wire_base``: added to the plan's channel ids on the wire,
        and the generation the coordinator's calls carry."""
        if self.host is not None:
            raise RuntimeError(f"island actor {self.name} already hosts an island (not reset)")
        me = ray.get_runtime_context().current_actor
        self.name = plan.name
        self.gen = wire_base
        host = ThreadHost(plan.name, event_limit=settings.event_limit)
        transport = ActorTransport(me, peers, settings, wire_base)
        island = assemble_island(plan, transport, host, _ActorContextMaterializer(settings), settings, restore=restore)
        host.interpreter = island.interpreter
        host.before_init = replay_hook(island)
        if checkpoint is not None:
            self.checkpoint = checkpoint
            self.writer = ThreadPoolExecutor(1, thread_name_prefix=f"atoll-ckpt-{plan.name}")
            host.checkpointer = IslandCheckpointer(host, island.interpreter, plan.index, plan.name, island.keys,
                                                   island_fingerprint(plan), self._checkpoint_report,
                                                   attempt=checkpoint.get("attempt", 0),
                                                   aligned=checkpoint.get("aligned", True),
                                                   logged=checkpoint.get("logged", False),
                                                   decline_after_failure=checkpoint.get("decline_after_failure",
                                                                                        False),
                                                   feedback=[island.inputs[ch] for ch in checkpoint.get("feedback", ())
                                                             if ch in island.inputs])
        self.outputs = {ch + wire_base: b for ch, b in island.outputs.items()}
        self.inputs = {ch + wire_base: b for ch, b in island.inputs.items()}
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

    # ------------------------------------------------------------------ checkpoints
    def _checkpoint_report(self, kind: str, island: int, n: int, payload: Any) -> None:
        """The island's checkpointer answered checkpoint ``n`` (island thread): write the blob off that thread."""
        if kind == "ack":
            self.writer.submit(self._write_blob, island, n, payload)
        elif kind == "request":
            self.events.put(CheckpointRequested(bool(payload)))
        else:
            self.events.put(CheckpointDeclined(n, portable_exception(payload)))

    def _write_blob(self, island: int, n: int, data: bytes) -> None:
        ck = self.checkpoint
        try:
            storage = CheckpointStorage(ck["storage"], ck["graph"])
            entry = storage.write_blob(n, blob_name(island, ck.get("attempt", 0)), data)
        except BaseException as e:  # noqa: BLE001 - a failed write declines the checkpoint
            self.events.put(CheckpointDeclined(n, portable_exception(e)))
            return
        self.events.put(CheckpointAcked(n, entry))

    @ray.method(concurrency_group="control")
    def inject_checkpoint(self, n: int, gen: int) -> None:
        """The coordinator triggered checkpoint ``n``."""
        if gen == self.gen and self.host is not None and self.host.checkpointer is not None:
            self.host.post(self.host.checkpointer.inject, n)

    @ray.method(concurrency_group="control")
    def abort_checkpoint(self, n: int, gen: int) -> None:
        """The coordinator gave checkpoint ``n`` up."""
        if gen == self.gen and self.host is not None and self.host.checkpointer is not None:
            self.host.post(self.host.checkpointer.abort, n)

    @ray.method(concurrency_group="control")
    def checkpoint_complete(self, n: int, gen: int) -> None:
        """The coordinator wrote checkpoint ``n``'s manifest: phase 2 of the island's two-phase commits."""
        if gen == self.gen and self.host is not None and self.host.checkpointer is not None:
            self.host.post(self.host.checkpointer.complete, n)

    @ray.method(concurrency_group="control")
    def checkpoint_status(self) -> dict:
        cp = self.host.checkpointer if self.host is not None else None
        return cp.status() if cp is not None else {"checkpoint": None}

    #: how long an ended island waits for its last channel calls to be delivered before it reports its end
    DELIVERY_WAIT = 10.0

    def _island_done(self, host) -> None:
        self.ended = True
        err = host.error
        # The driver kills the actor once it hears of the end: the subscription and terminal calls this island
        # sent must have reached their islands first, or a subscriber never completes (the frames before the
        # terminal call run before it: one caller, the ordered one-thread ``data`` group).
        sent = [r for b in self.outputs.values() if isinstance(b.subscriber, RemoteSubscriberRef)
                for r in b.subscriber.in_flight()]
        if sent:
            ray.wait(sent, num_returns=len(sent), timeout=self.DELIVERY_WAIT)
        cp = host.checkpointer
        if cp is not None:
            self.writer.shutdown(wait=True)  # acks of checkpoints cut before the end go out first
            if host.state == "completed" and ended_cleanly(host.interpreter):
                try:
                    self.events.put(FinalSnapshot(dumps(cp.snapshot(0, finished=True), cp._describe)))
                except Exception as e:  # noqa: BLE001 - no final snapshot: later checkpoints cannot complete
                    log.warning("island %s: final snapshot failed: %r", self.name, e)
        copies = self.exports.detach()
        failure = failure_in(host.interpreter) if host.interpreter is not None else None
        self.events.put(IslandEnded(host.state, portable_exception(err) if err is not None else None, copies,
                                    portable_exception(failure) if failure is not None else None))

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
    def cancel_island(self, cause: BaseException, gen: int) -> None:
        """Fail every stage of the island with ``cause``."""
        if gen == self.gen and self.host is not None:
            self.host.cancel(cause)

    @ray.method(concurrency_group="control")
    def call_handle(self, hid: int, method: str, args, kwargs):
        """Call ``method`` on an exported handle (kill switch, probe ...); a ``messages.CallResult``."""
        return self.exports.call(hid, method, args, kwargs)

    # ------------------------------------------------------------------ channel signals (subscriber side)
    # The per-frame and demand calls return nothing (``num_returns=0``): no return object is stored in the actor
    # or tracked by the caller, ~18% less CPU per element on the two sides of a channel (frame 4096). Nothing
    # waits for them: frames are confirmed by the subscriber's requests and acks, and the terminal call that
    # follows the frames in the ordered ``data`` group is what an ending island waits for.
    @ray.method(concurrency_group="data", enable_task_events=False, num_returns=0)
    def on_frame(self, payload: bytes) -> None:
        """A frame (``codec.encode_message``: channel id, sequence number, elements) without object refs."""
        ch, seq, frame = decode_message(payload, None)
        b = self.inputs.get(ch)
        if b is not None:
            b.subscriber_ref.on_next(seq, frame)

    @ray.method(concurrency_group="data", enable_task_events=False, num_returns=0)
    def on_frame_with_refs(self, payload: bytes, refs: list, stored: int = 0) -> None:
        """A frame whose large elements travel as the object refs ``refs`` (borrowed while decoding), taking
        ``stored`` bytes of the object store."""
        ch, seq, frame = decode_message(payload, refs)
        b = self.inputs.get(ch)
        if b is not None:
            b.subscriber_ref.on_next(seq, frame, stored)

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
    def subscribe(self, ch: int, subscriber_actor, n: int = 0) -> None:
        """The subscriber's island subscribes to channel ``ch``; ``n`` > 0: with its request #0 of ``n`` elements."""
        b = self.outputs.get(ch)
        if b is not None:
            if n > 0:
                b.publisher_ref.subscribe_with_request(RemoteSubscriberRef(subscriber_actor, ch), n)
            else:
                b.publisher_ref.subscribe(RemoteSubscriberRef(subscriber_actor, ch))

    @ray.method(concurrency_group="signals", enable_task_events=False, num_returns=0)
    def request(self, ch: int, n: int, seq: int, acked=None) -> None:
        b = self.outputs.get(ch)
        if b is not None:
            b.publisher_ref.request(n, seq, acked)

    @ray.method(concurrency_group="signals", enable_task_events=False, num_returns=0)
    def ack(self, ch: int, frames: int) -> None:
        b = self.outputs.get(ch)
        if b is not None:
            b.publisher_ref.ack(frames)

    @ray.method(concurrency_group="signals")
    def cancel(self, ch: int, cause: BaseException) -> None:
        b = self.outputs.get(ch)
        if b is not None:
            b.publisher_ref.cancel(cause)


def _own_threads() -> set:
    """The Python threads of this process that Python started (not Ray's call threads seen from Python)."""
    return {t for t in threading.enumerate() if not isinstance(t, threading._DummyThread)}
