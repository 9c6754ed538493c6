"""Sink.to_parquet(single_file=True) exactly once on Materializer.ray: an island killed mid-stream restarts the
graph from its last checkpoint; the parts committed per checkpoint are merged into the one file at the end, which
holds exactly the failure-free run's rows, and nothing hidden is left beside it."""
from __future__ import annotations

import os
import random

import pyarrow.parquet as pq
import pytest

from atoll import CheckpointSettings, Keep, Materializer, RestartPolicy, Sink, Source
from atoll.interop.parquet import ParquetSink
from atoll.testkit.chaos import kill_island_at

from ray_helpers import wait_no_island_actors

N = 4000


@pytest.mark.slow
@pytest.mark.parametrize("island", [0, 2], ids=["sink", "source"])
def test_a_killed_island_leaves_exactly_the_failure_free_single_file(ray_session, tmp_path, island):
    seed = random.randrange(1 << 30)
    fraction = random.Random(seed).uniform(0.3, 0.7)
    out = tmp_path / "data" / "one.parquet"
    out.parent.mkdir()
    mat = Materializer.ray(start_timeout=30, checkpoint=CheckpointSettings(
        storage=str(tmp_path / "checkpoints"), interval=0.2, restart=RestartPolicy(backoff=0.0)))
    try:
        written = (Source.range(0, N).throttle(100, 0.1).island().map(lambda x: {"x": x}).island()
                   .to_mat(Sink.from_graph(ParquetSink(str(out), rows_per_block=100, single_file=True)), Keep.right)
                   ).run(mat, name=f"single-{island}")
        g = mat.running_graph(f"single-{island}")
        struck = kill_island_at(g, island, fraction, N)
        assert written.result(90) == N, f"seed={seed}"
        print(f"seed={seed} fraction={fraction:.2f} killed island {island} after {struck} elements")
        assert struck < N and g.restarts == 1
    finally:
        mat.shutdown()
    assert wait_no_island_actors() == []
    assert pq.read_table(out).column("x").to_pylist() == list(range(N)), f"seed={seed}"
    assert os.listdir(out.parent) == ["one.parquet"]
