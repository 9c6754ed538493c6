"""Fault injection for tests of checkpointed graphs (Flink's style: exact results, not "it did not crash").

- ``numbered(n, keys)``: a replayable source of ``(key, seq)`` pairs, ``seq`` counting up per key.
- ``verifying_sink(n, keys)``: a sink whose future is a ``Verification``: per key the elements lost, duplicated
  and out of order (an exactly-once run has none of any).
- ``kill_island(graph, "island-2")`` (or an island index) ends the island's Ray actor with ``ray.kill``, without
  telling Atoll, the way a crash or a lost node would - on ``Materializer.local`` the island's thread, by a fatal
  error delivered to its loop; the graph's recovery (``CheckpointSettings.restart``) is what is under test. ``kill_island_when(graph, island, condition)`` waits for ``condition()`` first;
  ``kill_island_at(graph, island, fraction, total, watch)`` once island ``watch`` has received ``fraction`` of
  ``total`` elements; ``kill_island_chosen(graph, choose)`` kills the island ``choose()`` names once it names one
(for faults where which island to strike is only known at that moment, e.g. the one aligning a checkpoint).
- ``elements_received(graph, island)``: what the island has received through its channels in the graph's current
  attempt, to wait on (elements reached it) where a sleep would guess how long that takes.
- ``remove_node_at(graph, cluster, node, fraction, total, watch)`` removes a whole node of a test cluster
  (``ray.cluster_utils.Cluster``; ``node`` as ``cluster.add_node`` returned it) at the same point of the stream: every
  actor on it dies at once, with its raylet, as when a machine is lost (``remove_node_when`` waits for a condition).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Union


def numbered(n: int, keys: int = 1):
    """A ``Source`` of ``n`` pairs ``(key, seq)``: element ``i`` is ``(i % keys, i // keys)``. Replayable (a range
    underneath), so it restores from checkpoints exactly."""
    from ..dsl.source import Source

    if not isinstance(n, int) or n < 0:
        raise ValueError(f"numbered: n must be an int >= 0, got {n!r}")
    if not isinstance(keys, int) or keys < 1:
        raise ValueError(f"numbered: keys must be an int >= 1, got {keys!r}")
    return Source.range(0, n).map(lambda i: (i % keys, i // keys))


@dataclass
class Verification:
    """What a ``verifying_sink`` saw, per key: ``lost`` (expected, never received), ``duplicated`` (received more
    than once), ``out_of_order`` (received after a larger seq of the same key), and ``received`` in all."""

    expected: Dict[Any, int]
    received: int = 0
    lost: Dict[Any, int] = field(default_factory=dict)
    duplicated: Dict[Any, int] = field(default_factory=dict)
    out_of_order: Dict[Any, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Exactly once and in order: nothing lost, duplicated or reordered."""
        return not (any(self.lost.values()) or any(self.duplicated.values()) or any(self.out_of_order.values()))

    def __str__(self):
        bad = {name: {k: v for k, v in getattr(self, name).items() if v}
               for name in ("lost", "duplicated", "out_of_order")}
        return f"Verification(received={self.received}, " + ", ".join(f"{k}={v}" for k, v in bad.items()) + ")"


class _Seen:
    """The sink's state: per key the seqs seen and the largest one (picklable: it is the fold's checkpoint state)."""

    __slots__ = ("seen", "top", "dups", "late", "count")

    def __init__(self):
        self.seen: Dict[Any, set] = {}
        self.top: Dict[Any, int] = {}
        self.dups: Dict[Any, int] = {}
        self.late: Dict[Any, int] = {}
        self.count = 0

    def __getstate__(self):
        return (self.seen, self.top, self.dups, self.late, self.count)

    def __setstate__(self, state):
        self.seen, self.top, self.dups, self.late, self.count = state

    def add(self, pair) -> "_Seen":
        key, seq = pair
        seen = self.seen.get(key)
        if seen is None:
            seen = self.seen[key] = set()
        self.count += 1
        if seq in seen:
            self.dups[key] = self.dups.get(key, 0) + 1
            return self
        if seq < self.top.get(key, -1):
            self.late[key] = self.late.get(key, 0) + 1
        else:
            self.top[key] = seq
        seen.add(seq)
        return self


