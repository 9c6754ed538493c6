"""The machinery of the async operators (``map_async`` and its family): turning what a user function
returned - an awaitable, a ``concurrent.futures.Future`` or a ``ray.ObjectRef`` - into a completion that
comes back to the stage on its island thread.

**Event loop.** Awaitables (``async def`` functions, asyncio futures, anything with ``__await__``) run
on one asyncio event loop thread per process, shared by every stage of every materializer in that
process (on Ray: per island actor process). The thread is started lazily, by the first stage that gets
an awaitable, and is reference-counted by the stages using it: when the last of them has stopped, the
loop is stopped and its thread joined, so a process that runs no async stage has no loop thread and a
finished graph leaves none behind. (The design in ``operators.md`` section 3.5 proposes one loop per
island host, ``host.aio_loop()``; a per-process loop counted by its stages gives the same guarantees -
started on demand, stopped when the graphs using it end - without a hook in the host, and it also
serves several islands of one local materializer with one thread.)

**Completion.** ``fn(elem)`` itself is called on the island thread, as Pekko calls ``f`` on the stage.
A coroutine is scheduled with ``asyncio.run_coroutine_threadsafe``; a Future gets a done callback; an
ObjectRef is resolved through ``ref.future()`` (Ray's public API: no thread blocks on ``ray.get``).
Whatever thread completes it only calls an ``AsyncCallback`` with ``(token, future)``; the stage reads
the outcome from the future on its own thread. A future that is already done when ``fn`` returns is
handled synchronously (Pekko's #20217 optimization), so an already failed future fails the stage at
once under Stop.

**Stop.** When a stage stops, the coroutines it started and that are still running are cancelled
(a Scala Future cannot be cancelled; an asyncio task can, and leaving it running would keep the loop
thread alive for a stage that no longer exists). Futures and ObjectRefs handed over by ``fn`` belong to
the caller and are left alone.
"""
from __future__ import annotations

import asyncio
import inspect
import sys
import threading
from concurrent.futures import Future
from typing import Any, Callable, Optional

from ...errors import NotAsyncResultError, RayCallError, StreamError  # noqa: F401 - re-exported for the async operators

_lock = threading.Lock()


class _LoopThread:
    """One asyncio loop running forever on a daemon thread."""

    __slots__ = ("loop", "thread", "users")

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.users = 0
        started = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(started,), name="atoll-async-loop", daemon=True)
        self.thread.start()
        started.wait()

    def _run(self, started: threading.Event) -> None:
        loop = self.loop
        asyncio.set_event_loop(loop)
        loop.call_soon(started.set)
        try:
            loop.run_forever()
            tasks = asyncio.all_tasks(loop)
            for t in tasks:
                t.cancel()
            if tasks:
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


_current: Optional[_LoopThread] = None


def acquire_loop() -> _LoopThread:
    """The process's shared loop thread (started if none runs), counted as used once more."""
    global _current
    with _lock:
        lt = _current
        if lt is None:
            lt = _current = _LoopThread()
        lt.users += 1
        return lt


def release_loop(lt: _LoopThread) -> None:
    """Count one user of ``lt`` less; the last one stops the loop and joins its thread."""
    global _current
    with _lock:
        lt.users -= 1
        if lt.users > 0:
            return
        if _current is lt:
            _current = None
    lt.loop.call_soon_threadsafe(lt.loop.stop)
    if threading.current_thread() is not lt.thread:
        lt.thread.join(5.0)


def loop_thread_running() -> bool:
    """Whether the shared loop thread exists now (for tests: no thread is left once the graphs ended)."""
    with _lock:
        return _current is not None


def _object_ref_type():
    ray = sys.modules.get("ray")  # no ObjectRef can exist in a process that never imported ray
    return getattr(ray, "ObjectRef", None) if ray is not None else None


async def _await(awaitable):
    return await awaitable


