"""IslandPlan: what one island is made of, written down while the materializer walks the traversal.

Both materializers record every island the same way: ``IslandRecorder`` is the ``PhaseIsland`` plugin
that turns the phased materializer's calls (``materialize_atomic``, ``assign_port``, publishers given
and taken) into typed plan steps, in order. The plan is then replayed by
``island_assembly.assemble_island``: right away in this process by the local materializer, or in the
island's actor by the Ray materializer (plans pickle). A stage's materialized value is
``PendingValue((island index, stage index))`` until the assembly reports it.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from ...materializer.mat_values import PendingValue
from ...materializer.phase import PhaseIsland
from ...stage.attributes import AsyncBoundary, Attributes
from ...stage.ports import Inlet

_graph_names = itertools.count(1)


# ---------------------------------------------------------------------------------------------- steps
@dataclass(frozen=True, slots=True)
class AddStage:
    """Create the stage of ``module`` with its effective ``attributes``; the n-th ``AddStage`` of a
    plan is stage ``n`` in the other steps."""

    module: Any
    attributes: Attributes


@dataclass(frozen=True, slots=True)
class AssignPort:
    """Wire port ``port_id`` (an inlet if ``is_inlet``, else an outlet) of stage ``stage`` to the
    island-local ``slot``."""

    stage: int
    is_inlet: bool
    port_id: int
    slot: int


@dataclass(frozen=True, slots=True)
class PublishOutput:
    """Outlet ``port_id`` of stage ``stage`` leaves the island: an output boundary publishes it as
    ``channel``."""

    stage: int
    port_id: int
    channel: int


@dataclass(frozen=True, slots=True)
class TakeInput:
    """The inlet at ``slot`` is fed by ``channel``, published by island ``island``, through an input
    boundary."""

    slot: int
    island: int
    channel: int


PlanStep = Union[AddStage, AssignPort, PublishOutput, TakeInput]


@dataclass(frozen=True, slots=True)
class ChannelId:
    """What a producing island's ``create_publisher`` hands to the consuming island's ``take_publisher``."""

    island: int
    channel: int


# ---------------------------------------------------------------------------------------------- the plan
@dataclass(slots=True)
class IslandPlan:
    """Island number ``index`` of a graph: its name, its attributes and its steps in recording order
    (the order matters: an input boundary's buffer size comes from the consumer wired at its slot so far)."""

    name: str
    index: int
    attributes: Attributes
    steps: List[PlanStep] = field(default_factory=list)
    stages: List[AddStage] = field(default_factory=list)
    #: the graph holds an event-time stage: every logic of every island carries timestamps
    event_time: bool = False
    #: stage index -> the inlet port ids its watermark valve leaves out (feedback inputs of a cycle)
    feedback: Dict[int, Tuple[int, ...]] = field(default_factory=dict)

    def add_stage(self, step: AddStage) -> int:
        """Append ``step``; return the stage's index."""
        self.steps.append(step)
        self.stages.append(step)
        return len(self.stages) - 1

    @property
    def is_empty(self) -> bool:
        return not self.stages


def island_name(graph_name: str, attributes: Attributes, index: int) -> str:
    """The island's ``.island(name=...)`` if given, else ``<graph>-island-<index>``."""
    boundary = attributes.get(AsyncBoundary)
    if boundary is not None and "name" in boundary.options:
        return boundary.options["name"]
    return f"{graph_name}-island-{index}"


class GraphBuild:
    """What the island phases of one materialization share: the materializer, its settings, the
    graph's name and its channel numbers."""

    def __init__(self, materializer: Any, name: str = None):
        self.materializer = materializer
        self.settings = materializer.settings
        self.top_attributes: Attributes = materializer.settings.top_attributes()
        self.name = name or f"graph-{next(_graph_names)}"
        self._channels: Iterator[int] = itertools.count()
        #: some stage of the graph has ``event_time``: set while the traversal is walked, read once
        #: every island is recorded (``IslandRecorder.finish_plan``)
        self.event_time = False
        self.plans: List[IslandPlan] = []  # every island's plan, in recording order
        self._feedback: Optional[Dict[int, Dict[int, Tuple[int, ...]]]] = None
        #: restoring from a checkpoint: the ``IslandSnapshot`` of each island by index (None: a fresh start)
        self.restore: Optional[Dict[int, Any]] = None

    def feedback(self, island: int) -> Dict[int, Tuple[int, ...]]:
        """The feedback inlets of island ``island``'s stages (``atoll._impl.islands.feedback``), found
        once over the whole graph; only graphs with event time need them."""
        if self._feedback is None:
            from .feedback import feedback_inlets

            self._feedback = feedback_inlets(self.plans)
        return self._feedback.get(island, {})

    def next_channel(self) -> int:
        return next(self._channels)


class IslandRecorder(PhaseIsland):
    """Records one island of a graph as an ``IslandPlan`` (see the module docstring). Subclasses
    decide what happens to the plan in ``on_island_ready``."""

    def __init__(self, build: GraphBuild, attributes: Attributes, index: int):
        self.build = build
        self.index = index
        self.attributes = attributes
        self.name = island_name(build.name, attributes, index)
        self.plan = IslandPlan(self.name, index, attributes)
        build.plans.append(self.plan)

    def materialize_atomic(self, module, attributes: Attributes) -> Tuple[int, PendingValue]:
        if getattr(module, "event_time", False):
            self.build.event_time = True
        i = self.plan.add_stage(AddStage(module, attributes))
        return i, PendingValue((self.index, i))

    def assign_port(self, port, slot: int, stage: int) -> None:
        self.plan.steps.append(AssignPort(stage, isinstance(port, Inlet), port.id, slot))

    def create_publisher(self, out, stage: int) -> ChannelId:
        ch = self.build.next_channel()
        self.plan.steps.append(PublishOutput(stage, out.id, ch))
        return ChannelId(self.index, ch)

    def take_publisher(self, slot: int, publisher: ChannelId, attributes) -> None:
        self.plan.steps.append(TakeInput(slot, publisher.island, publisher.channel))

    @property
    def is_empty(self) -> bool:
        return self.plan.is_empty

    def finish_plan(self) -> IslandPlan:
        """The plan, completed with what only the whole graph knows (call once every island is recorded)."""
        self.plan.event_time = self.build.event_time
        if self.plan.event_time:
            self.plan.feedback = self.build.feedback(self.index)
        return self.plan

    def on_island_ready(self) -> None:
        pass
