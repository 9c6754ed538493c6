"""Typed messages between the driver and the island actors (all picklable, immutable).

* ``poll`` events, actor -> driver: a future among the island's materialized values completed
  (``FutureCompleted``/``FutureFailed``), or the island ended (``IslandEnded``);
* results of ``call_handle``, actor -> driver: the call returned (``Returned``), raised (``Raised``),
  returned the handle itself (``ReturnedSelf``), or the island already ended and the call must go to the
  handle's detached copy (``Detached``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Union


# ---------------------------------------------------------------------------------------------- poll events
@dataclass(frozen=True, slots=True)
class FutureCompleted:
    """The exported future ``fid`` completed with ``value``."""

    fid: int
    value: Any


@dataclass(frozen=True, slots=True)
class FutureFailed:
    """The exported future ``fid`` failed with ``error`` (made portable)."""

    fid: int
    error: BaseException


@dataclass(frozen=True, slots=True)
class IslandEnded:
    """Every stage of the island stopped: the host's final ``state``, its ``error`` (portable, or None)
    and the final copies of the exported handles that offer one, by handle id; ``failure``: the first failure
    that travelled through its stages (portable, or None when they all ended normally)."""

    state: str
    error: Optional[BaseException]
    copies: Dict[int, Any]
    failure: Optional[BaseException] = None


@dataclass(frozen=True, slots=True)
class CheckpointAcked:
    """The island cut checkpoint ``checkpoint_id`` and wrote its blob: ``entry`` is its manifest entry."""

    checkpoint_id: int
    entry: Dict[str, Any]


@dataclass(frozen=True, slots=True)
class CheckpointDeclined:
    """The island could not take its part of checkpoint ``checkpoint_id`` (``reason``, portable)."""

    checkpoint_id: int
    reason: BaseException


@dataclass(frozen=True, slots=True)
class CheckpointRequested:
    """A stage of the island wants a checkpoint soon; ``final``: at the end of its input (a sink whose stream ended
    waits for its final commit), taken without waiting for ``min_pause``."""

    final: bool = False


@dataclass(frozen=True, slots=True)
class FinalSnapshot:
    """The island ended cleanly: ``data`` is its final snapshot (answers every later checkpoint); sent
    right before ``IslandEnded``."""

    data: bytes


PollEvent = Union[FutureCompleted, FutureFailed, IslandEnded, CheckpointAcked, CheckpointDeclined, CheckpointRequested,
                  FinalSnapshot]


# ---------------------------------------------------------------------------------------------- handle calls
@dataclass(frozen=True, slots=True)
class Returned:
    """The call returned ``value``."""

    value: Any


@dataclass(frozen=True, slots=True)
class Raised:
    """The call raised ``error`` (made portable)."""

    error: BaseException


@dataclass(frozen=True, slots=True)
class ReturnedSelf:
    """The call returned the handle's object itself (the proxy returns itself)."""


@dataclass(frozen=True, slots=True)
class Detached:
    """The island ended: the call must go to the handle's detached copy."""


CallResult = Union[Returned, Raised, ReturnedSelf, Detached]