class Resolver:
    """Per logic: starts what ``fn`` returned and reports its completion through an async callback.

    ``resolve(result, token)`` returns the future when it is already done (the caller handles it at
    once) and None when the completion will arrive later as ``handler(token, future)`` on the island
    thread. ``stop()`` (from ``post_stop``) cancels the coroutines still running and gives the loop
    back."""

    __slots__ = ("op", "callback", "handler", "lt", "running", "last")

    def __init__(self, logic, op: str, handler: Callable[[Any, Future], None]):
        self.op = op
        self.handler = handler
        self.callback = logic.get_async_callback(self._completed)
        self.lt: Optional[_LoopThread] = None
        self.running: set = set()  # futures of the coroutines this stage started and that still run
        self.last: Optional[Future] = None  # the future of the last resolve

    def _completed(self, token_future) -> None:
        token, fut = token_future
        self.running.discard(fut)
        self.handler(token, fut)

    def to_future(self, result: Any) -> Future:
        """``result`` as a ``concurrent.futures.Future`` (coroutines start running on the loop)."""
        if isinstance(result, Future):
            return result
        ref_type = _object_ref_type()
        if ref_type is not None and isinstance(result, ref_type):
            return result.future()
        if inspect.isawaitable(result):
            if self.lt is None:
                self.lt = acquire_loop()
            coro = result if inspect.iscoroutine(result) else _await(result)
            fut = asyncio.run_coroutine_threadsafe(coro, self.lt.loop)
            self.running.add(fut)
            return fut
        if inspect.iscoroutine(result):  # pragma: no cover - coroutines are awaitable
            result.close()
        raise NotAsyncResultError(
            f"{self.op}: the function must return an awaitable, a concurrent.futures.Future or a ray.ObjectRef, "
            f"got {result!r}"
        )

    def resolve(self, result: Any, token: Any) -> Optional[Future]:
        fut = self.last = self.to_future(result)
        if fut.done():
            self.running.discard(fut)
            return fut
        cb = self.callback
        fut.add_done_callback(lambda f, cb=cb, token=token: cb.invoke((token, f)))
        return None

    def detach(self, fut: Future, then: Callable[[Any], Any], always: bool = False) -> None:
        """From ``post_stop``: let ``fut`` (a future from ``resolve``) run on instead of cancelling it, and
        when it succeeds (or, with ``always``, ends in any way) run ``then(value)`` to its end: a
        resource created after the stage stopped is closed, or closed after its pending read. Failures
        are ignored: the stream has ended."""
        hold = None
        if fut in self.running:
            self.running.discard(fut)
            hold = acquire_loop()  # the coroutine needs the loop until it ends

        def done(f, hold=hold):
            try:
                value, exc = outcome(f)
                if exc is None or always:
                    run_detached(then(value))
            except Exception:  # noqa: BLE001 - nothing to report to
                pass
            finally:
                if hold is not None:
                    release_loop(hold)

        fut.add_done_callback(done)

    def stop(self) -> None:
        running, self.running = self.running, set()
        for fut in running:
            fut.cancel()
        lt, self.lt = self.lt, None
        if lt is not None:
            release_loop(lt)


def run_detached(result: Any) -> None:
    """Run ``result`` (what a user function returned) to its end without a stage to report to - a
    resource's ``close`` after the stream stopped. From any thread; an awaitable holds the shared loop
    until it ends. Failures are ignored."""
    if isinstance(result, Future):
        return  # runs by itself
    ref_type = _object_ref_type()
    if ref_type is not None and isinstance(result, ref_type):
        return
    if not inspect.isawaitable(result):
        raise NotAsyncResultError(f"expected an awaitable, a concurrent.futures.Future or a ray.ObjectRef, got {result!r}")
    lt = acquire_loop()
    coro = result if inspect.iscoroutine(result) else _await(result)
    fut = asyncio.run_coroutine_threadsafe(coro, lt.loop)
    fut.add_done_callback(lambda _f, lt=lt: release_loop(lt))


def outcome(fut: Future):
    """``(value, exc)`` of a done future; a cancelled one gives ``CancelledError``, a Ray task's failure
    the task's own exception (see ``unwrap_ray_error``)."""
    if fut.cancelled():
        return None, asyncio.CancelledError(f"the future was cancelled: {fut!r}")
    exc = fut.exception()
    if exc is not None:
        return None, unwrap_ray_error(exc)
    return fut.result(), None


def unwrap_ray_error(exc: BaseException) -> BaseException:
    """What the decider sees and the stream fails with when a Ray call fails: the exception the task or
    actor method raised, instead of Ray's ``RayTaskError`` wrapper (with the remote traceback as a
    note), and a ``RayCallError`` for Ray's own errors. Neither wrapper can travel on to another island:
    Ray fails a call that gets a Ray error among its arguments."""
    ray = sys.modules.get("ray")
    exceptions = getattr(ray, "exceptions", None) if ray is not None else None
    if exceptions is None:
        return exc
    task_error = getattr(exceptions, "RayTaskError", None)
    ray_error = getattr(exceptions, "RayError", None)
    if task_error is not None and isinstance(exc, task_error):
        cause = getattr(exc, "cause", None)
        if isinstance(cause, BaseException) and not isinstance(cause, task_error):
            if ray_error is not None and isinstance(cause, ray_error):
                return unwrap_ray_error(cause)
            try:
                cause.add_note(f"raised remotely: {getattr(exc, 'traceback_str', exc)}")
            except Exception:  # noqa: BLE001 - notes are a nicety
                pass
            return cause
    if ray_error is not None and isinstance(exc, ray_error):
        t = type(exc)
        wrapped = RayCallError(f"{t.__module__}.{t.__qualname__}", str(exc))
        wrapped.__cause__ = exc
        return wrapped
    return exc
