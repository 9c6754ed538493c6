"""GraphStage: the blueprint of a custom operator (Pekko's ``GraphStage``/``GraphStageWithMaterializedValue``).

A stage declares its ``shape`` and creates a fresh ``GraphStageLogic`` (and optionally a materialized
value) for every materialization. Stages are immutable blueprints: never keep per-run state on them.
Use ``Source.from_graph``/``Flow.from_graph``/``Sink.from_graph`` (or ``via``/``to``) to put one in a
stream.

Turning a stage into a traversal builder is the materializer's business, a layer up: its builders
install the function that does it (``install_builder_factory``) when they are imported, which
``import atoll`` always does, so this package never imports the materializer.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

from ..markers import NotUsed
from .attributes import Attributes
from .logic import GraphStageLogic
from .shapes import Shape

#: ``stage -> a fresh traversal builder for it``; installed by ``atoll.materializer.linear_builder``.
_builder_factory: Optional[Callable[["GraphStage"], Any]] = None


def install_builder_factory(factory: Callable[["GraphStage"], Any]) -> None:
    """Set how ``GraphStage.traversal_builder`` builds (called once by the materializer's builders)."""
    global _builder_factory
    _builder_factory = factory


class GraphStage:
    """Subclass and implement ``create_logic(attributes)`` (or
    ``create_logic_and_materialized_value`` for a stage with a materialized value)."""

    shape: Shape
    #: Attributes the stage carries by default (typically its name).
    initial_attributes: Attributes = Attributes.none
    #: The stage assigns or reads event timestamps (``with_timestamps``, windows, ``push(..., ts=)``):
    #: a graph holding one carries a timestamp beside every element, in every island.
    event_time: bool = False
    #: The stage's logic keeps no state a checkpoint would need (see ``GraphStageLogic.stateless``).
    stateless: bool = False

    def create_logic(self, attributes: Attributes) -> GraphStageLogic:
        raise TypeError(f"{type(self).__name__} must implement create_logic or create_logic_and_materialized_value")

    def create_logic_and_materialized_value(self, attributes: Attributes) -> Tuple[GraphStageLogic, Any]:
        return self.create_logic(attributes), NotUsed

    @property
    def traversal_builder(self):
        """A fresh builder for this stage alone (linear when it has at most one port of each kind)."""
        factory = _builder_factory
        if factory is None:
            raise RuntimeError("no traversal builders are installed: import atoll (or atoll.materializer.linear_builder)")
        return factory(self)

    @property
    def name(self) -> str:
        return self.initial_attributes.name_or_default(type(self).__name__)

    def __repr__(self) -> str:
        return self.name


#: Pekko's name for a stage with a materialized value; here the same class.
GraphStageWithMaterializedValue = GraphStage
