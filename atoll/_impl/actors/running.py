"""RayRunningGraph: the driver's handle on a graph whose islands are Ray actors.

Each island actor is watched by one outstanding ``poll`` call at a time (completed through the
ObjectRef's future callback, so no driver thread is needed). Poll events complete the driver-side
futures of the island's materialized values and report the island's end, after which its actor is
killed - or, when the whole graph ended cleanly and the materializer keeps warm actors, reset and given
back to its ``WarmActorPool`` for the next graph. A poll that fails because the actor died (crash,
``ray.kill``, node loss) becomes an
``IslandDiedError`` naming the island: it fails that island's futures and cancels every other island
with it, so the whole graph ends and no actor is left behind.
"""
from __future__ import annotations

import logging
import threading
from concurrent.futures import Future
from typing import Any, Callable, Dict, List, Optional

import ray

from ...errors import AbruptTerminationError, IslandDiedError
from ...materializer.running_graph import RunningGraphBase
from ..islands.graph_restarts import RecoveringGraph
from ..ops.base import complete_promise, fail_promise, new_promise
from .exports import ExportedFuture, ExportedHandle
from .messages import (
    CheckpointAcked,
    CheckpointDeclined,
    CheckpointRequested,
    FinalSnapshot,
    FutureCompleted,
    FutureFailed,
    IslandEnded,
)

log = logging.getLogger("atoll.ray")


class _MonitorThread:
    """One daemon thread per driver process that handles the islands' poll results."""

    def __init__(self):
        import queue

        self.q: "queue.SimpleQueue" = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name="atoll-ray-monitor", daemon=True)
        self.thread.start()

    def put(self, item) -> None:
        self.q.put(item)

    def _run(self) -> None:
        while True:
            fn, *args = self.q.get()
            try:
                fn(*args)
            except Exception as e:  # noqa: BLE001 - keep monitoring the other graphs
                log.error("atoll monitor: %r", e, exc_info=e)
            del fn, args   # (not kept while waiting for the next item)


_monitor_thread: Optional[_MonitorThread] = None
_monitor_lock = threading.Lock()


def _monitor() -> _MonitorThread:
    global _monitor_thread
    with _monitor_lock:
        if _monitor_thread is None:
            _monitor_thread = _MonitorThread()
        return _monitor_thread


class _Island:
    __slots__ = ("index", "name", "actor", "ended", "state", "futures", "handles", "error", "options", "unavailable",
                 "holds", "kill_pending", "final", "stale", "deferred", "gen", "pool_key", "clean",
                 "disposed")

    def __init__(self, index: int, name: str, actor, options: dict, gen: int = 0, pool_key=None):
        self.index = index
        self.name = name
        self.actor = actor
        self.options = options
        self.gen = gen  # the attempt's wire base: the generation the actor's control calls carry
        self.pool_key = pool_key  # the warm pool's key of the actor's options (None: never pooled)
        self.clean = False  # ended completed, without error: the actor may be reused
        self.disposed = False  # the actor was killed or given back to the warm pool
        self.ended = False
        self.state = "running"
        self.futures: Dict[int, Future] = {}
        self.handles: Dict[int, Any] = {}
        self.error: Optional[BaseException] = None
        self.unavailable = 0
        self.holds = 0  # IslandHolds not yet released: the actor stays until they are
        self.kill_pending = False
        self.final: Optional[bytes] = None  # checkpoints: the island's final snapshot, once it ended cleanly
        self.stale = False  # recovery replaced this attempt's actor: its events are ignored
        self.deferred: list = []  # (fid, error) of futures failed while a stage failure may still be recovered


