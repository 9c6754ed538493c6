"""IslandSnapshot: what one island saves at a checkpoint cut, and how it is turned into bytes.

``stages`` maps a stage key (its position in the island plan) to what its logic's ``save_to_snapshot``
returned; ``in_flight`` lists the elements that sat in in-island connections at the cut, each against the
upstream stage and outlet that pushed it (re-pushed from there on restore); ``ended`` the stages that had finished
(``StageEnd``: they stay finished after a restore); ``fingerprint`` is the island's
stage list, compared on restore so that a checkpoint is never restored into a different blueprint.
Serialization is pickle (protocol 5), with cloudpickle for what plain pickle refuses (lambdas in state).
"""
from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ..errors import CheckpointError


@dataclass
class InFlight:
    """Elements waiting in one connection at the cut: pushed by ``stage``'s outlet number ``outlet``
    (``timestamps`` parallel to ``elements`` in event-time graphs, else None). ``signals``: the control signals
    (watermarks, idle markers) that waited among them, as ``(how many of the elements come before it, signal)``
    in their order; None when there were none (and in snapshots written before signals were recorded)."""

    stage: Any
    outlet: int
    elements: list
    timestamps: Optional[list] = None
    signals: Optional[list] = None


@dataclass
class StageEnd:
    """How a stage that had finished at the cut closed its ports itself: ``outlets`` maps an outlet's number to
    ``("completed", None)`` or ``("failed", exception)``, ``inlets`` an inlet's number to the cause it was cancelled
    with. A port in neither was closed by the stage at its other end. A restore does not start such a stage again
    (it stays finished) and closes these ports again the same way, so that the stages around it see what they saw
    before the cut and nothing the finished stage did runs twice (a ``fold`` emitting its result, a ``recover``
    its fallback, a failed branch coming back to life)."""

    outlets: Dict[int, Tuple[str, Optional[BaseException]]] = field(default_factory=dict)
    inlets: Dict[int, BaseException] = field(default_factory=dict)


@dataclass
class IslandSnapshot:
    """``ended``: the stages that had finished at the cut, by stage key (``StageEnd``); snapshots written before
    it existed have no such attribute (read with ``ended_stages``)."""

    island: int
    name: str
    checkpoint_id: int
    fingerprint: List[Tuple[str, str]]
    stages: Dict[Any, Any] = field(default_factory=dict)
    in_flight: List[InFlight] = field(default_factory=list)
    finished: bool = False
    attempt: int = 0
    ended: Dict[Any, StageEnd] = field(default_factory=dict)


def in_flight_signals(f: InFlight) -> list:
    """The signals recorded among ``f``'s elements (none in a snapshot written before they were recorded)."""
    return getattr(f, "signals", None) or []


def ended_stages(snapshot: IslandSnapshot) -> Dict[Any, StageEnd]:
    """The snapshot's finished stages (none for a snapshot written before they were recorded)."""
    return getattr(snapshot, "ended", None) or {}


def dumps(snapshot: IslandSnapshot, describe=None) -> bytes:
    """Bytes of ``snapshot``; ``CheckpointError`` names the stage whose state cannot be pickled
    (``describe(key)`` gives its name)."""
    try:
        return pickle.dumps(snapshot, protocol=5)
    except Exception:  # noqa: BLE001 - retry with cloudpickle, then find the culprit
        pass
    import cloudpickle

    try:
        return cloudpickle.dumps(snapshot, protocol=5)
    except Exception as e:  # noqa: BLE001
        for key, state in snapshot.stages.items():
            try:
                cloudpickle.dumps(state)
            except Exception as e2:  # noqa: BLE001
                who = describe(key) if describe is not None else key
                raise CheckpointError(f"island {snapshot.name}: the state of stage {who} cannot be pickled "
                                      f"({type(state).__name__}: {e2})") from e2
        raise CheckpointError(f"island {snapshot.name}: its snapshot cannot be pickled: {e}") from e


def loads(data: bytes) -> IslandSnapshot:
    snapshot = pickle.loads(data)
    if not isinstance(snapshot, IslandSnapshot):
        raise CheckpointError(f"not an island snapshot: {type(snapshot).__name__}")
    return snapshot
