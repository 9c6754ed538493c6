"""PhaseIsland: the plugin interface that turns one island's atoms into something executable.

The phased materializer only decides *which* island a port belongs to and which local slot it has;
everything inside an island is delegated to its phase: creating the stages, wiring local slots, and
producing/consuming the publishers that connect islands.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Tuple


class PhaseIsland(ABC):
    """One island under construction."""

    name: str

    @abstractmethod
    def materialize_atomic(self, module, attributes) -> Tuple[Any, Any]:
        """Create the stage for ``module``; return ``(stage handle, materialized value)``."""

    @abstractmethod
    def assign_port(self, port, slot: int, handle) -> None:
        """Wire ``port`` of the stage ``handle`` to island-local ``slot``."""

    @abstractmethod
    def create_publisher(self, out, handle) -> Any:
        """``out`` of ``handle`` leaves this island: return a publisher another island can take."""

    @abstractmethod
    def take_publisher(self, slot: int, publisher, attributes) -> None:
        """Feed island-local ``slot`` from ``publisher`` (created by another island)."""

    @abstractmethod
    def on_island_ready(self) -> None:
        """Every atom and wire of the island is known: finish building it."""
