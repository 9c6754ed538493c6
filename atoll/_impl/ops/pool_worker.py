"""What runs inside a ``map_pool`` worker: the ``factory()`` instance (:class:`PoolInstance`) and the Ray actor
class (:class:`PoolActor`). Kept apart from ``actor_pool`` and free of Atoll imports on purpose: the pool's
Ray actor class is shipped to its worker *by value* (``actor_pool._ray_actor_class`` registers this module
with ``ray.cloudpickle.register_pickle_by_value``), so a new pool actor's worker process does not import the
``atoll`` package (every module of it: about as long as ``import ray`` itself in a new worker process, which
was on the path to the first result of a cold ``map_pool``). Only the standard library may be imported here,
at module level or inside functions; anything else would be imported by every pool actor.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional


def factory_name(factory: Any) -> str:
    """``Model`` for a class, a partial of one, or a function (used in messages: ``map_pool(Model)``)."""
    f = factory
    while hasattr(f, "func"):  # functools.partial
        f = f.func
    return getattr(f, "__name__", None) or type(f).__name__


class PoolInstance:
    """What a worker holds: ``getattr(factory(), method)`` and the call of one list of elements."""

    __slots__ = ("fn", "name", "init_error")

    def __init__(self, factory: Callable[[], Any], method: str):
        self.name = factory_name(factory)
        self.fn = None
        self.init_error: Optional[BaseException] = None
        try:
            instance = factory()
            fn = getattr(instance, method, None)
            if fn is None or not callable(fn):
                raise TypeError(f"map_pool({self.name}): {instance!r} has no callable {method!r}")
            self.fn = fn
        except Exception as e:  # noqa: BLE001 - reported by ready()
            self.init_error = e

    def ready(self) -> None:
        if self.init_error is not None:
            raise self.init_error

    def run(self, elems: list, batched: bool) -> list:
        """The results for ``elems`` (one call of ``fn`` per element, or one call with the whole list)."""
        if not batched:
            return [self.fn(e) for e in elems]
        out = self.fn(elems)
        try:
            out = list(out)
        except TypeError:
            raise TypeError(f"map_pool({self.name}): fn must return a list for a batch, got {out!r}") from None
        if len(out) != len(elems):
            raise ValueError(f"map_pool({self.name}): fn returned {len(out)} results for {len(elems)} elements")
        return out


class PoolActor:
    """The Ray actor class of a pool worker (``ray.remote`` is applied when the pool starts one)."""

    def __init__(self, factory: Callable[[], Any], method: str):
        self.inst = PoolInstance(factory, method)
        self.released = False

    # ``released``: the last island call was ``release`` - every call of the island before it has run (one
    # caller's calls run in order). A later island call (a restarted attempt adopting the same actor) clears
    # it again; the instance stays until the driver's ``reset``, so such an attempt finds it intact.
    def ready(self) -> None:
        self.released = False
        self.inst.ready()

    def init(self, factory: Callable[[], Any], method: str) -> None:
        """A warm actor taken by a new graph: build its ``factory()`` instance (raises as ``ready``)."""
        self.released = False
        self.inst = PoolInstance(factory, method)
        self.inst.ready()

    def release(self) -> None:
        """The island's stage ended cleanly and leaves this actor to the driver (its last call to it)."""
        self.released = True

    def reset(self) -> bool:
        """The driver's check at the graph's end: drop the instance; True (keep it warm) only if the island's
        last call was ``release``."""
        self.inst = None
        import gc

        gc.collect()
        return self.released

    def call(self, elems: list, batched: bool) -> list:
        self.released = False
        return self.inst.run(elems, batched)

    def call_refs(self, elems: list, batched: bool):
        """``fetch=False``: one return per element, then the list of "is None" flags (``num_returns=n+1``)."""
        self.released = False
        out = self.inst.run(elems, batched)
        return (*out, [r is None for r in out])


__all__: List[str] = ["PoolInstance", "PoolActor", "factory_name"]
