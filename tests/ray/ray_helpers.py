"""Helpers for the Ray tests (imported by name: the test directories are not packages)."""
from __future__ import annotations

import time

#: the dashboard of this module's Ray session (several local Ray instances may be running)
DASHBOARD = None


def alive_island_actors() -> list:
    """Island actors Ray's state API reports as alive (needs the dashboard, started by ``ray_session``)."""
    from ray.util.state import list_actors

    return [
        a
        for a in list_actors(
            address=f"http://{DASHBOARD}" if DASHBOARD else None,
            limit=10000,
            filters=[("class_name", "=", "IslandActor")],
            raise_on_missing_output=False,
        )
        if a.state not in ("DEAD",)
    ]


def wait_no_island_actors(timeout: float = 10.0) -> list:
    deadline = time.monotonic() + timeout
    while True:
        alive = alive_island_actors()
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)
