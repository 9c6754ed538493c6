"""Fault injection for tests of checkpointed graphs: kill an island's actor the way a crash or a lost node would.

``kill_island(graph, "island-2")`` (or an island index) ends the island's Ray actor with ``ray.kill``, without
telling Atoll; the graph's recovery (``CheckpointSettings.restart``) is what is under test.
``kill_island_when(graph, island, condition)`` waits for ``condition()`` first (e.g. a checkpoint exists).
"""
from __future__ import annotations

import time
from typing import Any, Callable, Union


def _record(graph: Any, island: Union[int, str]):
    islands = list(getattr(graph, "_islands", ()))
    for r in islands:
        if (isinstance(island, int) and r.index == island) or r.name == island:
            return r
    names = [r.name for r in islands]
    raise LookupError(f"kill_island: graph {graph.name} has no island {island!r} (its islands: {names})")


def kill_island(graph: Any, island: Union[int, str]) -> None:
    """Kill the Ray actor that hosts ``island`` (its index or name) of the running ``graph`` now."""
    import ray

    ray.kill(_record(graph, island).actor, no_restart=True)


def kill_island_when(graph: Any, island: Union[int, str], condition: Callable[[], bool], timeout: float = 60.0,
                     poll: float = 0.01) -> None:
    """Kill ``island`` of ``graph`` as soon as ``condition()`` is true (checked every ``poll`` seconds); raises
    ``TimeoutError`` if it does not become true within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"kill_island_when: the condition did not hold within {timeout}s")
        time.sleep(poll)
    kill_island(graph, island)
