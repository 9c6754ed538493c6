"""The user-facing DSL: Source, Flow, Sink, RunnableGraph and Keep."""
from .flow import Flow
from .keep import Keep
from .runnable_graph import RunnableGraph
from .sink import Sink
from .source import Source

__all__ = ["Source", "Flow", "Sink", "RunnableGraph", "Keep"]
