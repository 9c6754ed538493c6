"""What a custom operator is written with: GraphStage, GraphStageLogic, handlers, ports, shapes, attributes."""
from .attributes import Attributes
from .checkpointing import NO_STATE
from .graph_stage import GraphStage, GraphStageWithMaterializedValue
from .handlers import InHandler, InOutHandler, OutHandler
from .logic import AsyncCallback, GraphStageLogic
from .ports import Inlet, Outlet
from .shapes import (
    BidiShape,
    ClosedShape,
    FanInShape,
    FanOutShape,
    FanInShapeN,
    FanOutShapeN,
    FlowShape,
    MergePreferredShape,
    Shape,
    SinkShape,
    SourceShape,
    UniformFanInShape,
    UniformFanOutShape,
)
from .supervision import Supervision
from .timers import TimerGraphStageLogic

__all__ = [
    "Attributes",
    "GraphStage",
    "GraphStageWithMaterializedValue",
    "GraphStageLogic",
    "TimerGraphStageLogic",
    "AsyncCallback",
    "InHandler",
    "OutHandler",
    "InOutHandler",
    "Inlet",
    "Outlet",
    "Shape",
    "ClosedShape",
    "SourceShape",
    "SinkShape",
    "FlowShape",
    "BidiShape",
    "FanInShape",
    "FanInShapeN",
    "FanOutShapeN",
    "MergePreferredShape",
    "FanOutShape",
    "UniformFanInShape",
    "UniformFanOutShape",
    "Supervision",
    "NO_STATE",
]
