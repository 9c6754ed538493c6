"""The driver-side island plugin for Ray: records each island's stages and local wiring as a plan.

Stages of a Ray island are created in its actor, not on the driver, so ``RecordingPhase`` only writes
down what the materializer asks of it (``materialize_atomic``, ``assign_port``, publishers taken and
given) in order; the actor replays the plan into the same ``IslandBuilder`` the local materializer
uses. A stage's materialized value is ``PendingValue((island, stage index))`` until the actor reports it.
"""
from __future__ import annotations

from typing import Any, List, Tuple

from ..materializer.mat_values import PendingValue
from ..materializer.phase import PhaseIsland
from ..stage.attributes import AsyncBoundary, Attributes
from ..stage.ports import Inlet
from ..islands.local_phase import island_name


class IslandPlan:
    """What an island actor needs to build its island (pickled to the actor)."""

    __slots__ = ("name", "stages", "ops")

    def __init__(self, name: str, stages: List[Tuple[Any, Attributes]], ops: List[tuple]):
        self.name = name
        self.stages = stages
        self.ops = ops


class RecordingPhase(PhaseIsland):
    def __init__(self, build, attributes: Attributes, index: int):
        self.build = build
        self.index = index
        self.attributes = attributes
        self.name = island_name(build.name, attributes, index)
        boundary = attributes.get(AsyncBoundary) if index > 0 else None
        self.options = dict(boundary.options) if boundary is not None else {}
        self.stages: List[Tuple[Any, Attributes]] = []
        self.ops: List[tuple] = []

    def materialize_atomic(self, module, attributes):
        i = len(self.stages)
        self.stages.append((module, attributes))
        return i, PendingValue((self.index, i))

    def assign_port(self, port, slot: int, i: int) -> None:
        self.ops.append(("assign", i, isinstance(port, Inlet), port.id, slot))

    def create_publisher(self, out, i: int):
        ch = self.build.next_channel()
        self.ops.append(("publish", i, out.id, ch))
        return (self.index, ch)

    def take_publisher(self, slot: int, publisher, attributes) -> None:
        island, ch = publisher
        self.ops.append(("take", slot, island, ch))

    def on_island_ready(self) -> None:
        pass

    def plan(self) -> IslandPlan:
        return IslandPlan(self.name, self.stages, self.ops)
