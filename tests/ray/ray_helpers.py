"""Helpers for the Ray tests (imported by name: the test directories are not packages)."""
from __future__ import annotations

import time

#: the dashboard of this module's Ray session (several local Ray instances may be running)
DASHBOARD = None


def alive_island_actors(include_warm: bool = False) -> list:
    """Island actors Ray's state API reports as alive (needs the dashboard, started by ``ray_session``), apart
    from those idle in a materializer's warm pool (kept for the next graph, not leaked) unless ``include_warm``."""
    from ray.util.state import list_actors

    from atoll._impl.actors.warm_pool import idle_actor_ids

    warm = set() if include_warm else idle_actor_ids()
    return [
        a
        for a in list_actors(
            address=f"http://{DASHBOARD}" if DASHBOARD else None,
            limit=10000,
            filters=[("class_name", "=", "IslandActor")],
            raise_on_missing_output=False,
        )
        if a.state not in ("DEAD",) and a.actor_id not in warm
    ]


def wait_no_island_actors(timeout: float = 10.0, include_warm: bool = False) -> list:
    deadline = time.monotonic() + timeout
    while True:
        alive = alive_island_actors(include_warm)
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)
