"""LocalIslandPhase: the island plugin of the local materializer (one thread per island).

It records the island as an ``IslandPlan`` like the Ray materializer does, and replays the plan through
``assemble_island`` as soon as the traversal is walked, in this process: stage logics are created on the
calling thread and cross-island edges become an ``OutputBoundary``/``InputBoundary`` pair talking
through async callbacks (``InProcessTransport``). The island's ``ThreadHost`` starts once the whole
graph is built.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from ...stage.attributes import Attributes
from .boundaries import OutputBoundary
from .island_assembly import create_stage, input_buffer_size, island_fingerprint, stage_name, assemble_island
from .island_plan import AddStage, GraphBuild, IslandRecorder, island_name
from .thread_host import IslandHost, ThreadHost

__all__ = ["LocalIslandPhase", "InProcessTransport", "create_stage", "input_buffer_size", "stage_name", "island_name"]


class _ChannelPublisher:
    """An input boundary's publisher of one in-process channel. The output boundary publishing the
    channel may belong to an island assembled later, so it is looked up when the input boundary
    first talks to it (``subscribe`` in its ``pre_start``; every island exists by then)."""

    __slots__ = ("channel", "target")

    def __init__(self, channel: int):
        self.channel = channel
        self.target = None  # the output boundary's CallbackPublisherRef

    def subscribe(self, subscriber) -> None:
        self.target.subscribe(subscriber)

    def request(self, n: int, seq: int, acked=None) -> None:
        self.target.request(n, seq, acked)

    def ack(self, frames: int) -> None:
        self.target.ack(frames)

    def cancel(self, cause: BaseException) -> None:
        self.target.cancel(cause)


class InProcessTransport:
    """Channels between the islands of one local graph: the peers are the boundaries' async callbacks.

    ``channel_buffer``: what a channel's input boundary asks for ahead once its first elements arrived and are not
    large (``element_size.is_large_element``: 64 KiB or more), unless a stage or graph around its consumer sets
    ``Attributes.input_buffer`` or the materializer was given ``input_buffer``; until then, and for large elements,
    the stages' default (16, Pekko's). Every request and every frame is a hand-over between two threads (a wake-up
    of the other island's loop, tens of microseconds), so with 16 a channel of small elements was a ping-pong of
    16-element frames: ~260k ints/s across one boundary, ~14 M/s with 4096 (the Ray materializer asks for up to
    65536 for the same reason, and bounds large elements by their bytes in the object store)."""

    max_frame = 1 << 16
    window = 16
    channel_buffer = 4096

    def __init__(self):
        self._channels: Dict[int, _ChannelPublisher] = {}

    def _channel(self, channel: int) -> _ChannelPublisher:
        ch = self._channels.get(channel)
        if ch is None:
            ch = self._channels[channel] = _ChannelPublisher(channel)
        return ch

    def publisher(self, island: int, channel: int) -> _ChannelPublisher:
        return self._channel(channel)

    def on_output(self, channel: int, boundary: OutputBoundary) -> None:
        self._channel(channel).target = boundary.publisher_ref


class LocalIslandPhase(IslandRecorder):
    """One island of a local graph. With ``host`` given (sub-materialization), the island's
    interpreter joins that host instead of getting a thread of its own."""

    def __init__(self, build: GraphBuild, attributes: Attributes, index: int, transport: InProcessTransport,
                 host: Optional[IslandHost] = None):
        super().__init__(build, attributes, index)
        self.transport = transport
        if host is None:
            host = ThreadHost(self.name, event_limit=build.settings.event_limit, clock=build.materializer.clock)
        self.host = host
        self.host_interpreter = None
        self.materialized: List[Any] = []
        self.assembled = None
        self._modules: List[Any] = []

    def on_island_ready(self) -> None:
        if not self.is_empty:
            plan = self.finish_plan()
            restore = self.build.restore.get(self.index) if self.build.restore else None
            if restore is not None and restore.fingerprint != island_fingerprint(plan):
                return  # the materializer names the difference (check_restorable) once every island is known
            self._modules = [step.module for step in plan.steps if isinstance(step, AddStage)]
            island = assemble_island(plan, self.transport, self.host, self.build.materializer, self.build.settings,
                                     restore=restore)
            self.assembled = island
            self.host_interpreter = island.interpreter
            self.materialized = island.materialized
            if self.host.interpreter is None:
                self.host.interpreter = island.interpreter

    def stage_logics(self):
        """``(module, logic)`` of every stage of the island, in plan order."""
        keys = self.assembled.keys
        by_key = {keys[id(lg)]: lg for lg in self.assembled.interpreter.logics if id(lg) in keys}
        return [(m, by_key[i]) for i, m in enumerate(self._modules)]


def materialized_values(phases: List[LocalIslandPhase]) -> Dict[Any, Any]:
    """The stages' materialized values by their ``PendingValue`` keys, for ``mat_values.resolve``."""
    return {(p.index, i): v for p in phases for i, v in enumerate(p.materialized)}
