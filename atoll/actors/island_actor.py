"""IslandActor: the Ray actor hosting one island (its interpreter runs on a thread of the actor).

The driver sends the island's *plan* (its stages and island-local wiring, recorded by the materializer
on the driver) to ``start``; the actor creates the stage logics, builds the interpreter, wires channel
ends to the peer island actors and starts the interpreter thread. Incoming channel signals are routed
by channel id to the boundary logics through the host's inbox, so the actor's call threads never touch
the interpreter. Methods are split in three concurrency groups: ``data`` (one thread: frames and
terminal signals stay in order), ``signals`` (one thread: subscription, demand and cancellation, in
order) and ``control`` (kill switches, the driver's ``poll`` and handle calls); the last two are
served even while frames are queued.
"""
from __future__ import annotations

import logging
import queue
import threading
import time
from concurrent.futures import Future
from typing import Any, Dict, List, Optional

import ray

from ..errors import AbruptTerminationError
from ..islands.boundaries import InputBoundary, OutputBoundary
from ..islands.passes import prepare_island
from ..islands.island_builder import IslandBuilder
from ..islands.local_phase import create_stage, input_buffer_size
from ..islands.thread_host import ThreadHost
from ..markers import NotUsed
from ..stage.ports import Inlet
from .codec import decode
from .exports import ExportTable
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
    def start(self, plan, peers: Dict[int, Any], settings) -> List[Any]:
        """Build the island from ``plan``; returns the exported materialized values."""
        me = ray.get_runtime_context().current_actor
        host = ThreadHost(plan.name, event_limit=settings.event_limit)
        builder = IslandBuilder(plan.name)
        logics = []
        mats = []
        for module, attributes in plan.stages:
            logic, mat = create_stage(module, attributes)
            builder.add_logic(logic)
            logics.append(logic)
            mats.append(mat)
        top = settings.top_attributes()
        for op in plan.ops:
            kind = op[0]
            if kind == "assign":
                _, i, is_in, port_id, slot = op
                shape = plan.stages[i][0].shape
                port = shape.inlets[port_id] if is_in else shape.outlets[port_id]
                builder.assign_port(port, slot, logics[i])
            elif kind == "publish":
                _, i, port_id, ch = op
                out = plan.stages[i][0].shape.outlets[port_id]
                boundary = OutputBoundary(
                    f"{logics[i].stage_name}.{out.name}>", max_frame=settings.frame_size, window=settings.channel_window
                )
                boundary.attributes = logics[i].attributes
                builder.add_output_boundary(out, logics[i], boundary)
                self.outputs[ch] = boundary
            else:  # take
                _, slot, island, ch = op
                consumer = builder.consumer_at(slot)
                size = input_buffer_size(consumer, top)
                publisher = RemotePublisherRef(peers[island], ch, me)
                boundary = InputBoundary(publisher, size, f">{consumer.stage_name if consumer else plan.name}")
                builder.add_input_boundary(slot, boundary)
                self.inputs[ch] = boundary
        prepare_island(builder, settings)
        materializer = _ActorContextMaterializer(settings)
        host.interpreter = builder.build(host, materializer)
        self.exports.on_future_done = self._future_done
        exported = [self.exports.export(m, me, plan.name) for m in mats]
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
        self.events.put(("done", host.state, portable_exception(err) if err is not None else None, copies))

    def _future_done(self, fid: int, fut: Future) -> None:
        exc = fut.exception()
        if exc is None:
            self.events.put(("future", fid, True, fut.result()))
        else:
            self.events.put(("future", fid, False, portable_exception(exc)))

    @ray.method(concurrency_group="control")
    def poll(self, timeout: float = 10.0) -> List[tuple]:
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
        """Call ``method`` on an exported handle (kill switch, probe ...); ("ok", result) or ("err", exc)."""
        return self.exports.call(hid, method, args, kwargs)

    # ------------------------------------------------------------------ channel signals (subscriber side)
    @ray.method(concurrency_group="data")
    def on_next(self, ch: int, seq: int, payload: bytes, refs) -> None:
        frame = decode(payload, refs)
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

    @ray.method(concurrency_group="signals")
    def request(self, ch: int, n: int, seq: int, acked=None) -> None:
        b = self.outputs.get(ch)
        if b is not None:
            b.publisher_ref.request(n, seq, acked)

    @ray.method(concurrency_group="signals")
    def ack(self, ch: int, frames: int) -> None:
        b = self.outputs.get(ch)
        if b is not None:
            b.publisher_ref.ack(frames)

    @ray.method(concurrency_group="signals")
    def cancel(self, ch: int, cause: BaseException) -> None:
        b = self.outputs.get(ch)
        if b is not None:
            b.publisher_ref.cancel(cause)
