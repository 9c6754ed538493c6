"""The workers behind ``map_pool``: Ray actors, or local threads when Ray is not initialised.

A worker wraps one instance built by ``factory()`` (once per worker: a model loads once per actor) and
runs calls of 1..b elements on it. Both kinds answer with something the stage's ``Resolver`` resolves
on the island thread (an ``ObjectRef`` or a ``concurrent.futures.Future``), so the stage logic is the
same for both:

* ``start()`` -> readiness: completes when ``factory()`` ran (fails with ``factory``'s own exception);
* ``call(elems, batched, fetch)`` -> ``(status, refs)``: ``status`` completes with the list of results
  (``fetch=True``), or with a list of "result is None" flags while ``refs`` holds one ObjectRef per
  element (``fetch=False``, Ray only: the values stay in the object store);
* ``kill()``: stop it now (``ray.kill(no_restart=True)``; a local thread ends after its current call).

What runs inside a worker (``PoolInstance``, the Ray actor class ``PoolActor``) lives in ``pool_worker``,
which imports nothing of Atoll: the actor class is shipped by value, so a pool actor's worker process does
not import the ``atoll`` package.

**Warm pool actors** (Ray islands, ``Materializer.ray`` with its warm pool). The actors the driver starts for
a graph (``MapPool.prepare_on_driver``) are not always killed at the end: when the island's stage ended
cleanly (completed, or cancelled by downstream), the island ``release()``s them instead of killing them, and
when the graph has ended the driver's ``reset()`` drops their ``factory()`` instance, and each goes into the
materializer's warm pool at once (``WarmActorPool.add_fresh``) with that reset's answer as what ``take`` waits
for; it serves a next graph only if it answered True (else it is taken out and killed): only an actor whose last
island call was the release does (a restarted attempt that adopted it and called it again un-releases it); any other
is killed then. An actor released with calls in flight (downstream cancelled) finishes them first: the release
is the island's last call to it and one caller's calls run in order, so ``take`` hands it out only once nothing
of the old graph is left. The next graph with the same actor options takes it and ``init``s it with its own
``factory``: the worker process is reused, ``factory()`` runs again (a model loads once per actor per graph,
as before). An idle warm actor holds what it asked for: it waits ``WARM_IDLE_S`` (10 s) for the next graph
with its options (less if the materializer's ``warm_idle_timeout`` is shorter), then it is killed; actors
asking for GPUs or custom resources are never kept. Actors the island started itself (scaling, replacements)
are killed as before.

Ray actors are created with ``max_restarts=0, max_task_retries=0``: Ray never replays a call, so the
stage knows exactly which elements an actor death lost. The wrapper's ``__init__`` never raises: it
keeps ``factory``'s exception and ``ready()`` raises it, so the stage sees the original error (an
actor whose constructor raises would only report ``ActorDiedError``).
"""
from __future__ import annotations

import queue
import sys
import threading
from concurrent.futures import Future
from typing import Any, List

from . import pool_worker
from .pool_worker import PoolActor, PoolInstance, factory_name

_remote_class = None


def _ray_actor_class():
    """``ray.remote(PoolActor)``, shipped to the worker by value (``pool_worker``'s docstring says why)."""
    global _remote_class
    if _remote_class is None:
        import ray
        import ray.cloudpickle

        ray.cloudpickle.register_pickle_by_value(pool_worker)
        _remote_class = ray.remote(PoolActor)
    return _remote_class


def ray_active() -> bool:
    """Whether pool workers are Ray actors here: ``ray`` imported and initialised in this process."""
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


