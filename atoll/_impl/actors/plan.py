"""The driver-side island plugin for Ray: records each island as an ``IslandPlan`` for its actor.

Stages of a Ray island are created in its actor, not on the driver, so ``RecordingPhase`` only writes
down what the materializer asks of it (the shared ``IslandRecorder``); the actor replays the plan with
``assemble_island``, the function the local materializer uses too. A stage's materialized value is
``PendingValue((island, stage index))`` until the actor reports it.
"""
from __future__ import annotations

from ..islands.island_plan import GraphBuild, IslandPlan, IslandRecorder
from ...stage.attributes import AsyncBoundary, Attributes

__all__ = ["RecordingPhase", "IslandPlan"]


class RecordingPhase(IslandRecorder):
    """One island of a Ray graph; ``options`` are its actor options from ``.island(**options)``."""

    def __init__(self, build: GraphBuild, attributes: Attributes, index: int):
        super().__init__(build, attributes, index)
        boundary = attributes.get(AsyncBoundary) if index > 0 else None
        self.options = dict(boundary.options) if boundary is not None else {}
