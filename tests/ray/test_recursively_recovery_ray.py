"""``recursively`` under kills on Materializer.ray: the island actor running the loop is killed at a random point,
the graph restarts from its last complete checkpoint, and the output equals the failure-free run's - the same
elements, each once, every root's descendants in breadth-first order, the roots in upstream order. Mirrors
tests/checkpoint/test_recursively_recovery.py."""
from __future__ import annotations

import random
import time

import pytest

from atoll import CheckpointSettings, Keep, Materializer, RestartPolicy, Sink, Source
from atoll.testkit.chaos import kill_island_at

from ray_helpers import wait_no_island_actors
from recursion_trees import STEPS, check_exact, total


ROOTS = 150
TOTAL = total(ROOTS)


def _graph(step: str, throttled: bool = True):
    """The roots, the loop in an island of its own, 1000 elements/s taken from it in the same island (about 5 s):
    the loop is held back by its output, so its queues hold elements at every cut and at the kill. Unthrottled, the
    same elements in the same order at full speed (for the failure-free run: the throttle only delays)."""
    looped = Source.range(0, ROOTS).map(lambda r: (r, 1)).island().recursively(STEPS[step])
    if throttled:
        looped = looped.throttle(100, 0.1)
    return looped.island().to_mat(Sink.seq(), Keep.right)


@pytest.mark.slow
@pytest.mark.parametrize("step", sorted(STEPS))
def test_the_loop_island_killed_at_a_random_point_recovers_exactly(ray_session, rmat, tmp_path, step):
    expected = _graph(step, throttled=False).run(rmat).result(120)  # the failure-free run, on a plain materializer
    seed = random.randrange(1 << 30)
    fraction = random.Random(seed).uniform(0.3, 0.7)
    name = f"recursively-{step}"
    mat = Materializer.ray(start_timeout=30, checkpoint=CheckpointSettings(
        storage=str(tmp_path), interval=0.2, restart=RestartPolicy(backoff=0.0)))
    try:
        seq = _graph(step).run(mat, name=name)
        g = mat.running_graph(name)
        deadline = time.monotonic() + 60
        while not g.checkpoints():
            assert time.monotonic() < deadline, "no checkpoint completed"
            time.sleep(0.01)
        # islands are numbered from the sink: island 1 runs recursively, the sink's island (0) counts the output
        struck = kill_island_at(g, 1, fraction, TOTAL, watch=0)
        got = seq.result(120)
        print(f"seed={seed} fraction={fraction:.2f} killed the recursively island after {struck} of {TOTAL} outputs")
        check_exact(got, expected, ROOTS)
        assert g.restarts == 1, f"seed={seed}"  # the kill happened mid-stream and was recovered from
        assert struck < TOTAL
        assert g.wait(30)
    finally:
        mat.shutdown()
    assert wait_no_island_actors() == []
