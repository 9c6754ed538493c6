"""On Materializer.ray: a branch that failed before the checkpoint a kill restores stays failed after the restore,
and a fold that finished before it emits its result once (``tests/checkpoint/test_finished_stages_restore.py`` has
the local cases and says why)."""
from __future__ import annotations

import operator
import time
from pathlib import Path

from atoll import Broadcast, CheckpointSettings, Flow, GraphDSL, Keep, Materializer, RestartPolicy, Sink, Source
from atoll.stage import FlowShape
from atoll.testkit.chaos import kill_island_at

from ray_helpers import wait_no_island_actors

N = 3000


def _mat(tmp_path) -> Materializer:
    return Materializer.ray(start_timeout=30, checkpoint=CheckpointSettings(
        storage=str(tmp_path / "checkpoints"), restart=RestartPolicy(backoff=0.0)))


def _recording_branch(path: Path, fail_at: int):
    """Every element also goes to a branch that appends it to ``path`` and fails at ``fail_at`` (the Broadcast does
    not cancel eagerly: the main line runs on without the branch)."""
    def write(x):
        if x == fail_at:
            raise ValueError(f"poison {fail_at}")
        with open(path, "a") as f:
            f.write(f"{x}\n")

    def build(b):
        bc = b.add(Broadcast(2))
        branch = b.add(Flow().to(Sink.foreach(write)))
        bc.out(0) >> branch.in_
        return FlowShape(bc.in_, bc.out(1))

    return Flow.from_graph(GraphDSL.create(build))


def _lines(path: Path) -> list:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def _until(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


def test_a_branch_failed_before_the_restored_checkpoint_stays_failed_and_a_finished_fold_emits_once(ray_session,
                                                                                                    tmp_path):
    path = tmp_path / "branch.txt"
    side = Source.range(1, 11).fold(0, operator.add).map(lambda s: -s)
    mat = _mat(tmp_path)
    try:
        seq = (Source.range(0, N).throttle(100, 0.1).merge(side).island().via(_recording_branch(path, 100)).island()
               .map(lambda x: x).island().to_mat(Sink.seq(), Keep.right)).run(mat, name="finished")
        g = mat.running_graph("finished")
        _until(lambda: len(_lines(path)) >= 100)
        g.checkpoint_now(timeout=30)  # the branch failed before (or at) this cut
        assert kill_island_at(g, 1, 0.5, N) < N  # the island holding the failed branch
        got = seq.result(90)
        assert g.restarts == 1
        assert sorted(got) == [-55] + list(range(N))  # the fold's result once, every element once
        assert sorted(_lines(path)) == sorted([-55] + list(range(100)))  # nothing after the failure, ever
    finally:
        mat.shutdown()
    assert wait_no_island_actors() == []
