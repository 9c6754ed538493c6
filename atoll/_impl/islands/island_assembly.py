"""assemble_island: the one way an island is built from its ``IslandPlan``, for both materializers.

The local materializer replays each plan in this process as soon as the traversal is walked; a Ray
island actor replays the plan the driver sent it. Either way the same code creates the stage logics,
wires them, adds the channel boundaries (input buffers sized from the consuming stage's attributes),
runs the island passes (``passes.prepare_island``) and builds the interpreter. What differs is only
the *transport*: how an input boundary reaches the publisher of its channel, and the frame size and
window of output boundaries.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Protocol, Tuple

from ...stage.attributes import Attributes, InputBuffer, Name
from .boundaries import InputBoundary, OutputBoundary
from .interpreter import GraphInterpreter
from .island_builder import IslandBuilder
from ...stage.signal_alignment import FanInAlignment
from .island_plan import AddStage, AssignPort, IslandPlan, PublishOutput, TakeInput
from .passes import prepare_island


class IslandTransport(Protocol):
    """How the boundaries of an island reach the other islands of its graph."""

    #: most elements per frame an output boundary sends
    max_frame: int
    #: frames an output boundary keeps unconfirmed over a windowed transport
    window: int
    #: object-store bytes a channel's elements passed by reference may hold (0: no such budget; a transport without
    #: the attribute has none)
    store_budget: int

    def publisher(self, island: int, channel: int) -> Any:
        """The publisher ref an input boundary subscribes to for ``channel`` of island ``island``."""

    def on_output(self, channel: int, boundary: OutputBoundary) -> None:
        """``boundary`` publishes ``channel`` (called while the island is assembled)."""


@dataclass(slots=True)
class AssembledIsland:
    """An island ready to run: its interpreter, its boundaries by channel, and the materialized
    values of its stages (in ``AddStage`` order)."""

    interpreter: GraphInterpreter
    outputs: Dict[int, OutputBoundary]
    inputs: Dict[int, InputBoundary]
    materialized: List[Any]
    #: checkpoints: ``id(logic)`` -> stage key (the plan position; ``("out"|"in", channel)`` for boundaries)
    keys: Dict[int, Any]
    #: what was restored into the island and waits to be re-pushed after ``init`` (``checkpointer.replay_in_flight``)
    replays: List[Any]


def island_fingerprint(plan: IslandPlan) -> List[Tuple[str, str]]:
    """The island's stages as (class, name) pairs, in plan order: a checkpoint restores only into the same list."""
    out = []
    for step in plan.steps:
        if isinstance(step, AddStage):
            out.append((type(step.module).__qualname__, stage_name(step.module, step.attributes)))
    return out


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
    """The input buffer of the stage fed by an input boundary (the materializer's default without one)."""
    attrs = consumer.attributes if consumer is not None else default_attributes
    ib = attrs.get(InputBuffer) or default_attributes.get(InputBuffer)
    return ib.max


def channel_growth(consumer, channel_buffer: int) -> int:
    """What an input boundary's buffer may grow to (``InputBoundary(grow_to=...)``): a transport's
    ``channel_buffer`` where no stage or graph around the consumer sets ``Attributes.input_buffer`` itself, i.e.
    where the buffer is only the default every stage falls back on; 0 (no growth) elsewhere or without one."""
    if not channel_buffer or consumer is None:
        return channel_buffer
    attrs = consumer.attributes
    ib = attrs.get(InputBuffer)
    return channel_buffer if ib is None or ib is attrs.get_first(InputBuffer) else 0


def assemble_island(plan: IslandPlan, transport: IslandTransport, host, materializer, settings,
                    restore: Any = None) -> AssembledIsland:
    """Replay ``plan`` into an interpreter that runs on ``host`` (whose stages see ``materializer``);
    ``restore``: an ``IslandSnapshot`` whose states the new logics take before they start."""
    builder = IslandBuilder(plan.name)
    top = settings.top_attributes()
    logics: List[Any] = []
    modules: List[Any] = []
    materialized: List[Any] = []
    outputs: Dict[int, OutputBoundary] = {}
    inputs: Dict[int, InputBoundary] = {}
    for step in plan.steps:
        match step:
            case AddStage(module=module, attributes=attributes):
                logic, mat = create_stage(module, attributes)
                builder.add_logic(logic)
                logics.append(logic)
                modules.append(module)
                materialized.append(mat)
            case AssignPort(stage=i, is_inlet=is_inlet, port_id=port_id, slot=slot):
                shape = modules[i].shape
                port = shape.inlets[port_id] if is_inlet else shape.outlets[port_id]
                builder.assign_port(port, slot, logics[i])
            case PublishOutput(stage=i, port_id=port_id, channel=ch):
                logic = logics[i]
                out = modules[i].shape.outlets[port_id]
                boundary = OutputBoundary(
                    f"{logic.stage_name}.{out.name}>", max_frame=transport.max_frame, window=transport.window,
                    store_budget=getattr(transport, "store_budget", 0),
                )
                boundary.attributes = logic.attributes
                builder.add_output_boundary(out, logic, boundary)
                outputs[ch] = boundary
                transport.on_output(ch, boundary)
            case TakeInput(slot=slot, island=island, channel=ch):
                consumer = builder.consumer_at(slot)
                size = input_buffer_size(consumer, top)
                channel_buffer = 0 if settings.input_buffer_given else getattr(transport, "channel_buffer", 0)
                publisher = transport.publisher(island, ch)
                boundary = InputBoundary(publisher, size, f">{consumer.stage_name if consumer else plan.name}",
                                         store_budget=getattr(transport, "store_budget", 0),
                                         grow_to=channel_growth(consumer, channel_buffer))
                builder.add_input_boundary(slot, boundary)
                inputs[ch] = boundary
            case _:
                raise TypeError(f"island {plan.name}: unknown plan step {step!r}")
    for i, ports in plan.feedback.items():
        logics[i]._alignment = FanInAlignment(logics[i], feedback=ports)
    keys: Dict[int, Any] = {id(logic): i for i, logic in enumerate(logics)}
    keys.update((id(b), ("out", ch)) for ch, b in outputs.items())
    keys.update((id(b), ("in", ch)) for ch, b in inputs.items())
    prepare_island(builder, settings, plan.event_time)
    replays: List[Any] = []
    if restore is not None:
        from .checkpointer import restore_island

        by_key = {key: logic for logic in builder.logics if (key := keys.get(id(logic))) is not None}
        replays = restore_island(restore, by_key, plan.name)
    interpreter = builder.build(host, materializer)
    if restore is not None:
        from .checkpointer import close_ended

        interpreter.restored_ends = close_ended  # the stages restored finished close their ports again
    return AssembledIsland(interpreter, outputs, inputs, materialized, keys, replays)
