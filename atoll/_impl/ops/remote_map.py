"""``map_remote``: ``map_async`` whose function runs as a stateless Ray task per element.

Built on the ``map_async`` stage logics (:mod:`.async_map`): the stage calls a submitter instead of the
user's function, and the submitter returns an ``ObjectRef`` (resolved as every ``map_async`` result is)
or a ``Future``. Everything ``map_async`` guarantees holds: at most ``parallelism`` elements held (so at
most ``parallelism`` tasks in flight), element order (completion order with ``ordered=False``),
supervision per element, ``None`` results dropped.

**Where ``fn`` runs.** If Ray is initialised in the process that runs the island (always in an island
of ``Materializer.ray()``; on ``Materializer.local()`` when the driver called ``ray.init``), each element
is one Ray task, ``ray.remote(fn).options(num_cpus=..., ...)``. Otherwise - ``Materializer.local()``
without Ray - ``fn`` runs on a thread pool of ``parallelism`` threads owned by the stage (shut down when
it stops): the same stream semantics in-process, for tests and small jobs; the resource options are
ignored there, ``max_retries``/``retry_exceptions`` are honoured for exceptions of ``fn``, and
``fetch=False`` emits the values themselves (there is no object store to leave them in).

**Retries.** On Ray, ``max_retries`` and ``retry_exceptions`` are Ray's own task options (Ray's defaults
when None: system failures retried 3 times, exceptions of ``fn`` not retried). A failure that remains
goes to the decider: the task's own exception (``RayTaskError`` unwrapped) or a ``RayCallError`` for Ray's
errors (a lost worker or object), see :mod:`.async_loop`.

**fetch=False.** The stage emits the task's ``ObjectRef`` once the task has finished, without pulling the
value into the island (``ray.wait(fetch_local=False)`` on a waiter thread of the stage): large results
flow on to the next stage as references. The value is not read, so a task that raised is not told
from one that returned: its ``ObjectRef`` is emitted too and the error surfaces where it is fetched
(supervision sees only failures to submit).

A later ``map_pool`` (stateful actor pools) is meant to plug in the same way: a submitter choosing an
actor per element over the same stage logics.
"""
from __future__ import annotations

import inspect
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from numbers import Real
from typing import Any, Callable, Dict, Optional

from .async_map import MapAsync, _MapAsyncLogic, _MapAsyncUnorderedLogic
from .base import decider_of, require_bool, require_callable, require_int

_OP = "map_remote"


def _ray_ready():
    """The ``ray`` module if Ray is initialised in this process, else None (never imports ray)."""
    ray = sys.modules.get("ray")
    if ray is None:
        return None
    try:
        return ray if ray.is_initialized() else None
    except Exception:  # noqa: BLE001 - a half-imported ray counts as absent
        return None


def _check_number(arg: str, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{_OP}: argument {arg!r} must be a number, got {value!r}")
    if value < 0:
        raise ValueError(f"{_OP}: argument {arg!r} must be >= 0, got {value}")


def _check_retry_exceptions(value: Any) -> None:
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, (list, tuple)) and all(isinstance(t, type) and issubclass(t, BaseException) for t in value):
        return
    raise TypeError(f"{_OP}: argument 'retry_exceptions' must be a bool or a list of exception classes, got {value!r}")


class MapRemote(MapAsync):
    """``map_remote``: emits ``fn(elem)`` computed by a Ray task per element (on a local thread pool
    when Ray is not initialised), at most ``parallelism`` in flight, in element order (completion order
    with ``ordered=False``).

    **Emits when** the result for the oldest element (any element, unordered) has arrived and downstream
    is ready; a ``None`` result is skipped. **Backpressures when** ``parallelism`` elements are held.
    **Completes when** upstream completes and every held element was emitted. **Cancels when**
    downstream cancels (tasks already running finish on their own). Supervision as ``map_async``: Stop
    fails the stream as soon as a task fails for good, Resume and Restart drop the element."""

    op = _OP

    def __init__(self, fn: Callable[[Any], Any], parallelism: int, ordered: bool = True,
                 options: Optional[Dict[str, Any]] = None, max_retries: Optional[int] = None,
                 retry_exceptions: Any = None, fetch: bool = True):
        require_callable(_OP, "fn", fn)
        require_int(_OP, "parallelism", parallelism, 1)
        require_bool(_OP, "ordered", ordered)
        require_bool(_OP, "fetch", fetch)
        options = dict(options or {})
        for arg in ("num_cpus", "num_gpus", "memory"):
            _check_number(arg, options.get(arg))
        resources = options.get("resources")
        if resources is not None and (not isinstance(resources, dict)
                                      or not all(isinstance(k, str) for k in resources)):
            raise TypeError(f"{_OP}: argument 'resources' must be a dict of resource name to amount, got {resources!r}")
        runtime_env = options.get("runtime_env")
        if runtime_env is not None and not isinstance(runtime_env, dict):
            raise TypeError(f"{_OP}: argument 'runtime_env' must be a dict, got {runtime_env!r}")
        if max_retries is not None:
            require_int(_OP, "max_retries", max_retries, -1)
        _check_retry_exceptions(retry_exceptions)
        super().__init__(parallelism, fn, op=_OP)
        self.ordered = ordered
        self.options = {k: v for k, v in options.items() if v is not None}
        self.max_retries = max_retries
        self.retry_exceptions = retry_exceptions
        self.fetch = fetch

    def create_logic(self, attributes):
        cls = _RemoteOrderedLogic if self.ordered else _RemoteUnorderedLogic
        return cls(self, decider_of(attributes))