class RayWorker:
    """A pool worker that is a Ray actor: a new one, or (``actor``) a warm one taken from the driver's warm
    pool, ``init``ed with ``factory`` now (the ref of that call is its readiness). ``RayWorker.later()`` is
    one whose actor is created afterwards by ``create`` (the driver's pool actors are created once the
    island actors were: ``MapPool.prepare_on_driver``); until then ``actor`` is None, and ``kill`` and
    ``give_back`` do nothing."""

    __slots__ = ("actor", "ready_ref")

    kind = "ray"

    def __init__(self, factory, method: str, options: dict, actor=None):
        self.create(factory, method, options, actor)

    @classmethod
    def later(cls) -> "RayWorker":
        w = cls.__new__(cls)
        w.actor = w.ready_ref = None
        return w

    def create(self, factory, method: str, options: dict, actor=None) -> None:
        if actor is None:
            self.actor = _ray_actor_class().options(max_restarts=0, max_task_retries=0, **options) \
                .remote(factory, method)
            self.ready_ref = None
        else:
            self.actor = actor
            self.ready_ref = actor.init.remote(factory, method)

    def start(self):
        return self.ready_ref if self.ready_ref is not None else self.actor.ready.remote()

    def release(self) -> None:
        """Leave the actor alive for the driver's warm pool (see the module docstring)."""
        try:
            self.actor.release.remote()
        except Exception:  # noqa: BLE001 - already gone: the driver's check kills it
            pass

    def give_back(self, pool, key) -> None:
        """The graph ended (driver): ask the actor whether the island released it and put it in ``pool`` at once,
        with that answer as what ``take`` waits for (the next graph, started right away, finds it); an actor that
        answers no (or dies) is taken out and killed as soon as the answer comes. Nothing here waits: the answer
        comes after the calls the island sent before its release (one caller's calls run in order), so an actor
        handed out of the pool has none left."""
        if self.actor is None:
            return  # never created
        try:
            ref = self.actor.reset.remote()
        except Exception:  # noqa: BLE001 - the handle is unusable
            self.kill()
            return
        actor = self.actor
        pool.add_fresh(key, actor, ref, idle_timeout=WARM_IDLE_S)  # a closed pool kills it

        def settle(fut) -> None:
            try:
                ok = fut.result() is True
            except Exception:  # noqa: BLE001 - died meanwhile
                ok = False
            if not ok:
                pool.discard(key, actor)  # (taken meanwhile: ``take`` got the same answer and killed it)
                self.kill()

        # the callback runs on a Ray thread: what it does (RPCs) goes from a thread of its own
        ref.future().add_done_callback(
            lambda fut: threading.Thread(target=settle, args=(fut,), name="atoll-pool-settle", daemon=True).start())

    def call(self, elems: list, batched: bool, fetch: bool):
        if fetch:
            return self.actor.call.remote(elems, batched), None
        refs = self.actor.call_refs.options(num_returns=len(elems) + 1).remote(elems, batched)
        return refs[-1], list(refs[:-1])

    def kill(self) -> None:
        if self.actor is None:
            return  # never created
        import ray

        try:
            ray.kill(self.actor, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass


#: seconds a warm pool actor waits idle for the next graph (unless the materializer's own idle timeout is
#: shorter): it holds the CPUs it asked for meanwhile, so it waits far less than an island actor (0 CPUs)
WARM_IDLE_S = 10.0

_STOP = object()


class LocalWorker:
    """A pool worker that is a local daemon thread with its own ``factory()`` instance (no Ray)."""

    __slots__ = ("q", "thread", "ready_future", "stopped")

    kind = "local"

    def __init__(self, factory, method: str, options: dict, name: str = "atoll-pool"):
        self.q: "queue.SimpleQueue" = queue.SimpleQueue()
        self.ready_future: Future = Future()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(factory, method), name=name, daemon=True)

    def start(self) -> Future:
        self.thread.start()
        return self.ready_future

    def _run(self, factory, method) -> None:
        try:
            inst = PoolInstance(factory, method)
            if inst.init_error is not None:
                self.ready_future.set_exception(inst.init_error)
                return
            self.ready_future.set_result(None)
            while True:
                item = self.q.get()
                if item is _STOP:
                    return
                fut, elems, batched = item
                if not fut.set_running_or_notify_cancel():
                    continue
                try:
                    fut.set_result(inst.run(elems, batched))
                except BaseException as e:  # noqa: BLE001 - the call's outcome
                    fut.set_exception(e)
        finally:
            self._drain()
            self.stopped.set()

    def _drain(self) -> None:
        while True:
            try:
                item = self.q.get_nowait()
            except queue.Empty:
                return
            if item is not _STOP:
                item[0].cancel()

    def call(self, elems: list, batched: bool, fetch: bool):
        fut: Future = Future()
        self.q.put((fut, elems, batched))
        return fut, None

    def kill(self) -> None:
        self.q.put(_STOP)
        if not self.thread.is_alive() and self.thread.ident is not None:
            self._drain()


def new_worker(factory, method: str, options: dict, use_ray: bool):
    return RayWorker(factory, method, options) if use_ray else LocalWorker(factory, method, options)


def is_actor_death(exc: BaseException) -> bool:
    """The worker is gone (Ray actor death or loss of its results): its calls are lost, not failed.
    ``exc`` comes from ``async_loop.outcome``, which wraps Ray's own errors in ``RayCallError`` with the
    Ray error as its ``__cause__``; the Ray error itself is recognised too."""
    ray = sys.modules.get("ray")
    if ray is None:
        return False
    ex = ray.exceptions
    death = (ex.RayActorError, ex.ObjectLostError)
    return isinstance(exc, death) or isinstance(exc.__cause__, death)


def original_error(exc: BaseException) -> BaseException:
    """The exception ``fn`` raised, for an error coming back from an actor call (``RayTaskError``)."""
    ray = sys.modules.get("ray")
    if ray is not None and isinstance(exc, ray.exceptions.RayTaskError):
        cause = getattr(exc, "cause", None)
        if isinstance(cause, BaseException):
            return cause
    return exc


__all__: List[str] = [
    "PoolInstance", "PoolActor", "RayWorker", "LocalWorker", "new_worker", "ray_active", "is_actor_death",
    "original_error", "factory_name",
]
