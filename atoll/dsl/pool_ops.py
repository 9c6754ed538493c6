"""PoolOps: ``map_pool`` - elements through a pool of Ray actors built once each from a factory (a model
loads once per actor), with a ``PoolControl`` materialized value."""
from __future__ import annotations

from typing import Any, Callable, Optional, Tuple, Union

from .._impl.ops.pool_map import MapPool


class PoolOps:
    """Mixin for Source and Flow."""

    __slots__ = ()

    def map_pool(self, factory: Callable[[], Any], *, size: Union[int, Tuple[int, int]] = 1, ordered: bool = True,
                 max_in_flight_per_actor: int = 2, method: str = "__call__", batch_size: Optional[int] = None,
                 batch_timeout: Optional[float] = None, num_cpus: float = 1, num_gpus: float = 0,
                 memory: Optional[float] = None, resources: Optional[dict] = None, runtime_env: Optional[dict] = None,
                 scheduling_strategy: Any = None, max_retries: int = 3,
                 retry_exceptions: Union[type, Tuple[type, ...]] = (), idle_timeout: Optional[float] = 60.0,
                 ready_timeout: float = 600.0, fetch: bool = True):
        """Send each element to a pool of workers - Ray actors, or local threads when Ray is not
        initialised - each built once with ``factory()`` (a class, a ``functools.partial`` of one, or a
        zero-argument callable returning a callable), and emit ``getattr(instance, method)(elem)``.

        ``size``: a fixed pool (int), or ``(min, max)`` scaled up when elements wait for a slot and down
        after ``idle_timeout`` seconds idle (``min = 0`` allowed). ``batch_size=b``: the workers get lists
        of up to ``b`` elements and return lists of the same length; ``batch_timeout`` bounds how long a
        partial batch waits to fill. At most ``max_size * max_in_flight_per_actor * (batch_size or 1)``
        elements are held. ``ordered=False`` emits in completion order; a ``None`` result is dropped.
        ``fetch=False`` emits the result ``ObjectRef`` instead of the value. Failures: exceptions in
        ``retry_exceptions`` are retried ``max_retries`` times, others go to the supervision decider
        (Resume drops the element, Restart also replaces the worker); a dying actor is replaced and its
        elements re-sent, an element that killed more than ``max_retries`` actors goes to the decider as
        ``PoolWorkerDiedError``. The remaining arguments are the pool actors' Ray options.

        Materializes a ``PoolControl`` (``size()``, ``in_flight()``, ``restarts()``, ``resize(n)``); use
        ``via_mat(Flow().map_pool(...), Keep.both)`` to keep the upstream value too. On Ray, give the
        island driving a pool ``num_cpus=0`` on a small cluster, or its own CPU can starve the pool."""
        from .keep import Keep

        stage = MapPool(factory, size=size, ordered=ordered, max_in_flight_per_actor=max_in_flight_per_actor,
                        method=method, batch_size=batch_size, batch_timeout=batch_timeout, num_cpus=num_cpus,
                        num_gpus=num_gpus, memory=memory, resources=resources, runtime_env=runtime_env,
                        scheduling_strategy=scheduling_strategy, max_retries=max_retries,
                        retry_exceptions=retry_exceptions, idle_timeout=idle_timeout, ready_timeout=ready_timeout,
                        fetch=fetch)
        return self._stage_mat(stage, Keep.right)
