"""LocalIslandPhase: the island plugin of the local materializer (one thread per island).

Stages are created right away on the calling thread (their materialized values are real objects),
wired into an ``IslandBuilder``; cross-island edges become an ``OutputBoundary``/``InputBoundary``
pair talking through async callbacks. The island's ``ThreadHost`` starts once the whole graph is built.
"""
from __future__ import annotations

from typing import Any, Tuple

from ..materializer.phase import PhaseIsland
from ..stage.attributes import AsyncBoundary, Attributes, InputBuffer, Name
from .boundaries import InputBoundary, OutputBoundary
from .passes import prepare_island
from .island_builder import IslandBuilder
from .thread_host import ThreadHost


def island_name(graph_name: str, attributes: Attributes, index: int) -> str:
    boundary = attributes.get(AsyncBoundary)
    if boundary is not None and "name" in boundary.options:
        return boundary.options["name"]
    return f"{graph_name}-island-{index}"


def stage_name(module, attributes: Attributes) -> str:
    n = attributes.get(Name)
    return n.value if n is not None else getattr(module, "name", type(module).__name__)


def create_stage(module, attributes: Attributes) -> Tuple[Any, Any]:
    """Create a stage's logic and materialized value, labelled with its effective attributes."""
    logic, mat = module.create_logic_and_materialized_value(attributes)
    logic.attributes = attributes
    logic.stage_name = stage_name(module, attributes)
    logic._module = module
    return logic, mat


def input_buffer_size(consumer, default_attributes: Attributes) -> int:
    attrs = consumer.attributes if consumer is not None else default_attributes
    ib = attrs.get(InputBuffer) or default_attributes.get(InputBuffer)
    return ib.max


class LocalIslandPhase(PhaseIsland):
    """One island of a local graph. With ``host`` given (sub-materialization), the island's
    interpreter joins that host instead of getting a thread of its own."""

    def __init__(self, graph, attributes: Attributes, index: int, host=None):
        self.graph = graph
        self.attributes = attributes
        self.name = island_name(graph.name, attributes, index)
        self.builder = IslandBuilder(self.name)
        self.host = host if host is not None else ThreadHost(self.name, event_limit=graph.settings.event_limit, clock=graph.materializer.clock)

    def materialize_atomic(self, module, attributes):
        logic, mat = create_stage(module, attributes)
        self.builder.add_logic(logic)
        return logic, mat

    def assign_port(self, port, slot, logic) -> None:
        self.builder.assign_port(port, slot, logic)

    def create_publisher(self, out, logic):
        boundary = OutputBoundary(f"{logic.stage_name}.{out.name}>")
        boundary.attributes = logic.attributes
        self.builder.add_output_boundary(out, logic, boundary)
        return boundary.publisher_ref

    def take_publisher(self, slot, publisher, attributes) -> None:
        consumer = self.builder.consumer_at(slot)
        size = input_buffer_size(consumer, self.graph.top_attributes)
        boundary = InputBoundary(publisher, size, f">{consumer.stage_name if consumer else self.name}")
        self.builder.add_input_boundary(slot, boundary)

    @property
    def is_empty(self) -> bool:
        return not self.builder.logics

    def on_island_ready(self) -> None:
        if not self.is_empty:
            prepare_island(self.builder, self.graph.settings)
            self.host_interpreter = self.builder.build(self.host, self.graph.materializer)
            if self.host.interpreter is None:
                self.host.interpreter = self.host_interpreter
