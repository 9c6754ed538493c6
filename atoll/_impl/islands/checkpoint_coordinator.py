"""CheckpointCoordinator: triggers a graph's checkpoints, collects the islands' parts, makes them durable.

One per running graph with checkpointing on, on the driver. Everything it decides runs on its own thread
(one writer, no lock juggling between deciders - the races Jet fixed in hazelcast-jet#2824/#2503 cannot
happen): islands report through ``report`` and ``island_ended`` from their threads, users ask through
``checkpoint_now``; each of those only puts an event on the coordinator's queue.

A checkpoint ``n`` is complete once every island answered it - with its cut, or with its final snapshot if
it ended normally before cutting ``n`` - and each island's blob was written. Then the manifest is written
(last: it is the completion marker), every running island is told (``port.complete(n)``: phase 2 of its
sinks' two-phase commits), old checkpoints beyond ``retained`` are deleted, and waiters are released. An
island may ask for a checkpoint (``"request"``): one is then taken, and again until one issued after the
request completes - at once for a *final* request (a sink whose stream ended waits for the checkpoint that
commits its last epoch), else once ``min_pause`` has passed since the last checkpoint ended (a sink pacing its
commits, as the periodic trigger is paced; ``checkpoint_now`` is never held back).
A checkpoint that is declined by an island, or not complete within ``timeout``, is aborted: the islands
release their inputs and no manifest is ever written for it. Ids are never reused: they continue
after the highest id found under the graph's directory.
"""
from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from queue import Empty, SimpleQueue
from typing import Any, Callable, Dict, List, Optional

from ...checkpoint.settings import CheckpointInfo, CheckpointSettings
from ...checkpoint.storage import CheckpointStorage
from ...errors import CheckpointError, CheckpointTimeoutError
from .inbox_wait import get_within

log = logging.getLogger("atoll.checkpoint")


def blob_name(island: int, attempt: int) -> str:
    """The file of island ``island``'s part of a checkpoint (the attempt in the name: a zombie of an older
    attempt can never overwrite a newer one's blob)."""
    return f"island-{island:03d}-a{attempt}.bin"


class LocalIslandPort:
    """How the coordinator reaches an island running on a thread of this process."""

    __slots__ = ("host", "checkpointer")

    def __init__(self, host, checkpointer):
        self.host, self.checkpointer = host, checkpointer

    def inject(self, checkpoint_id: int) -> None:
        self.host.post(self.checkpointer.inject, checkpoint_id)

    def abort(self, checkpoint_id: int) -> None:
        self.host.post(self.checkpointer.abort, checkpoint_id)

    def complete(self, checkpoint_id: int) -> None:
        self.host.post(self.checkpointer.complete, checkpoint_id)

    def status(self) -> dict:
        return self.checkpointer.status()


class _Island:
    __slots__ = ("index", "name", "port", "final", "failed")

    def __init__(self, index, name, port):
        self.index, self.name, self.port = index, name, port
        self.final: Optional[bytes] = None  # its final snapshot, once it ended normally
        self.failed = False


class _Pending:
    __slots__ = ("id", "started", "entries", "waiters", "deadline")

    def __init__(self, checkpoint_id: int, started: float, deadline: float):
        self.id = checkpoint_id
        self.started = started
        self.deadline = deadline
        self.entries: Dict[int, Dict[str, Any]] = {}
        self.waiters: List[Future] = []


