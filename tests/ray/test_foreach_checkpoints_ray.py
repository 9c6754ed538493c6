"""Sink.foreach at-least-once on Materializer.ray: the sink's island is killed mid-stream, the graph restarts from
its last checkpoint, and the function has seen every element; the repeated ones are one run, from the restored
cut to the kill; the future completes once, with Done."""
from __future__ import annotations

import os
import random

import pytest

from atoll import CheckpointSettings, Done, Keep, Materializer, RestartPolicy, Sink, Source
from atoll.testkit.chaos import kill_island_at

from ray_helpers import wait_no_island_actors

N = 3000


class _AppendTo:
    """fn for Sink.foreach: appends each element as a line to a file (flushed, so a killed actor loses none)."""

    def __init__(self, path: str):
        self.path = path
        self.f = None

    def __call__(self, x) -> None:
        if self.f is None:
            self.f = open(self.path, "a", buffering=1)
        self.f.write(f"{x}\n")
        self.f.flush()

    def __getstate__(self):
        return {"path": self.path}

    def __setstate__(self, state):
        self.path, self.f = state["path"], None


@pytest.mark.slow
def test_a_killed_foreach_island_repeats_only_the_elements_after_the_restored_cut(ray_session, tmp_path):
    seed = random.randrange(1 << 30)
    fraction = random.Random(seed).uniform(0.3, 0.7)
    seen = str(tmp_path / "seen.txt")
    mat = Materializer.ray(start_timeout=30, checkpoint=CheckpointSettings(
        storage=str(tmp_path / "checkpoints"), interval=0.2, restart=RestartPolicy(backoff=0.0)))
    try:
        done = (Source.range(0, N).throttle(100, 0.1).island().map(lambda x: x + 0).island()
                .to_mat(Sink.foreach(_AppendTo(seen)), Keep.right)).run(mat, name="foreach-kill")
        g = mat.running_graph("foreach-kill")
        struck = kill_island_at(g, 0, fraction, N)
        assert done.result(90) is Done, f"seed={seed}"
        print(f"seed={seed} fraction={fraction:.2f} killed the sink island after {struck} elements")
        assert g.restarts == 1
    finally:
        mat.shutdown()
    assert wait_no_island_actors() == []
    with open(seen) as f:
        got = [int(line) for line in f if line.strip()]
    assert os.path.getsize(seen) > 0
    # the first attempt's calls, then the second attempt's from the restored cut: [0, a) + [c, N) with c <= a
    drops = [i for i in range(1, len(got)) if got[i] <= got[i - 1]]
    assert len(drops) <= 1, f"seed={seed}"
    a = drops[0] if drops else len(got)
    first, second = got[:a], got[a:]
    assert first == list(range(len(first))), f"seed={seed}"
    if second:
        assert second == list(range(second[0], N)) and second[0] <= len(first), f"seed={seed}"
    assert sorted(set(got)) == list(range(N)), f"seed={seed}: elements lost"
