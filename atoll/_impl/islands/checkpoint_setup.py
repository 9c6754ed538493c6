"""Setting a graph up for checkpoints, for both materializers: reading the checkpoint to restore, checking that
the graph can be checkpointed and restored (before anything runs), and, for local graphs, wiring each island's
checkpointer to the graph's coordinator (islands are threads of this process)."""
from __future__ import annotations

import uuid
from typing import Any, Dict, List, Optional, Tuple

from ...checkpoint.settings import CheckpointSettings
from ...checkpoint.snapshot import dumps, loads
from ...checkpoint.storage import CheckpointStorage, locate
from ...errors import CheckpointMismatchError, CheckpointNotSupportedError
from ...stage.checkpointing import checkpoint_refusal
from .checkpoint_coordinator import CheckpointCoordinator, LocalIslandPort
from .checkpointer import IslandCheckpointer, ended_cleanly, replay_in_flight
from .feedback import back_edge_channels
from .island_assembly import create_stage, island_fingerprint
from .island_plan import AddStage


def graph_name(name: Optional[str], checkpointing: bool) -> Optional[str]:
    """The graph's name: the user's, else (with checkpoints, which are stored under it) a unique one."""
    if name is not None:
        if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
            raise ValueError(f"run: name must be a non-empty string without '/' that does not start with '.', got {name!r}")
        return name
    return f"graph-{uuid.uuid4().hex[:8]}" if checkpointing else None


def load_restore(restore_from: Any) -> Tuple[CheckpointStorage, int, Dict[int, Any]]:
    """The checkpoint ``restore_from`` names: its storage, id and island snapshots (verified) by island index."""
    storage, cid = locate(restore_from)
    manifest = storage.read_manifest(cid)
    snapshots = {int(i): loads(storage.read_blob(cid, entry)) for i, entry in manifest["islands"].items()}
    return storage, cid, snapshots


def check_restorable(phases: List[Any], snapshots: Dict[int, Any], where: str) -> None:
    """The graph being built is the one the checkpoint was taken from: same islands, same stages."""
    have = {p.index: p for p in phases if not p.is_empty}
    if set(have) != set(snapshots):
        raise CheckpointMismatchError(
            f"{where} holds islands {sorted(s.name for s in snapshots.values())}, the graph has "
            f"{sorted(p.name for p in have.values())}"
        )
    for index, phase in sorted(have.items()):
        mine, theirs = island_fingerprint(phase.plan), snapshots[index].fingerprint
        if mine != theirs:
            k = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
            a = mine[k] if k < len(mine) else "nothing"
            b = theirs[k] if k < len(theirs) else "nothing"
            raise CheckpointMismatchError(
                f"{where}: island {phase.name} differs at stage #{k}: the graph has {a}, the checkpoint {b}"
            )


def check_checkpointable(islands: List[Tuple[str, List[Tuple[Any, Any]]]]) -> None:
    """Refuse, before anything runs, a graph that checkpoints could not restore exactly. ``islands``: per island
    its name and the ``(module, logic)`` of its stages."""
    refused = []
    for name, stages in islands:
        for step_module, logic in stages:
            why = checkpoint_refusal(logic, step_module)
            if why is not None:
                refused.append(f"{logic.stage_name} ({type(logic).__name__}) in island {name}: {why}")
    if refused:
        raise CheckpointNotSupportedError("checkpoints cannot restore these stages:\n  " + "\n  ".join(refused))


def plan_stage_logics(plan: Any) -> List[Tuple[Any, Any]]:
    """``(module, logic)`` of the plan's stages, the logics created here only to be checked (Ray islands create
    their logics in their actors; a logic's constructor starts nothing)."""
    return [(step.module, create_stage(step.module, step.attributes)[0]) for step in plan.steps
            if isinstance(step, AddStage)]


