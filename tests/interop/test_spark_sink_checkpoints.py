"""Sink.to_spark exactly once under checkpoints: the DataFrame is built from the blocks the checkpoints committed,
so after a restore (local) or a killed island (Ray) it equals the failure-free run's, each row once, in order."""
from __future__ import annotations

import random
import sys

import pytest
import ray.cloudpickle

from atoll import CheckpointSettings, Keep, Materializer, RestartPolicy, Sink, Source
from atoll.testkit.chaos import kill_island_at
from atoll.testkit.round_trip import checkpoint_round_trip

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray workers cannot import this test module

N = 3000


def _ids(df) -> list:
    return [r["x"] for r in df.orderBy("x").collect()]


def _rows():
    return Source.range(0, N).map(lambda x: {"x": x, "y": str(x)})


@pytest.mark.parametrize("at", [0, 1234])
def test_to_spark_restores_exactly_from_a_checkpoint(spark, tmp_path, at):
    expected, got = checkpoint_round_trip(_rows, at=at, storage=str(tmp_path / "checkpoints"),
                                          sink=lambda: Sink.to_spark("x long, y string"), timeout=120)
    assert got.count() == N  # no duplicates
    assert [tuple(r) for r in got.collect()] == [tuple(r) for r in expected.collect()] == \
        [(i, str(i)) for i in range(N)]


@pytest.mark.slow
def test_a_killed_sink_island_leaves_exactly_the_failure_free_dataframe(spark, ray_session, tmp_path):
    seed = random.randrange(1 << 30)
    fraction = random.Random(seed).uniform(0.3, 0.7)
    mat = Materializer.ray(start_timeout=30, checkpoint=CheckpointSettings(
        storage=str(tmp_path / "checkpoints"), interval=0.2, restart=RestartPolicy(backoff=0.0)))
    try:
        frame = (Source.range(0, N).throttle(100, 0.1).island().map(lambda x: {"x": x, "y": str(x)}).island()
                 .to_mat(Sink.to_spark("x long, y string"), Keep.right)).run(mat, name="spark-sink-kill")
        g = mat.running_graph("spark-sink-kill")
        struck = kill_island_at(g, 0, fraction, N)
        df = frame.result(120)
        print(f"seed={seed} fraction={fraction:.2f} killed the sink island after {struck} elements")
        assert struck < N and g.restarts == 1
        assert df.count() == N, f"seed={seed}"
        assert [tuple(r) for r in df.collect()] == [(i, str(i)) for i in range(N)], f"seed={seed}"
    finally:
        mat.shutdown()
