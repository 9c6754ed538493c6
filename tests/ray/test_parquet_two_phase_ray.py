"""Sink.to_parquet exactly once on Materializer.ray: an island killed mid-stream restarts the graph from its last
checkpoint, and the dataset directory holds exactly the failure-free run's rows (the restore commits what the
checkpoint prepared and deletes the parts the killed attempt wrote after it)."""
from __future__ import annotations

import os
import random

import pyarrow.parquet as pq
import pytest

from atoll import CheckpointSettings, Keep, Materializer, RestartPolicy, Sink, Source
from atoll.interop.parquet import ParquetSink
from atoll.testkit.chaos import kill_island_at

from ray_helpers import wait_no_island_actors

N = 4000  # 4 s at 1000 elements/s


def _committed(path) -> list:
    names = sorted(os.listdir(path))
    assert [n for n in names if n.startswith("_")] == [], names
    out = []
    for n in names:
        out.extend(pq.read_table(os.path.join(path, n)).column("x").to_pylist())
    return out


def _graph(out):
    return (Source.range(0, N).throttle(100, 0.1).island().map(lambda x: {"x": x}).island()
            .to_mat(Sink.from_graph(ParquetSink(str(out), rows_per_block=100)), Keep.right))


@pytest.mark.slow
@pytest.mark.parametrize("island", [0, 1, 2], ids=["sink", "middle", "source"])
def test_a_killed_island_leaves_exactly_the_failure_free_parquet_output(ray_session, tmp_path, island):
    seed = random.randrange(1 << 30)
    fraction = random.Random(seed).uniform(0.3, 0.7)
    out = tmp_path / "out"
    mat = Materializer.ray(start_timeout=30, checkpoint=CheckpointSettings(
        storage=str(tmp_path / "checkpoints"), interval=0.2, restart=RestartPolicy(backoff=0.0)))
    try:
        written = _graph(out).run(mat, name=f"parquet-{island}")
        g = mat.running_graph(f"parquet-{island}")
        struck = kill_island_at(g, island, fraction, N)
        assert written.result(90) == N, f"seed={seed}"
        print(f"seed={seed} fraction={fraction:.2f} killed island {island} after {struck} elements")
        assert struck < N
        assert g.restarts == 1
        assert _committed(out) == list(range(N)), f"seed={seed}"
    finally:
        mat.shutdown()
    assert wait_no_island_actors() == []


@pytest.mark.slow
def test_the_last_part_is_committed_before_the_future_completes_on_ray(ray_session, tmp_path):
    # no interval: only the sink's request (through the island actor's reports) makes the final checkpoint
    out = tmp_path / "out"
    mat = Materializer.ray(start_timeout=30, checkpoint=CheckpointSettings(storage=str(tmp_path / "checkpoints")))
    try:
        written = (Source.range(0, 1000).map(lambda x: {"x": x}).island()
                   .to_mat(Sink.from_graph(ParquetSink(str(out), rows_per_block=100)), Keep.right)).run(mat)
        assert written.result(60) == 1000
        assert _committed(out) == list(range(1000))
    finally:
        mat.shutdown()
    assert wait_no_island_actors() == []