def open_storage(settings: CheckpointSettings, name: str, restored_from: Optional[int]) -> Tuple[CheckpointStorage, int]:
    """The graph's checkpoint storage (checked writable) and its first checkpoint id: after every id found there
    and after the one restored from (ids are never reused)."""
    storage = CheckpointStorage(settings.storage, name)
    storage.check_writable()
    first = max(storage.checkpoint_ids(complete_only=False), default=0) + 1
    if restored_from is not None:
        first = max(first, restored_from + 1)
    return storage, first


def new_coordinator(settings: CheckpointSettings, storage: CheckpointStorage, first_id: int, ports: List[tuple],
                    running: Any, restored_from: Optional[int],
                    restore_storage: Optional[CheckpointStorage]) -> CheckpointCoordinator:
    """The graph's coordinator over ``ports`` (``(index, name, port)`` per island), attached to ``running`` (which
    it cancels when checkpoints keep failing); the caller starts it. The checkpoint restored from is kept by
    pruning only when it lies in the same place."""
    same_place = restore_storage is not None and restore_storage.base == storage.base
    coordinator = CheckpointCoordinator(settings, storage, storage.graph, ports,
                                        restored_from=restored_from if same_place else None, first_id=first_id)
    coordinator.on_give_up = running.cancel
    running.attach_checkpoints(coordinator, settings)
    return coordinator


def island_checkpointer(settings: CheckpointSettings, host: Any, assembled: Any, index: int, name: str, plan: Any,
                        report, back: Any, attempt: int = 0) -> IslandCheckpointer:
    """Give the island on ``host`` (``assembled`` from ``plan``) a checkpointer reporting through ``report``;
    ``back``: the channels that close cycles between islands."""
    cp = IslandCheckpointer(host, assembled.interpreter, index, name, assembled.keys, island_fingerprint(plan), report,
                            attempt=attempt, aligned=settings.guarantee == "exactly_once",
                            logged=settings.alignment == "logged",
                            decline_after_failure=settings.restart.on_stage_failure,
                            feedback=[b for ch, b in assembled.inputs.items() if ch in back])
    host.checkpointer = cp
    return cp


def wire_checkpoints(settings: CheckpointSettings, name: str, phases: List[Any], running: Any,
                     restored_from: Optional[int], restore_storage: Optional[CheckpointStorage],
                     plans: List[Any], live=None) -> CheckpointCoordinator:
    """Give every island of a local graph a checkpointer reporting to a new coordinator (started with the hosts);
    ``plans``: the graph's island plans (for the channels that close cycles between islands); ``live``: with
    recovery, ``live(index)`` says whether island ``index``'s reports still count (a replaced attempt's do not)."""
    storage, first = open_storage(settings, name, restored_from)
    back = back_edge_channels(plans)
    ports = []
    coordinator = None

    def report(kind, island, n, payload):
        if live is None or live(island):
            coordinator.report(kind, island, n, payload)

    for p in phases:
        if p.is_empty:
            continue
        cp = island_checkpointer(settings, p.host, p.assembled, p.index, p.name, p.plan, report, back)
        ports.append((p.index, p.name, LocalIslandPort(p.host, cp)))
    coordinator = new_coordinator(settings, storage, first, ports, running, restored_from, restore_storage)
    return coordinator


def island_end_hook(coordinator: CheckpointCoordinator, phase: Any):
    """What the island's host reports to the coordinator when it stops: its final snapshot, or its failure."""
    def ended(host) -> None:
        if host.state == "completed" and ended_cleanly(phase.assembled.interpreter):
            try:
                final = dumps(host.checkpointer.snapshot(0, finished=True), host.checkpointer._describe)
            except Exception:  # noqa: BLE001 - a final state that cannot be saved: no later checkpoint completes
                coordinator.island_ended(phase.index, None, True)
                return
            coordinator.island_ended(phase.index, final, False)
        else:
            coordinator.island_ended(phase.index, None, True)

    return ended


def replay_hook(island: Any):
    """What an island host runs right before its interpreter's init after a restore: the re-push of what waited in
    connections at the cut (None when nothing did). ``island``: the ``AssembledIsland``."""
    replays = island.replays
    return (lambda: replay_in_flight(replays)) if replays else None
