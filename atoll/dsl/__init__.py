"""The user-facing DSL: Source, Flow, Sink, RunnableGraph, Keep, GraphDSL and BidiFlow."""
from .bidi_flow import BidiFlow
from .flow import Flow
from .graph_dsl import GraphBlueprint, GraphDSL
from .keep import Keep
from .runnable_graph import RunnableGraph
from .sink import Sink
from .source import Source

__all__ = ["Source", "Flow", "Sink", "RunnableGraph", "Keep", "GraphDSL", "GraphBlueprint", "BidiFlow"]
