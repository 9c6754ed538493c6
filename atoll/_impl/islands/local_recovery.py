"""Automatic recovery on ``Materializer.local(checkpoint=...)``: the islands are threads of this process, and the
graph restarts from its last complete checkpoint as a Ray graph does (``graph_restarts.RestartLoop``, the same
policy, back-off and checkpoint choice).

What restarts: an island whose thread died (``atoll.testkit.chaos.kill_island`` posts a fatal error onto the
island's inbox: it leaves the thread's loop past every stage's supervision, and the host tears its stages down
as after a crash of its own), and, with ``RestartPolicy(on_stage_failure=True)``, an island that ended with a
stream failure. The decision is taken on the dying island's thread *before* the failure leaves it, so nothing the
death causes in other islands (failures, a ``recover`` stage's value) reaches the driver: the attempt is stale
from then on, its futures, checkpoint reports and ends are ignored. What does not restart: ``cancel()``, a kill
switch ``abort`` (the veto), a spent budget (``RecoveryFailedError`` caused by the last failure).

A restart: suspend the coordinator, cancel every island thread of the attempt and join it (the fence: no thread of
an old attempt acts after the restore; 10 s at most, then ``RecoveryFailedError``), back off, assemble every island
again from its plan on a new thread with the checkpoint's snapshot (the path ``restore_from`` takes), give each a
checkpointer of the new attempt, rebind the driver's futures and handles (``local_values``; a kill switch command
given meanwhile is re-applied), resume the coordinator and start the threads.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Dict, List, Optional, Union

from ..._futures import complete_promise, fail_promise, new_promise
from ...errors import AbruptTerminationError, IslandDiedError, RecoveryFailedError
from ...materializer.running_graph import RunningGraphBase
from .checkpoint_coordinator import LocalIslandPort
from .checkpoint_setup import island_checkpointer, island_end_hook, replay_hook
from .checkpointer import failure_in
from .graph_restarts import RecoveringGraph, RestartLoop
from .island_assembly import assemble_island
from .local_phase import InProcessTransport
from .local_values import FUTURE, HANDLE, classify, handle_for
from .thread_host import ThreadHost

log = logging.getLogger("atoll.recovery")


class LocalIsland:
    """One island of one attempt of a recovering local graph: its plan, host thread and assembled interpreter, and
    the driver's futures and handles of its materialized values by position (carried from attempt to attempt)."""

    __slots__ = ("index", "name", "plan", "host", "assembled", "kinds", "futures", "handles", "deferred", "stale",
                 "ended", "state", "error")

    def __init__(self, index: int, name: str, plan: Any, host: ThreadHost, assembled: Any):
        self.index = index
        self.name = name
        self.plan = plan
        self.host = host
        self.assembled = assembled
        self.kinds: List[int] = []  # ``local_values.classify`` of each materialized value (decided at attempt 0)
        self.futures: Dict[int, Any] = {}
        self.handles: Dict[int, Any] = {}
        self.deferred: list = []  # (position, error) of futures failed while a stage failure may still restart
        self.stale = False  # a restart replaced this attempt: its events are ignored
        self.ended = False
        self.state = "running"
        self.error: Optional[BaseException] = None


