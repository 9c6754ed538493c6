"""A synchronous cut-and-restore driver for one stage's checkpoint state (no threads, no materializer).

``run_cut(make_stage, feeds, cut)`` runs the stage between probes on the bare interpreter
(``tests/core/interpreter_kit.py``), stops at a quiescent moment (as the runtime's cut: between events,
no emit in progress), saves the logic's state (pickled and unpickled, as a checkpoint would), builds
a fresh logic from the same blueprint, restores the state and runs the rest of the input. Elements
pushed into the stage but not grabbed are re-pushed first, as the runtime re-emits in-flight elements.
The result is compared with the same run without a cut.
"""
from __future__ import annotations

import pickle
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

import cloudpickle

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "core"))

from interpreter_kit import Kit, create_logic  # noqa: E402

from atoll.stage.checkpointing import NO_STATE, checkpoint_refusal  # noqa: E402


def round_trip_state(state: Any) -> Any:
    """The state as a restore sees it: through pickle (cloudpickle for closures), as storage does."""
    try:
        data = pickle.dumps(state, protocol=5)
    except Exception:  # noqa: BLE001 - closures and lambdas
        data = cloudpickle.dumps(state)
    return pickle.loads(data)


class Run:
    """One stage between an upstream probe per inlet and a downstream probe per outlet."""

    def __init__(self, stage, state: Any = None, restore: bool = False):
        self.kit = Kit(record_sources=True)
        self.logic, self.mat = create_logic(stage)
        assert checkpoint_refusal(self.logic, stage) is None, checkpoint_refusal(self.logic, stage)
        if restore:
            self.logic.restore_from_snapshot(state)
        self.ups = [self.kit.add(self.kit.upstream(f"up{i}")) for i, _ in enumerate(stage.shape.inlets)]
        self.kit.add(self.logic)
        self.downs = [self.kit.add(self.kit.downstream(f"down{i}")) for i, _ in enumerate(stage.shape.outlets)]
        for up, in_ in zip(self.ups, stage.shape.inlets):
            self.kit.connect(up.out, in_)
        for out, down in zip(stage.shape.outlets, self.downs):
            self.kit.connect(out, down.in_)
        self.kit.init()
        self.kit.run()
        self.fed: List[int] = [0] * len(self.ups)

    def outputs(self, i: int = 0) -> list:
        return [e.payload for e in self.kit.log if e.kind == "OnNext" and e.source is self.downs[i]]

    def ends(self, i: int = 0) -> list:
        return [e for e in self.kit.log if e.kind in ("OnComplete", "OnError") and e.source is self.downs[i]]

    def pump(self, feeds: Sequence[list], complete: bool, demand: Optional[Sequence[Optional[int]]] = None,
             order: Optional[Sequence[int]] = None) -> None:
        """Feed ``feeds[i]`` into inlet ``i`` as it pulls (in ``order`` of inlets), pull each outlet up to
        ``demand[i]`` outputs in all (None: unbounded) until nothing moves; complete the inlets at the end."""
        demand = demand or [None] * len(self.downs)
        order = order if order is not None else range(len(self.ups))
        while True:
            moved = False
            for i, down in enumerate(self.downs):
                if not down.closed and not down.pulled and (demand[i] is None or len(self.outputs(i)) < demand[i]):
                    down.request_one()
                    moved = True
            for i in order:
                up = self.ups[i]
                if up.closed:
                    continue
                if self.fed[i] < len(feeds[i]) and up.available:
                    up.on_next(feeds[i][self.fed[i]])
                    self.fed[i] += 1
                    moved = True
                elif complete and self.fed[i] >= len(feeds[i]):
                    up.on_complete()
                    moved = True
            if not moved:
                return

    def in_flight(self) -> Dict[int, Any]:
        """Inlets whose element was pushed but not grabbed (the runtime saves it against the outlet)."""
        return {i: None for i, in_ in enumerate(self.logic._in_ports) if self.logic.is_available(in_)}


def run_whole(make_stage: Callable[[], Any], feeds: Sequence[list], demand=None) -> Run:
    r = Run(make_stage())
    r.pump(feeds, complete=True, demand=demand)
    return r


def run_cut(make_stage: Callable[[], Any], feeds: Sequence[list], cut: Sequence[int],
            demand_before: Optional[Sequence[Optional[int]]] = None, before: Optional[Callable[[Run], None]] = None,
            after: Optional[Callable[[Run], None]] = None):
    """Feed ``feeds[i][:cut[i]]`` (pulling each outlet up to ``demand_before``), cut, restore into a fresh
    logic and feed the rest to the end. Returns ``(first_run, restored_run, state)``."""
    first = Run(make_stage())
    first.pump([f[:c] for f, c in zip(feeds, cut)], complete=False, demand=demand_before)
    if before is not None:
        before(first)
    assert first.logic.ready_for_snapshot()
    state = first.logic.save_to_snapshot()
    if state is NO_STATE:
        pass
    state = round_trip_state(state)
    rest = []
    for i, f in enumerate(feeds):
        k = first.fed[i]
        if first.logic.is_available(first.logic._in_ports[i]):
            k -= 1  # in flight at the cut: the runtime pushes it again
        rest.append(list(f[k:]))
    second = Run(make_stage(), state, restore=True)
    if after is not None:
        after(second)
    second.pump(rest, complete=True)
    return first, second, state


def check_flow(make_stage: Callable[[], Any], elems: list, cut: int, demand_before: Optional[int] = None):
    """The outputs before the cut plus those after the restore equal the uninterrupted run's."""
    whole = run_whole(make_stage, [elems])
    first, second, _ = run_cut(make_stage, [elems], [cut], demand_before=[demand_before])
    assert first.outputs() + second.outputs() == whole.outputs()
    assert [e.kind for e in second.ends()] == [e.kind for e in whole.ends()]
    return whole.outputs()
