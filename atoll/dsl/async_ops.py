"""AsyncOps: operators whose function returns an awaitable, a future or a Ray ObjectRef (Pekko's ``mapAsync``
family), and their Source/Sink factories.

What the functions may return, everywhere in this module: an awaitable (a plain ``async def`` function
works: its coroutines run on a shared asyncio loop thread, started on demand and stopped when the
graphs using it end), a ``concurrent.futures.Future``, or a ``ray.ObjectRef`` (resolved without
blocking the island thread). The functions themselves are called on the island thread. See
:mod:`atoll._impl.ops.async_loop`.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Sequence, Union

from .._impl.ops.async_fold import FoldAsync, ScanAsync
from .._impl.ops.async_map import MapAsync, MapAsyncPartitioned, MapAsyncUnordered, ask_stage
from .._impl.ops.async_sources import UnfoldAsync, UnfoldResourceAsync
from .._impl.ops.remote_map import MapRemote


class AsyncOps:
    """Mixin for Source and Flow."""

    __slots__ = ()

    def map_async(self, parallelism: int, fn: Callable[[Any], Any]):
        """Emit the result of ``fn(elem)`` (an awaitable, Future or ObjectRef) in element order, with at
        most ``parallelism`` elements in the stage; a ``None`` result is dropped. Supervision: Stop fails
        as soon as a failure is seen, Resume/Restart drop the failed element (Pekko's ``mapAsync``)."""
        return self._stage(MapAsync(parallelism, fn))

    def map_async_unordered(self, parallelism: int, fn: Callable[[Any], Any]):
        """``map_async`` emitting results in completion order (Pekko's ``mapAsyncUnordered``)."""
        return self._stage(MapAsyncUnordered(parallelism, fn))

    def map_async_partitioned(self, parallelism: int, partitioner: Callable[[Any], Any],
                              fn: Callable[[Any, Any], Any]):
        """``map_async`` with at most one ``fn(elem, partition)`` in flight per ``partitioner(elem)`` and at
        most ``parallelism`` partitions at once; output in element order (Pekko's ``mapAsyncPartitioned``)."""
        return self._stage(MapAsyncPartitioned(parallelism, partitioner, fn, ordered=True))

    def map_async_partitioned_unordered(self, parallelism: int, partitioner: Callable[[Any], Any],
                                        fn: Callable[[Any, Any], Any]):
        """``map_async_partitioned`` emitting results in completion order (Pekko's
        ``mapAsyncPartitionedUnordered``)."""
        return self._stage(MapAsyncPartitioned(parallelism, partitioner, fn, ordered=False))

    def fold_async(self, zero: Any, fn: Callable[[Any, Any], Any]):
        """Fold with ``fn(acc, elem)`` returning the next accumulator asynchronously; emit the final one
        when upstream completes (Pekko's ``foldAsync``)."""
        return self._stage(FoldAsync(zero, fn))

    def scan_async(self, zero: Any, fn: Callable[[Any, Any], Any]):
        """Emit ``zero``, then every accumulator ``fn(acc, elem)`` as it arrives (Pekko's ``scanAsync``)."""
        return self._stage(ScanAsync(zero, fn))

    def ask(self, actor: Any, parallelism: int, method: str = "__call__", ordered: bool = True):
        """Send each element to a Ray actor, ``actor.<method>.remote(elem)``, and emit the replies in
        element order (completion order with ``ordered=False``), at most ``parallelism`` in flight
        (Pekko's ``ask``). The actor's exceptions and its death (``ActorDiedError``) are supervised like
        ``map_async`` failures."""
        return self._stage(ask_stage(actor, parallelism, method, ordered))

    def map_remote(self, fn: Callable[[Any], Any], *, parallelism: int, ordered: bool = True,
                   num_cpus: Optional[float] = None, num_gpus: Optional[float] = None, memory: Optional[int] = None,
                   resources: Optional[Dict[str, float]] = None, runtime_env: Optional[Dict[str, Any]] = None,
                   scheduling_strategy: Any = None, max_retries: Optional[int] = None,
                   retry_exceptions: Union[None, bool, Sequence[type]] = None, fetch: bool = True):
        """Run ``fn(elem)`` as a stateless Ray task per element, at most ``parallelism`` in flight, and emit
        the results in element order (completion order with ``ordered=False``); ``map_async`` semantics
        (supervision per element, ``None`` results dropped). The options are Ray's task options (None:
        Ray's default). ``fetch=False`` emits each task's ``ObjectRef`` once the task finished, without
        pulling the value into the island. On ``Materializer.local()`` without ``ray.init`` ``fn`` runs on
        a local pool of ``parallelism`` threads instead (resource options ignored, ``fetch=False`` emits
        values). See :mod:`atoll._impl.ops.remote_map`."""
        options = {"num_cpus": num_cpus, "num_gpus": num_gpus, "memory": memory, "resources": resources,
                   "runtime_env": runtime_env, "scheduling_strategy": scheduling_strategy}
        return self._stage(MapRemote(fn, parallelism, ordered, options, max_retries, retry_exceptions, fetch))


class AsyncSources:
    """Mixin for Source."""

    __slots__ = ()

    @staticmethod
    def unfold_async(state: Any, fn: Callable[[Any], Any]):
        """At each pull ``fn(state)`` gives, asynchronously, ``(next_state, elem)`` to emit or ``None`` to
        complete (Pekko's ``unfoldAsync``)."""
        from .source import Source

        return Source.from_graph(UnfoldAsync(state, fn))

    @staticmethod
    def unfold_resource_async(create: Callable[[], Any], read: Callable[[Any], Any], close: Callable[[Any], Any]):
        """Open a resource with ``create()``, emit ``read(resource)`` per pull until it gives ``None``, then
        ``close(resource)``; all three asynchronous (Pekko's ``unfoldResourceAsync``). The resource is
        closed exactly once, also when the stream is cancelled or fails. Supervision of ``read``:
        Resume reads again, Restart closes and re-creates the resource."""
        from .source import Source

        return Source.from_graph(UnfoldResourceAsync(create, read, close))


class AsyncSinks:
    """Mixin for Sink."""

    __slots__ = ()

    @staticmethod
    def foreach_async(parallelism: int, fn: Callable[[Any], Any]):
        """Call ``fn(elem)`` (returning an awaitable, Future or ObjectRef) for every element, at most
        ``parallelism`` at once; materializes a ``Future[Done]`` completed when upstream completed and
        every call finished, failed with the first failure (Supervision: Resume/Restart skip a failed
        element). Pekko's ``Sink.foreachAsync``: ``map_async_unordered(parallelism, fn)`` into
        ``Sink.ignore()``. With checkpoints at-least-once: after a restore the calls after the restored
        checkpoint run again (see ``ForeachSink``)."""
        from .flow import Flow
        from .keep import Keep
        from .sink import Sink

        stage = MapAsyncUnordered(parallelism, fn, op="Sink.foreach_async")
        return Flow.from_graph(stage).to_mat(Sink.ignore(), Keep.right).named("foreach_async")