class LocalRecoveringGraph(RecoveringGraph, RunningGraphBase):
    """A local graph that checkpoints and may restart: each island is a ``LocalIsland`` of the current attempt."""

    def __init__(self, name: str, islands: List[LocalIsland], on_end: Optional[Callable[[Any], None]] = None,
                 cleanups: Optional[List[Callable[[], None]]] = None):
        super().__init__(name, islands, on_end, cleanups)
        self._recovery: Optional["LocalGraphRecovery"] = None
        self._recovering = False

    # ------------------------------------------------------------------ attempt 0
    def adopt(self) -> Dict[Any, Any]:
        """The driver's values of attempt 0's materialized values, by ``(island, position)`` for ``resolve``."""
        out = {}
        for r in self._islands:
            for pos, value in enumerate(r.assembled.materialized):
                kind = classify(value)
                r.kinds.append(kind)
                if kind == FUTURE:
                    r.futures[pos] = new_promise()
                    out[(r.index, pos)] = r.futures[pos]
                elif kind == HANDLE:
                    r.handles[pos] = handle_for(value)
                    out[(r.index, pos)] = r.handles[pos]
                else:
                    out[(r.index, pos)] = value
            self._bind(r)
        return out

    def reporter(self, islands: List[LocalIsland]):
        """The checkpoint report function of an attempt's islands: a stale attempt's reports are dropped."""
        by_index = {r.index: r for r in islands}
        coordinator = self._coordinator

        def report(kind, island, n, payload):
            if not by_index[island].stale:
                coordinator.report(kind, island, n, payload)

        return report

    def live(self, islands: List[LocalIsland]) -> Callable[[int], bool]:
        by_index = {r.index: r for r in islands}
        return lambda index: not by_index[index].stale

    def start(self) -> None:
        """Start the current attempt's threads."""
        for r in self._islands:
            r.host.on_done = lambda host, r=r: self._host_done(r)
        for r in self._islands:
            r.host.start()

    def _bind(self, record: LocalIsland) -> None:
        """Forward the outcomes of ``record``'s futures to the driver's promises."""
        materialized = record.assembled.materialized
        for pos in record.futures:
            materialized[pos].add_done_callback(lambda f, record=record, pos=pos: self._future_done(record, pos, f))

    def _future_done(self, record: LocalIsland, pos: int, f) -> None:
        if record.stale:
            return
        exc = f.exception()
        promise = record.futures[pos]
        if exc is None:
            complete_promise(promise, f.result())
            return
        recovery = self._recovery
        with self._lock:
            defer = not record.ended and recovery is not None and recovery.accepts(True)
            if defer:
                record.deferred.append((pos, exc))  # a restart on stage failure may still complete it
        if not defer:
            fail_promise(promise, exc)

    # ------------------------------------------------------------------ island ends and deaths
    def _host_done(self, record: LocalIsland) -> None:
        """``record``'s thread is ending (called on it)."""
        if record.stale:
            return
        host = record.host
        crash = host.error
        if crash is not None:
            cause = crash if isinstance(crash, IslandDiedError) else IslandDiedError(record.name, repr(crash))
            if self._try_recover(record, cause, False):
                return
        else:
            failure = failure_in(host.interpreter) if host.interpreter is not None else None
            if failure is not None and self._try_recover(record, failure, True):
                return
        if self._coordinator is not None:
            island_end_hook(self._coordinator, record)(host)
        with self._lock:
            record.ended = True
            record.state = host.state
            record.error = crash
            deferred, record.deferred = record.deferred, []
        for pos, exc in deferred:
            fail_promise(record.futures[pos], exc)
        for proxy in record.handles.values():
            proxy._detached()
        self._maybe_finish()

    def kill_island(self, island: Union[int, str]) -> None:
        """Make island ``island`` (index or name) of the current attempt die: a fatal error posted to its thread
        ends the thread's loop past every stage's supervision (``atoll.testkit.chaos.kill_island``)."""
        record = _find(self, island)

        def die() -> None:
            err = IslandDiedError(record.name, "its thread was killed")
            if not self._try_recover(record, err, False):
                for other in list(self._islands):  # no restart: the death fails the graph, as on Ray
                    if other is not record and not other.ended:
                        other.host.cancel(err)
            raise err

        record.host.post(die)

    def _install_attempt(self, records: List[LocalIsland], ports: List[tuple], attempt: int, restored: Any) -> None:
        """The next attempt is built: carry the driver's futures and handles over to it, resume the checkpoints
        and start its threads."""
        old = {r.index: r for r in self._islands}
        for r in records:
            before = old[r.index]
            r.kinds, r.futures, r.handles = before.kinds, before.futures, before.handles
        with self._lock:
            self._islands = records
            self._recovering = False
        self._coordinator.resume(ports, attempt, getattr(restored, "id", restored))
        self._recovery.attempt = attempt  # after the resume: checkpoint_status shows the attempt graph.attempt names
        for r in records:
            self._bind(r)
            materialized = r.assembled.materialized
            for pos, proxy in r.handles.items():
                proxy._rebind(materialized[pos])
        self.start()
        if self._cancelled:
            for r in records:
                r.host.cancel(self._cancel_cause)

    def _stop_failed_islands(self, islands: list, err: BaseException) -> None:
        stop_threads(islands, err, LocalGraphRecovery.FENCE_SECONDS)

    @staticmethod
    def _detach_handle(proxy) -> None:
        proxy._detached()

    def _release(self) -> None:
        for r in self._islands:
            r.host.release()
            r.assembled = None
        super()._release()

    # ------------------------------------------------------------------ operator console
    def _cancel_island(self, island: LocalIsland, cause: BaseException) -> None:
        if not island.ended:
            island.host.cancel(cause)

    def islands(self) -> List[dict]:
        out = []
        for r in list(self._islands):
            d = r.host.info()
            if r.ended:
                d["state"] = r.state
            d["restarts"], d["attempt"] = self.restarts, self.attempt
            out.append(d)
        return out


