"""``assert_all_stages_stopped``: after a test, every graph of a materializer must have ended."""
from __future__ import annotations

import time


def assert_all_stages_stopped(materializer, timeout: float = 3.0) -> None:
    """Wait until ``materializer`` has no running graph; raise ``AssertionError`` naming the rest."""
    deadline = time.monotonic() + timeout
    while True:
        running = materializer.running_graphs()
        if not running:
            return
        if time.monotonic() > deadline:
            detail = "; ".join(f"{g!r}: {g.islands()}" for g in running)
            raise AssertionError(f"graphs still running after {timeout}s: {detail}")
        time.sleep(0.01)