def _per_key(n: int, keys: int) -> Dict[int, int]:
    return {k: n // keys + (1 if k < n % keys else 0) for k in range(keys)}


def verifying_sink(n: int, keys: int = 1):
    """A ``Sink`` of the pairs ``numbered(n, keys)`` emits; its future is the ``Verification`` of what arrived."""
    from ..dsl.sink import Sink

    expected = _per_key(n, keys)

    def verdict(s: _Seen) -> Verification:
        v = Verification(expected=expected, received=s.count)
        for k, want in expected.items():
            have = s.seen.get(k, ())
            v.lost[k] = sum(1 for i in range(want) if i not in have)
            v.duplicated[k] = s.dups.get(k, 0)
            v.out_of_order[k] = s.late.get(k, 0)
        for k in s.seen:
            if k not in expected:
                v.lost.setdefault(k, 0)
                v.duplicated[k] = v.duplicated.get(k, 0) + len(s.seen[k])  # a key that should not exist
        return v

    return Sink.fold(None, lambda acc, pair: (acc if acc is not None else _Seen()).add(pair)).map_materialized_value(
        lambda f: _then(f, verdict))


def _then(future, fn):
    from concurrent.futures import Future

    out: Future = Future()
    out.set_running_or_notify_cancel()

    def done(f):
        e = f.exception()
        if e is not None:
            out.set_exception(e)
        else:
            try:
                out.set_result(fn(f.result() or _Seen()))
            except BaseException as x:  # noqa: BLE001
                out.set_exception(x)

    future.add_done_callback(done)
    return out


def _record(graph: Any, island: Union[int, str], what: str = "kill_island"):
    islands = list(getattr(graph, "_islands", ()))
    for r in islands:
        if (isinstance(island, int) and r.index == island) or r.name == island:
            return r
    names = [r.name for r in islands]
    raise LookupError(f"{what}: graph {graph.name} has no island {island!r} (its islands: {names})")


def elements_received(graph: Any, island: Union[int, str]) -> int:
    """Elements island ``island`` (its index or name; islands are numbered from the sink) of the running ``graph``
    received through its input channels in the current attempt (a restarted attempt counts from 0)."""
    return _received(graph, _record(graph, island, "elements_received").name) or 0


def _received(graph: Any, name: str) -> Union[int, None]:
    """``elements_in`` of the island named ``name`` as ``graph.islands()`` reports it now; None when it is not listed."""
    return next(((i.get("elements_in") or 0) for i in graph.islands() if i.get("name") == name), None)


def kill_island(graph: Any, island: Union[int, str]) -> None:
    """Kill the island ``island`` (its index or name) of the running ``graph`` now: on Ray its actor (``ray.kill``);
    on ``Materializer.local`` its thread (a fatal error posted to the island's loop, past every stage's
    supervision: the thread ends as after a crash of its host, and the graph sees an island death)."""
    local = getattr(graph, "kill_island", None)
    if local is not None:
        local(island)
        return
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


def kill_island_chosen(graph: Any, choose: Callable[[], Union[int, str, None]], timeout: float = 60.0,
                       poll: float = 0.01) -> Union[int, str]:
    """Kill the island ``choose()`` returns (an index or name; None: not yet, asked again every ``poll`` seconds)
    and return it; raises ``TimeoutError`` if ``choose()`` names none within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        island = choose()
        if island is not None:
            kill_island(graph, island)
            return island
        if time.monotonic() > deadline:
            raise TimeoutError(f"kill_island_chosen: no island was chosen within {timeout}s")
        time.sleep(poll)


def kill_island_at(graph: Any, island: Union[int, str], fraction: float, total: int, watch: Union[int, str, None] = None,
                   timeout: float = 60.0) -> int:
    """Kill ``island`` once ``fraction`` of ``total`` elements went by: received through the channels of island
    ``watch``, or by default the furthest any island got (elements received, or emitted by its own sources).
    Returns the count seen when it struck."""
    reached, seen = _fraction_reached("kill_island_at", graph, fraction, total, watch)
    kill_island_when(graph, island, reached, timeout=timeout)
    return seen[0]


def _fraction_reached(what: str, graph: Any, fraction: float, total: int, watch: Union[int, str, None]):
    """A condition that holds once ``fraction`` of ``total`` elements went by (see ``kill_island_at``), and the
    one-item list it keeps the count it saw last in."""
    if not 0 <= fraction <= 1:
        raise ValueError(f"{what}: fraction must be in [0, 1], got {fraction!r}")
    target = None if watch is None else _record(graph, watch, what).name
    seen = [0]

    def reached() -> bool:
        if target is not None:
            n = _received(graph, target)
            if n is not None:
                seen[0] = n
        else:
            for info in graph.islands():
                seen[0] = max(seen[0], info.get("elements_in") or 0, info.get("source_elements") or 0)
        return seen[0] >= fraction * total

    return reached, seen


def remove_node_when(cluster: Any, node: Any, condition: Callable[[], bool], timeout: float = 60.0,
                     poll: float = 0.01, graceful: bool = False) -> None:
    """Remove ``node`` from the test cluster ``cluster`` (a ``ray.cluster_utils.Cluster``; ``node`` as
    ``cluster.add_node`` returned it) as soon as ``condition()`` is true (checked every ``poll`` seconds); raises
    ``TimeoutError`` if it does not become true within ``timeout`` seconds. The node's processes are killed
    (``graceful=False``, the default: as when a machine is lost - its raylet and every worker on it die at once,
    and Ray declares the node dead only once its health checks fail); the node cannot be added back."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"remove_node_when: the condition did not hold within {timeout}s")
        time.sleep(poll)
    cluster.remove_node(node, allow_graceful=graceful)


def remove_node_at(graph: Any, cluster: Any, node: Any, fraction: float, total: int,
                   watch: Union[int, str, None] = None, timeout: float = 60.0, graceful: bool = False) -> int:
    """Remove ``node`` of ``cluster`` (see ``remove_node_when``) once ``fraction`` of ``total`` elements of the
    running ``graph`` went by, counted as ``kill_island_at`` counts (through island ``watch``'s channels, or the
    furthest any island got). Every island actor on the node dies with it; the graph's recovery must place them
    elsewhere. Returns the count seen when it struck."""
    reached, seen = _fraction_reached("remove_node_at", graph, fraction, total, watch)
    remove_node_when(cluster, node, reached, timeout=timeout, graceful=graceful)
    return seen[0]