def _find(graph: LocalRecoveringGraph, island: Union[int, str]) -> LocalIsland:
    for r in list(graph._islands):
        if (isinstance(island, int) and r.index == island) or r.name == island:
            return r
    names = [r.name for r in graph._islands]
    raise LookupError(f"kill_island: graph {graph.name} has no island {island!r} (its islands: {names})")


def stop_threads(islands: List[LocalIsland], cause: BaseException, seconds: float) -> bool:
    """Cancel the islands' threads with ``cause`` and join them; False if one still ran after ``seconds``."""
    for r in islands:
        r.host.cancel(cause)
    deadline = time.monotonic() + seconds
    return all(r.host.join(max(0.0, deadline - time.monotonic())) for r in islands)


class LocalGraphRecovery(RestartLoop):
    """Restarts of a ``LocalRecoveringGraph``: the fence stops and joins the attempt's threads; an attempt is every
    island assembled again from its plan on a new thread, restored from the checkpoint's snapshot."""

    #: the longest wait for the threads of a failed attempt to end
    FENCE_SECONDS = 10.0

    def __init__(self, running: LocalRecoveringGraph, materializer, settings, checkpoint, back: Any,
                 restored_from: Optional[int], restore_storage: Any):
        super().__init__(running, checkpoint.restart, restored_from, restore_storage)
        self.plans = [(r.index, r.name, r.plan) for r in running._islands]
        self.materializer = materializer
        self.settings = settings
        self.checkpoint = checkpoint
        self.back = back  # the channels that close cycles between islands

    def _fence(self, old: list) -> None:
        cause = AbruptTerminationError(f"graph {self.running.name}: attempt {self.attempt} is being replaced")
        if not stop_threads(old, cause, self.FENCE_SECONDS):
            raise RecoveryFailedError(f"graph {self.running.name}: an island thread of attempt {self.attempt} was "
                                      f"still running {self.FENCE_SECONDS:.0f}s after it was cancelled")

    def _launch(self, attempt: int, snapshots) -> tuple:
        materializer, settings = self.materializer, self.settings
        transport = InProcessTransport()
        records = []
        for index, name, plan in self.plans:
            host = ThreadHost(name, event_limit=settings.event_limit, clock=materializer.clock)
            restore = snapshots.get(index) if snapshots else None
            assembled = assemble_island(plan, transport, host, materializer, settings, restore=restore)
            host.interpreter = assembled.interpreter
            host.before_init = replay_hook(assembled)
            records.append(LocalIsland(index, name, plan, host, assembled))
        report = self.running.reporter(records)
        ports = []
        for r in records:
            cp = island_checkpointer(self.checkpoint, r.host, r.assembled, r.index, r.name, r.plan, report, self.back,
                                     attempt)
            ports.append((r.index, r.name, LocalIslandPort(r.host, cp)))
        return records, ports