class RayIslandPort:
    """How the checkpoint coordinator reaches an island actor (its calls carry the attempt's generation)."""

    __slots__ = ("actor", "gen")

    STATUS_TIMEOUT = 5.0

    def __init__(self, island: _Island):
        self.actor = island.actor
        self.gen = island.gen

    def inject(self, checkpoint_id: int) -> None:
        self.actor.inject_checkpoint.remote(checkpoint_id, self.gen)

    def abort(self, checkpoint_id: int) -> None:
        self.actor.abort_checkpoint.remote(checkpoint_id, self.gen)

    def complete(self, checkpoint_id: int) -> None:
        self.actor.checkpoint_complete.remote(checkpoint_id, self.gen)

    def status(self) -> dict:
        return ray.get(self.actor.checkpoint_status.remote(), timeout=self.STATUS_TIMEOUT)


class RayRunningGraph(RecoveringGraph, RunningGraphBase):
    """A Ray graph: each island is an ``_Island`` record of its actor, watched through ``poll``."""

    POLL_SECONDS = 10.0

    def __init__(self, name: str, islands: List[_Island], on_end: Optional[Callable[["RayRunningGraph"], None]] = None,
                 pool=None):
        super().__init__(name, islands, on_end)
        self._recovery = None  # a GraphRecovery when the graph checkpoints and may restart
        self._recovering = False
        self._pool = pool  # the materializer's WarmActorPool (None: actors are killed when their island ends)
        self._reuse: Optional[bool] = None  # decided when the graph finished: give its actors back?
        self._cleanups.append(self._return_actors)

    # ------------------------------------------------------------------ setup
    def register_handle(self, island_index: int, hid: int, proxy) -> None:
        self._islands_by_index()[island_index].handles[hid] = proxy

    def future_for(self, island_index: int) -> Callable[[ExportedFuture], Future]:
        island = self._islands_by_index()[island_index]

        def make(x: ExportedFuture) -> Future:
            f = new_promise()
            island.futures[x.fid] = f
            return f

        return make

    def _islands_by_index(self) -> Dict[int, _Island]:
        return {i.index: i for i in self._islands}

    def add_cleanup(self, fn: Callable[[], None]) -> None:
        self._cleanups.append(fn)

    def start_monitoring(self) -> None:
        for island in self._islands:
            self._poll(island)

    # ------------------------------------------------------------------ monitoring
    def _poll(self, island: _Island) -> None:
        try:
            ref = island.actor.poll.remote(self.POLL_SECONDS)
        except Exception as e:  # noqa: BLE001 - actor handle unusable: same as death
            self._island_died(island, e)
            return
        # Ray runs future callbacks on its own delivery thread, where Ray calls may deadlock:
        # hand the result to the monitor thread, which does the work.
        ref.future().add_done_callback(lambda f: _monitor().put((self._on_poll, island, f)))

    #: an actor that answers "temporarily unavailable" this many times in a row is taken as dead
    UNAVAILABLE_RETRIES = 6

    def _on_poll(self, island: _Island, f) -> None:
        if island.ended or island.stale:
            return
        try:
            events = f.result()
        except ray.exceptions.ActorUnavailableError as e:
            island.unavailable += 1
            if island.unavailable >= self.UNAVAILABLE_RETRIES:
                self._island_died(island, e)
            else:
                threading.Timer(0.5, lambda: _monitor().put((self._poll, island))).start()
            return
        except Exception as e:  # noqa: BLE001 - RayActorError & friends: the actor is gone
            self._island_died(island, e)
            return
        island.unavailable = 0
        for i, ev in enumerate(events):
            match ev:
                case FutureCompleted(fid=fid, value=value):
                    # the value is the caller's from now on: the poll's result (which the poll's future keeps)
                    # and this frame (in which the graph may finish) let go of it
                    events[i] = ev = None
                    fut = island.futures.get(fid)
                    if self._pool is not None:
                        self._pool.returning(id(self))  # the graph is likely ending: its actors come back soon
                    if fut is not None:
                        complete_promise(fut, value)
                    del value, fut
                case FutureFailed(fid=fid, error=error):
                    if self._recovery is not None and self._recovery.accepts(True):
                        island.deferred.append((fid, error))  # a restart may still complete it
                        continue
                    fut = island.futures.get(fid)
                    if fut is not None:
                        fail_promise(fut, error)
                case CheckpointAcked(checkpoint_id=n, entry=entry):
                    if self._coordinator is not None:
                        self._coordinator.report("ack", island.index, n, entry)
                case CheckpointDeclined(checkpoint_id=n, reason=reason):
                    if self._coordinator is not None:
                        self._coordinator.report("decline", island.index, n, reason)
                case CheckpointRequested(final=final):
                    if self._coordinator is not None:
                        self._coordinator.report("request", island.index, 0, final)
                case FinalSnapshot(data=data):
                    island.final = data
                case IslandEnded(state=state, error=error, copies=copies, failure=failure):
                    cause = error if error is not None else failure
                    if cause is not None and self._try_recover(island, cause, True):
                        return
                    for fid, err in island.deferred:
                        fut = island.futures.get(fid)
                        if fut is not None:
                            fail_promise(fut, err)
                    if self._coordinator is not None:
                        self._coordinator.island_ended(island.index, island.final, island.final is None)
                    self._island_ended(island, state, error, copies, failure is None)
                    return
                case _:
                    log.error("island %s: unknown poll event %r", island.name, ev)
        self._poll(island)

    def _island_ended(self, island: _Island, state: str, error: Optional[BaseException], copies: dict,
                      no_failure: bool = False) -> None:
        """``island`` ended (``no_failure``: no stream failure passed through it either): its handles detach,
        its unfinished futures fail, and its actor is disposed of (``_dispose``)."""
        with self._lock:
            if island.ended:
                return
            island.ended = True
            island.state = state
            island.error = error
        for hid, proxy in island.handles.items():
            proxy._detached(copies.get(hid))
        for fut in island.futures.values():
            fail_promise(fut, AbruptTerminationError(f"island {island.name!r} ended before this value completed"))
        island.clean = self._pool is not None and no_failure and state == "completed" and error is None
        if island.clean and island.pool_key is not None:
            self._pool.returning(id(self))  # its other islands are likely ending too (``WarmActorPool.take``)
        with self._lock:
            held = island.holds > 0
            island.kill_pending = held
        if not held:
            self._dispose(island)
        self._maybe_finish()

    def _dispose(self, island: _Island) -> None:
        """The ended island's actor is no longer needed: kill it, or give it back to the warm pool once the
        whole graph ended cleanly (until then a clean island's actor waits, idle)."""
        poolable = island.clean and island.pool_key is not None  # a named actor is killed at once, freeing its name
        with self._lock:
            if island.disposed or (poolable and self._reuse is None):
                return
            island.disposed = True
            reuse = poolable and self._reuse
        if reuse:
            self._pool.give(island.pool_key, island.actor)
        else:
            try:
                ray.kill(island.actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass

    def _return_actors(self) -> None:
        """The graph ended (a clean-up): its actors go back to the warm pool only when every island completed
        cleanly, the graph was neither cancelled nor restarted; otherwise the waiting ones are killed."""
        if self._pool is None:
            return
        with self._lock:
            self._reuse = not self._cancelled and self.restarts == 0 and all(i.clean for i in self._islands)
            free = [i for i in self._islands if i.ended and i.holds == 0]
        for island in free:
            self._dispose(island)

    def _try_recover(self, record: _Island, cause: BaseException, stage_failure: bool) -> bool:
        took_over = super()._try_recover(record, cause, stage_failure)
        if took_over and self._pool is not None:
            self._pool.returned(id(self))  # restarting, not ending: its next attempt must not wait for itself
        return took_over

    def _finish(self) -> None:
        """The graph ended: the clean-ups give back or kill its actors (islands and ``map_pool``'s); then a
        ``WarmActorPool.take`` waiting for them looks again."""
        try:
            super()._finish()
        finally:
            if self._pool is not None:
                self._pool.returned(id(self))

    def hold(self, index: int) -> Callable[[], None]:
        """Keep island ``index``'s actor after its island ended until the returned release is called (the
        driver still needs objects that actor owns)."""
        island = self._islands_by_index()[index]
        with self._lock:
            island.holds += 1

        def release() -> None:
            with self._lock:
                island.holds -= 1
                kill = island.holds == 0 and island.kill_pending
                if kill:
                    island.kill_pending = False
            if kill:
                self._dispose(island)

        return release

    def _island_died(self, island: _Island, cause: BaseException) -> None:
        if island.ended or island.stale:
            return
        first_line = str(cause).strip().splitlines()[0] if str(cause).strip() else ""
        err = IslandDiedError(island.name, f"{type(cause).__name__}: {first_line}".rstrip(": "))
        if self._try_recover(island, err, False):
            return
        with self._lock:
            if island.ended:
                return
            island.ended = True
            island.state = "died"
        island.error = err
        if self._coordinator is not None:
            self._coordinator.island_ended(island.index, None, True)
        for proxy in island.handles.values():
            proxy._detached(None)
        log.warning("island %s died: %r", island.name, cause)
        for fut in island.futures.values():
            fail_promise(fut, err)
        for other in self._islands:
            if not other.ended:
                try:
                    other.actor.cancel_island.remote(err, other.gen)
                except Exception:  # noqa: BLE001
                    pass
        try:
            ray.kill(island.actor, no_restart=True)
        except Exception:  # noqa: BLE001
            pass
        self._maybe_finish()

    def _install_attempt(self, records: List[_Island], results: List[list], attempt: int, restored: Any) -> None:
        """Recovery built the next attempt's actors: carry the driver's futures and handles over to them, resume
        the checkpoints and run."""
        old = self._islands_by_index()
        rebinds = []
        for record, exported in zip(records, results):
            before = old[record.index]
            record.futures = before.futures  # same plan, same export order: the same future and handle ids
            record.handles = before.handles
            for value in exported:
                if type(value) is ExportedHandle and value.hid in record.handles:
                    rebinds.append((record.handles[value.hid], value))
        with self._lock:
            self._islands = records
            self._recovering = False
        restored_id = getattr(restored, "id", restored)
        self._coordinator.resume([(r.index, r.name, RayIslandPort(r)) for r in records], attempt, restored_id)
        for proxy, value in rebinds:
            proxy._rebind(value)
        try:
            ray.get([r.actor.run.remote() for r in records])
        except Exception as e:  # noqa: BLE001 - an actor lost right away: its poll reports the death
            log.warning("graph %s: starting attempt %d: %r", self.name, attempt, e)
        self.start_monitoring()
        if self._cancelled:
            for r in records:
                self._cancel_island(r, self._cancel_cause)

    def _stop_failed_islands(self, islands: list, err: BaseException) -> None:
        for r in islands:
            try:
                ray.kill(r.actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass

    @staticmethod
    def _detach_handle(proxy) -> None:
        proxy._detached(None)

    # ------------------------------------------------------------------ operator console
    def _cancel_island(self, island: _Island, cause: BaseException) -> None:
        if not island.ended:
            try:
                island.actor.cancel_island.remote(cause, island.gen)
            except Exception:  # noqa: BLE001
                pass

    def islands(self) -> List[dict]:
        """Actor name/id, node id, pid and state of every island, and how often the graph restarted (every
        island restarts with it: ``restarts``, ``attempt``)."""
        out = []
        live = [i for i in self._islands if not i.ended]
        infos = {}
        if live:
            refs = [i.actor.info.remote() for i in live]
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=5.0)
            for island, ref in zip(live, refs):
                if ref in ready:
                    try:
                        infos[island.index] = ray.get(ref)
                    except Exception:  # noqa: BLE001
                        pass
        for island in self._islands:
            d = {"name": island.name, "state": island.state if island.ended else "running", "options": island.options,
                 "restarts": self.restarts, "attempt": self.attempt}
            d.update(infos.get(island.index, {}))
            if island.ended:
                d["state"] = island.state
            out.append(d)
        return out

    def actor_handles(self) -> List[Any]:
        return [i.actor for i in self._islands]