class _RemoteMixin:
    """Replaces ``fn`` by a submitter at ``pre_start`` (where the island runs) and stops it with the stage."""

    backend = None

    def pre_start(self) -> None:
        stage = self.remote_stage
        ray = _ray_ready()
        self.backend = _RayBackend(ray, stage) if ray is not None else _LocalBackend(stage)
        self.fn = self.backend.submit

    def post_stop(self) -> None:
        super().post_stop()
        if self.backend is not None:
            self.backend.stop()


class _RemoteOrderedLogic(_RemoteMixin, _MapAsyncLogic):
    def __init__(self, stage, decider):
        super().__init__(stage, decider)
        self.remote_stage = stage


class _RemoteUnorderedLogic(_RemoteMixin, _MapAsyncUnorderedLogic):
    def __init__(self, stage, decider):
        super().__init__(stage, decider)
        self.remote_stage = stage


# =========================================================================== backends
class _RayBackend:
    """One Ray task per element."""

    def __init__(self, ray, stage: MapRemote):
        options = dict(stage.options)
        if stage.max_retries is not None:
            options["max_retries"] = stage.max_retries
        if stage.retry_exceptions is not None:
            options["retry_exceptions"] = (list(stage.retry_exceptions)
                                           if isinstance(stage.retry_exceptions, tuple) else stage.retry_exceptions)
        fn = stage.fn
        if inspect.isfunction(fn):
            remote, self.fn_ref = ray.remote(fn), None
        else:  # a callable object: put once, applied by a generic task
            remote, self.fn_ref = ray.remote(_apply), ray.put(fn)
        self.remote = remote.options(**options) if options else remote
        self.waiter = None if stage.fetch else _RefWaiter(ray)

    def submit(self, elem: Any) -> Any:
        ref = self.remote.remote(elem) if self.fn_ref is None else self.remote.remote(self.fn_ref, elem)
        return ref if self.waiter is None else self.waiter.watch(ref)

    def stop(self) -> None:
        if self.waiter is not None:
            self.waiter.stop()


def _apply(fn: Callable[[Any], Any], elem: Any) -> Any:
    """The Ray task of a callable object: ``fn(elem)``."""
    return fn(elem)


class _RefWaiter:
    """``fetch=False``: completes a Future with the ObjectRef itself once its task finished, found with
    ``ray.wait(fetch_local=False)`` on one daemon thread per stage (started at the first ref)."""

    _POLL = 0.05  # how long one ray.wait blocks before it takes up refs submitted meanwhile

    def __init__(self, ray):
        self.ray = ray
        self.cond = threading.Condition()
        self.pending: Dict[Any, Future] = {}
        self.stopped = False
        self.thread: Optional[threading.Thread] = None

    def watch(self, ref) -> Future:
        fut: Future = Future()
        with self.cond:
            self.pending[ref] = fut
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="atoll-map-remote-waiter", daemon=True)
                self.thread.start()
            self.cond.notify()
        return fut

    def _run(self) -> None:
        ray = self.ray
        while True:
            with self.cond:
                while not self.pending and not self.stopped:
                    self.cond.wait()
                if self.stopped:
                    return
                refs = list(self.pending)
            try:
                ready, _ = ray.wait(refs, num_returns=len(refs), timeout=self._POLL, fetch_local=False)
            except Exception as e:  # noqa: BLE001 - hand the failure to every ref waited on
                with self.cond:
                    futs = [self.pending.pop(r) for r in refs if r in self.pending]
                for f in futs:
                    f.set_exception(e)
                continue
            with self.cond:
                futs = [(r, self.pending.pop(r)) for r in ready if r in self.pending]
            for r, f in futs:
                f.set_result(r)

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.pending.clear()
            self.cond.notify()
        t = self.thread
        if t is not None and t is not threading.current_thread():
            t.join(5.0)


class _LocalBackend:
    """Without Ray: ``fn`` on a pool of ``parallelism`` threads owned by the stage."""

    def __init__(self, stage: MapRemote):
        self.fn = stage.fn
        self.pool = ThreadPoolExecutor(max_workers=stage.parallelism, thread_name_prefix="atoll-map-remote")
        retry = stage.retry_exceptions
        self.retry_on = (BaseException,) if retry is True else tuple(retry) if retry else ()
        self.max_retries = 3 if stage.max_retries is None else stage.max_retries

    def _call(self, elem: Any) -> Any:
        attempt = 0
        while True:
            try:
                return self.fn(elem)
            except self.retry_on:
                attempt += 1
                if self.max_retries != -1 and attempt > self.max_retries:
                    raise

    def submit(self, elem: Any) -> Future:
        return self.pool.submit(self._call, elem)

    def stop(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