class CheckpointCoordinator:
    """Checkpoints of one graph. ``islands``: ``(index, name, port)`` per island, the port being how the
    island is reached (``inject``, ``abort``, ``status``: ``LocalIslandPort`` or the Ray actor's). An island
    answers with the bytes of its snapshot (written here) or with the manifest entry of a blob it wrote.
    ``clock``: where the interval, the pause and the timeouts are read (monotonic seconds; tests pass their own
    and call ``sync`` after moving it)."""

    def __init__(self, settings: CheckpointSettings, storage: CheckpointStorage, graph: str, islands: List[tuple],
                 restored_from: Optional[int] = None, first_id: int = 1, attempt: int = 0,
                 clock: Callable[[], float] = time.monotonic):
        self.settings = settings
        self._clock = clock
        self.storage = storage
        self.graph = graph
        self.attempt = attempt
        self.islands: Dict[int, _Island] = {i: _Island(i, name, port) for i, name, port in islands}
        self.restored_from = restored_from
        self._next_id = first_id
        self._events: SimpleQueue = SimpleQueue()
        self._pending: Optional[_Pending] = None
        self._completed: List[CheckpointInfo] = []
        self._completed_lock = threading.Lock()
        self._failures = 0
        #: when the last checkpoint completed or was aborted (None: none yet), for ``min_pause``
        self._last_end: Optional[float] = None
        self._stopped = False  # ``stop`` was called: triggers fail at once (set under ``_stop_lock``)
        self._stop_lock = threading.Lock()
        self._graph_failed = False
        self._suspended = False  # recovery is replacing the islands
        #: an island asked for a checkpoint: the lowest id that answers it (None: no request outstanding)
        self._want_from: Optional[int] = None
        #: one of the outstanding requests is final (taken at once, ``min_pause`` or not)
        self._want_final = False
        #: called (on the coordinator's thread) with the error when more than ``tolerable_failures``
        #: checkpoints in a row failed: the materializer fails the graph with it
        self.on_give_up = None
        self._thread = threading.Thread(target=self._run, name=f"atoll-checkpoints-{graph}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    # ------------------------------------------------------------------ from any thread
    def report(self, kind: str, island: int, checkpoint_id: int, payload: Any) -> None:
        """An island's answer: ``"ack"`` with its blob bytes, ``"decline"`` with the reason, or ``"request"``
        (checkpoint id 0) when a stage of the island wants a checkpoint soon (``payload`` true: a final one, taken
        without waiting for ``min_pause``)."""
        self._events.put((kind, island, checkpoint_id, payload))

    def island_ended(self, island: int, final: Optional[bytes], failed: bool) -> None:
        """Island ``island`` stopped: normally (``final`` is its last snapshot) or failed."""
        self._events.put(("ended", island, final, failed))

    def trigger(self) -> Future:
        """Start a checkpoint now (or join the one in progress); the future gets its ``CheckpointInfo``."""
        f: Future = Future()
        f.set_running_or_notify_cancel()
        with self._stop_lock:  # a trigger queued before the stop is answered by it (the checkpoint is aborted)
            if not self._stopped:
                self._events.put(("trigger", f))
                return f
        f.set_exception(CheckpointError(f"graph {self.graph} has ended (or its materializer shut down): no "
                                        "checkpoint can be taken"))
        return f

    def suspend(self, timeout: float = 30.0) -> None:
        """Recovery begins (the islands are being replaced): abort the checkpoint in progress without counting it
        as a failure, and take none until ``resume``. Returns once the coordinator's thread did so."""
        self._post_and_wait(timeout, "suspend")

    def resume(self, islands: List[tuple], attempt: int, restored_from: Optional[int], timeout: float = 30.0) -> None:
        """Recovery started attempt ``attempt`` restored from checkpoint ``restored_from`` (None: from the start):
        ``islands`` are its ``(index, name, port)``; checkpoints continue with the next unused id. Returns once the
        coordinator's thread took it (so ``checkpoint_status`` shows the new attempt when the graph reports it)."""
        self._post_and_wait(timeout, "resume", islands, attempt, restored_from)

    def sync(self, timeout: float = 30.0) -> None:
        """Return once the coordinator's thread has handled every event put before this call and taken the
        checkpoints they (and its clock's time now) call for. Tests use it to look at a decision, not a race."""
        self._post_and_wait(timeout, "sync")

    def _post_and_wait(self, timeout: float, kind: str, *args) -> None:
        """Put event ``(kind, *args, done)`` for the coordinator's thread and wait until it resolves ``done`` (not
        when called from that thread, or once it has stopped)."""
        done: Future = Future()
        self._events.put((kind, *args, done))
        if threading.current_thread() is not self._thread and self._thread.is_alive():
            done.result(timeout)

    def latest(self) -> Optional[CheckpointInfo]:
        """The newest complete checkpoint of this run (None if none completed yet)."""
        with self._completed_lock:
            return self._completed[-1] if self._completed else None

    def stop(self, wait: bool = True) -> None:
        """End the coordinator (the graph ended); a checkpoint still in progress is aborted."""
        with self._stop_lock:
            self._stopped = True
            self._events.put(("stop",))
        if wait and self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(30)

    def release_ports(self) -> None:
        """The graph finished (call after ``stop``): forget how to reach its islands, which hold the ended
        interpreters; ``status()`` reads every island as ended from now on. Kept while the coordinator's thread
        still runs (``stop`` gave up waiting for it)."""
        if self._thread.is_alive():
            return
        for isl in self.islands.values():
            isl.port = None

    def all_clean(self) -> bool:
        """Every island ended normally (call once the graph ended and ``stop`` returned)."""
        return all(isl.final is not None and not isl.failed for isl in self.islands.values())

    def checkpoints(self) -> List[CheckpointInfo]:
        with self._completed_lock:
            return list(self._completed)

    def status(self) -> dict:
        """The checkpoint in progress and what each island waits for (read from the island threads' fields:
        a snapshot of the moment, good enough for diagnosis)."""
        p = self._pending
        islands = {}
        for isl in self.islands.values():
            if isl.final is not None or isl.failed or isl.port is None:
                islands[isl.name] = {"state": "ended"}
            else:
                try:
                    islands[isl.name] = isl.port.status()
                except Exception as e:  # noqa: BLE001 - an island that cannot answer says so
                    islands[isl.name] = {"state": f"no answer: {e!r}"}
        return {
            "in_progress": None if p is None else p.id,
            "answered": [] if p is None else sorted(self.islands[i].name for i in p.entries),
            "islands": islands,
            "completed": len(self._completed),
            "restored_from": self.restored_from,
        }

    # ------------------------------------------------------------------ the coordinator's thread
    def _pause_left(self, now: float) -> float:
        """Seconds until ``min_pause`` has passed since the last checkpoint ended (0: it has, or none ended)."""
        if self._last_end is None:
            return 0.0
        return max(0.0, self._last_end + self.settings.min_pause - now)

    def _request_due_in(self, now: float) -> Optional[float]:
        """Seconds until the outstanding request may be answered (None: none outstanding, or it cannot be now)."""
        if self._want_from is None or self._pending is not None or self._suspended or self._graph_failed:
            return None
        return 0.0 if self._want_final else self._pause_left(now)

    def _run(self) -> None:
        interval = self.settings.interval
        next_trigger = self._clock() + interval if interval else None
        while True:
            now = self._clock()
            timeout = None
            if next_trigger is not None:
                timeout = max(0.0, next_trigger - now)
            if self._pending is not None:
                left = max(0.0, self._pending.deadline - now)
                timeout = left if timeout is None else min(timeout, left)
            due = self._request_due_in(now)
            if due is not None:
                timeout = due if timeout is None else min(timeout, due)
            try:
                event = get_within(self._events, timeout)
            except Empty:
                event = None
            try:
                if event is not None:
                    if event[0] == "stop":
                        self._graph_failed = True  # no give-up callback: the graph has ended
                        self._abort(CheckpointError(f"graph {self.graph} ended before the checkpoint completed"))
                        return
                    self._handle(event)
                now = self._clock()
                if self._pending is not None and now >= self._pending.deadline:
                    self._timeout()
                if next_trigger is not None and now >= next_trigger:
                    if self._pending is None and self._pause_left(now) <= 0:
                        self._trigger(None)
                    next_trigger = now + interval
                due = self._request_due_in(now)
                if due is not None and due <= 0:
                    self._trigger(None)  # a stage asked for one (the last one did not answer it)
            except Exception as e:  # noqa: BLE001 - the coordinator must survive a storage hiccup
                log.error("graph %s: checkpoint coordinator error: %r", self.graph, e, exc_info=e)
                self._abort(e if isinstance(e, CheckpointError) else CheckpointError(repr(e)))
            if event is not None and event[0] == "sync":
                event[1].set_result(None)

    def _handle(self, event: tuple) -> None:
        kind = event[0]
        if kind == "sync":
            return  # answered by the loop, once it acted on the events before it
        if kind == "suspend":
            self._suspended = True
            self._want_from = None  # the next attempt's stages ask again
            self._want_final = False
            p, self._pending = self._pending, None
            if p is not None:
                self._drop(p, CheckpointError(f"graph {self.graph} is recovering: checkpoint {p.id} was abandoned"))
            event[1].set_result(None)
            return
        if kind == "resume":
            _, islands, attempt, restored_from, done = event
            self.islands = {i: _Island(i, name, port) for i, name, port in islands}
            self.attempt = attempt
            self.restored_from = restored_from if restored_from is not None else self.restored_from
            self._suspended = False
            self._graph_failed = False
            self._failures = 0
            done.set_result(None)
            return
        if self._suspended and kind != "trigger":
            return  # a late answer of the replaced attempt
        if kind == "trigger":
            self._trigger(event[1])
        elif kind == "request":
            want = self._next_id if self._pending is None else self._pending.id + 1
            self._want_from = want if self._want_from is None else min(self._want_from, want)
            self._want_final = self._want_final or bool(event[3])
        elif kind == "ack":
            _, island, n, data = event
            p = self._pending
            if p is None or p.id != n or island in p.entries:
                return  # an answer to a checkpoint already aborted
            self._store(p, island, data, finished=False)
        elif kind == "decline":
            _, island, n, reason = event
            p = self._pending
            if p is not None and p.id == n:
                err = CheckpointError(f"island {self.islands[island].name} declined checkpoint {n}: {reason}")
                err.__cause__ = reason if isinstance(reason, BaseException) else None
                self._abort(err)
        elif kind == "ended":
            _, island, final, failed = event
            isl = self.islands[island]
            if failed:
                isl.failed = True
                self._graph_failed = True
                self._abort(CheckpointError(f"island {isl.name} failed: the graph is failing"))
                return
            isl.final = final
            p = self._pending
            if p is not None and island not in p.entries:
                self._store(p, island, final, finished=True)

    def _trigger(self, waiter: Optional[Future]) -> None:
        if self._suspended:
            if waiter is not None:
                waiter.set_exception(CheckpointError(f"graph {self.graph} is recovering: no checkpoint now"))
            return
        if self._pending is not None:
            if waiter is not None:
                self._pending.waiters.append(waiter)
            return
        if self._graph_failed:
            if waiter is not None:
                waiter.set_exception(CheckpointError(f"graph {self.graph} failed: no checkpoint can be taken"))
            return
        n = self._next_id
        self._next_id += 1
        now = self._clock()
        p = self._pending = _Pending(n, time.time(), now + self.settings.timeout)
        if waiter is not None:
            p.waiters.append(waiter)
        for isl in self.islands.values():
            if isl.final is not None:
                self._store(p, isl.index, isl.final, finished=True)
                if self._pending is not p:
                    return
            else:
                isl.port.inject(n)

    def _store(self, p: _Pending, island: int, data: Any, finished: bool) -> None:
        if isinstance(data, dict):
            entry = dict(data)  # the island wrote its blob itself
        else:
            entry = self.storage.write_blob(p.id, blob_name(island, self.attempt), data)
        entry["finished"] = finished
        p.entries[island] = entry
        if len(p.entries) == len(self.islands):
            self._complete(p)

    def _complete(self, p: _Pending) -> None:
        names = {i: isl.name for i, isl in self.islands.items()}
        manifest = {
            "graph": self.graph,
            "checkpoint_id": p.id,
            "attempt": self.attempt,
            "created": time.time(),
            "started": p.started,
            "islands": {str(i): dict(e, name=names[i]) for i, e in sorted(p.entries.items())},
        }
        self.storage.write_manifest(p.id, manifest)
        info = CheckpointInfo.from_manifest(manifest, self.storage.path(p.id), completed=time.time())
        with self._completed_lock:
            self._completed.append(info)
            del self._completed[: -self.settings.retained]
        # phase 2: the islands commit what their cuts of p and of earlier checkpoints prepared (an island that
        # ended has nothing left to commit: a sink completes only once its last epoch is committed)
        for isl in self.islands.values():
            if isl.final is None and not isl.failed:
                try:
                    isl.port.complete(p.id)
                except Exception as e:  # noqa: BLE001 - an island gone meanwhile commits on restore
                    log.warning("graph %s: phase 2 of checkpoint %d at %s: %r", self.graph, p.id, isl.name, e)
        if self._want_from is not None and p.id >= self._want_from:
            self._want_from = None
            self._want_final = False
        self._pending = None
        self._failures = 0
        self._last_end = self._clock()
        try:
            self.storage.prune(self.settings.retained, keep=self.restored_from)
        except Exception as e:  # noqa: BLE001 - a failed clean-up does not undo a durable checkpoint
            log.warning("graph %s: deleting old checkpoints failed: %r", self.graph, e)
        for w in p.waiters:
            w.set_result(info)

    def _abort(self, error: BaseException) -> None:
        p = self._pending
        if p is None:
            return
        self._pending = None
        self._last_end = self._clock()
        for isl in self.islands.values():
            if isl.final is None and not isl.failed:
                try:
                    isl.port.abort(p.id)
                except Exception as e:  # noqa: BLE001 - an island gone meanwhile has nothing to release
                    log.debug("graph %s: abort of checkpoint %d at %s: %r", self.graph, p.id, isl.name, e)
        self._drop(p, error)
        self._failures += 1
        if self._failures > self.settings.tolerable_failures and not self._graph_failed:
            log.error("graph %s: %d checkpoints in a row failed, the last with %r", self.graph, self._failures, error)
            self._graph_failed = True
            if self.on_give_up is not None:
                self.on_give_up(error)

    def _drop(self, p: _Pending, error: BaseException) -> None:
        """Forget checkpoint ``p``: delete what was written of it and fail its waiters with ``error``."""
        try:
            self.storage.delete(p.id)
        except Exception as e:  # noqa: BLE001
            log.warning("graph %s: deleting aborted checkpoint %d failed: %r", self.graph, p.id, e)
        for w in p.waiters:
            w.set_exception(error)

    def _timeout(self) -> None:
        p = self._pending
        waiting = {}
        for i, isl in self.islands.items():
            if i not in p.entries and isl.final is None:
                try:
                    waiting[isl.name] = isl.port.status()
                except Exception as e:  # noqa: BLE001
                    waiting[isl.name] = f"no answer: {e!r}"
        self._abort(CheckpointTimeoutError(
            f"checkpoint {p.id} of graph {self.graph} did not complete within {self.settings.timeout}s; "
            f"islands that have not answered: {waiting}"
        ))
