"""What the local recovery tests check after a graph: its stages stopped and none of its threads runs any more."""
from __future__ import annotations

import threading
import time

from atoll.testkit.stages_stopped import assert_all_stages_stopped


def threads_of(name: str) -> list:
    """Names of the live threads whose name contains ``name`` (a graph's islands, coordinator, recovery)."""
    return [t.name for t in threading.enumerate() if name in t.name and t.is_alive()]


def assert_no_thread_left(mat, name: str) -> None:
    """Every graph of ``mat`` ended and no thread of graph ``name`` (islands, coordinator, recovery) runs."""
    assert_all_stages_stopped(mat, timeout=10)
    deadline = time.monotonic() + 10
    while threads_of(name):
        assert time.monotonic() < deadline, f"threads left: {threads_of(name)}"
        time.sleep(0.005)
