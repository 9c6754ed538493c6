"""Helpers shared by the Spark interop tests (polling, a rate stream); the fixtures live in ``conftest.py``."""
from __future__ import annotations

import threading
import time


def wait_until(condition, timeout: float = 60.0) -> bool:
    """Whether ``condition()`` became true within ``timeout`` seconds (polled every 50 ms)."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not condition():
        if time.monotonic() > deadline:
            return False
        pause.wait(0.05)
    return True


def rate_df(spark, rows_per_second: int = 200):
    """Spark's built-in ``rate`` stream (``timestamp``, ``value`` from 0) in one partition."""
    return (spark.readStream.format("rate").option("rowsPerSecond", rows_per_second)
            .option("numPartitions", 1).load())


def actors_still_alive(actors, timeout: float = 30.0, include_warm: bool = False) -> list:
    """The actors of ``actors`` that still answer after ``timeout`` (polled until none does), apart from island
    actors idle in a materializer's warm pool (reset and kept for the next graph, not leaked) unless
    ``include_warm``."""
    import ray

    from atoll._impl.actors.warm_pool import idle_actor_ids

    deadline = time.monotonic() + timeout
    alive = list(actors)
    pause = threading.Event()
    while alive and time.monotonic() < deadline:
        warm = set() if include_warm else idle_actor_ids()
        still = []
        for a in alive:
            if a._actor_id.hex() in warm:
                continue
            try:
                ray.get(a.__ray_ready__.remote(), timeout=5)
                still.append(a)
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                pass
        alive = still
        if alive:
            pause.wait(0.1)
    return alive
