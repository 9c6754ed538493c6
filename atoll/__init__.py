"""Atoll: Pekko-Streams-style blueprints executed as fused islands on Ray actors.

Compose immutable blueprints (``Source``, ``Flow``, ``Sink``), then ``run`` them: the graph is cut
into islands at ``.island()`` boundaries, each island runs a fused graph interpreter, and islands
exchange elements over demand-driven channels.
"""
from . import errors
from .dsl import Flow, Keep, RunnableGraph, Sink, Source
from .errors import *  # noqa: F401,F403 - the error classes are part of the public API
from .errors import __dict__ as _errors_dict
from .markers import Done, NotUsed
from .materializer import Materializer, MaterializerSettings, default_materializer, set_default_materializer
from .dsl.bidi_flow import BidiFlow
from .dsl.graph_dsl import GraphBuilder, GraphDSL
from ._impl.ops.buffer import OverflowStrategy
from ._impl.ops.fan_in import (
    Concat,
    Interleave,
    Merge,
    MergeLatest,
    MergePreferred,
    MergePrioritized,
    MergeSorted,
    OrElse,
    Zip,
    ZipLatest,
    ZipLatestWith,
    ZipWith,
)
from ._impl.ops.fan_out import Balance, Broadcast, Partition, Unzip, UnzipWith
from ._impl.ops.kill_switch import KillSwitch, KillSwitches, SharedKillSwitch, UniqueKillSwitch
from ._impl.ops.sources import Cancellable
from ._impl.ops.delay import DelayOverflowStrategy
from ._impl.ops.more_sources import MaybePromise
from ._impl.ops.throttle import ThrottleMode
from ._impl.ops.pool_control import PoolControl
from .dsl.restart import RestartFlow, RestartSettings, RestartSink, RestartSource, RetryFlow
from .checkpoint import CheckpointInfo, CheckpointSettings, RestartPolicy
from .windowing import Aggregate, Late, Session, Sliding, Tumbling, Window, WindowStats
from .materializer.progress import progress
from . import console  # atoll.console.serve(port)
from .materializer import metrics  # atoll.metrics.enable(): per-island Ray metrics
from .stage import (
    Attributes,
    BidiShape,
    ClosedShape,
    FanInShape,
    FanInShapeN,
    FanOutShape,
    FanOutShapeN,
    FlowShape,
    MergePreferredShape,
    Shape,
    GraphStage,
    GraphStageLogic,
    InHandler,
    Inlet,
    OutHandler,
    Outlet,
    SinkShape,
    SourceShape,
    Supervision,
    UniformFanInShape,
    UniformFanOutShape,
    TimerGraphStageLogic,
)

__version__ = "0.1.0"

_error_names = [n for n, v in _errors_dict.items() if isinstance(v, type) and issubclass(v, BaseException)]

__all__ = [
    "progress",
    "Source",
    "Flow",
    "Sink",
    "Keep",
    "RunnableGraph",
    "Materializer",
    "MaterializerSettings",
    "default_materializer",
    "set_default_materializer",
    "Attributes",
    "OverflowStrategy",
    "Supervision",
    "KillSwitches",
    "KillSwitch",
    "UniqueKillSwitch",
    "SharedKillSwitch",
    "Cancellable",
    "ThrottleMode",
    "DelayOverflowStrategy",
    "MaybePromise",
    "RestartSettings",
    "RestartSource",
    "RestartFlow",
    "RestartSink",
    "RetryFlow",
    "PoolControl",
    "CheckpointSettings",
    "RestartPolicy",
    "CheckpointInfo",
    "Aggregate",
    "Window",
    "Late",
    "WindowStats",
    "Tumbling",
    "Sliding",
    "Session",
    "NotUsed",
    "Done",
    "GraphStage",
    "GraphStageLogic",
    "TimerGraphStageLogic",
    "InHandler",
    "OutHandler",
    "Inlet",
    "Outlet",
    "ClosedShape",
    "SourceShape",
    "FlowShape",
    "SinkShape",
    "BidiShape",
    "Shape",
    "FanInShape",
    "FanInShapeN",
    "FanOutShape",
    "FanOutShapeN",
    "UniformFanInShape",
    "UniformFanOutShape",
    "MergePreferredShape",
    "GraphDSL",
    "GraphBuilder",
    "BidiFlow",
    "Broadcast",
    "Balance",
    "Partition",
    "Unzip",
    "UnzipWith",
    "Merge",
    "MergePreferred",
    "MergePrioritized",
    "MergeSorted",
    "MergeLatest",
    "Zip",
    "ZipWith",
    "ZipLatest",
    "ZipLatestWith",
    "Concat",
    "Interleave",
    "OrElse",
    "errors",
] + _error_names
