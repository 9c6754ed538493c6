"""``recursively`` under kills on Materializer.local: the island running the loop is killed at a random point, the
graph restarts from its last complete checkpoint (the loop's queues, root counter and per-root counts restored),
and the output equals the failure-free run's - the same elements, each once, every root's descendants in the
order the stage defines (breadth first, as the step produces them), the roots in upstream order.
Mirrors tests/ray/test_recursively_recovery_ray.py."""
from __future__ import annotations

import functools
import random
import sys
import time
from pathlib import Path
from typing import Optional

import pytest

from atoll import CheckpointSettings, Keep, Materializer, RestartPolicy, Sink, Source
from atoll.testkit.chaos import kill_island_at

sys.path.insert(0, str(Path(__file__).resolve().parent))
from thread_checks import assert_no_thread_left  # noqa: E402
from recursion_trees import STEPS, check_exact, total  # noqa: E402

ROOTS = 100
TOTAL = total(ROOTS)


def _graph(step: str, emitted: Optional[list] = None, throttled: bool = True):
    """The roots, the loop in an island of its own, 1500 elements/s taken from it in the same island (about 2 s):
    the loop is held back by its output, so its queues hold elements at every cut and at the kill. ``emitted[0]``
    counts the roots the source emits (replays included). Unthrottled, the same elements in the same order at full
    speed (for the failure-free run: the throttle only delays)."""
    def root(r):
        if emitted is not None:
            emitted[0] += 1
        return (r, 1)

    looped = Source.range(0, ROOTS).map(root).island().recursively(STEPS[step])
    if throttled:
        looped = looped.throttle(150, 0.1)
    return looped.island().to_mat(Sink.seq(), Keep.right)


@functools.lru_cache(maxsize=None)
def _failure_free(step: str) -> tuple:
    mat = Materializer.local()
    try:
        return tuple(_graph(step, throttled=False).run(mat).result(60))
    finally:
        mat.shutdown()


@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("step", sorted(STEPS))
def test_the_loop_island_killed_at_a_random_point_recovers_exactly(tmp_path, step, fusion):
    expected = _failure_free(step)
    seed = random.randrange(1 << 30)
    fraction = random.Random(seed).uniform(0.3, 0.7)
    name = f"recursively-{step}-{fusion}"
    mat = Materializer.local(fusion=fusion, checkpoint=CheckpointSettings(
        storage=str(tmp_path), interval=0.1, restart=RestartPolicy(backoff=0.0)))
    emitted = [0]
    try:
        seq = _graph(step, emitted).run(mat, name=name)
        g = mat.running_graph(name)
        deadline = time.monotonic() + 30
        while emitted[0] < 0.2 * ROOTS:
            assert time.monotonic() < deadline, "the source did not get going"
            time.sleep(0.005)
        g.checkpoint_now(timeout=10)  # taken mid-stream (and more every 0.1 s): the restore resumes the loop
        # islands are numbered from the sink: island 1 runs recursively, the sink's island (0) counts the output
        struck = kill_island_at(g, 1, fraction, TOTAL, watch=0)
        before = emitted[0]
        got = seq.result(60)
        replayed = emitted[0] - ROOTS
        print(f"seed={seed} fraction={fraction:.2f} killed the recursively island after {struck} of {TOTAL} "
              f"outputs ({before} roots), {replayed} roots replayed")
        check_exact(got, expected, ROOTS)
        assert g.restarts == 1, f"seed={seed}"  # the kill happened mid-stream and was recovered from
        assert struck < TOTAL
        assert 0 <= replayed < before, f"seed={seed}"  # restored from a checkpoint, not from the beginning
    finally:
        mat.shutdown()
    assert_no_thread_left(mat, name)
