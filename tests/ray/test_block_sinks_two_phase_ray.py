"""Sink.to_ray_dataset exactly once on Materializer.ray: an island killed mid-stream restarts the graph from its
last checkpoint, and the Dataset holds exactly the failure-free run's rows, in order. The blocks the killed
sink island had put are gone with it; the Dataset is built from the parts the checkpoints committed, read back
by the driver."""
from __future__ import annotations

import random

import pytest

from atoll import CheckpointSettings, Keep, Materializer, RestartPolicy, Sink, Source
from atoll.interop.ray_dataset import RayDatasetSink
from atoll.testkit.chaos import kill_island_at

from ray_helpers import wait_no_island_actors

N = 4000  # 4 s at 1000 elements/s


def _graph():
    return (Source.range(0, N).throttle(100, 0.1).island().map(lambda x: {"x": x}).island()
            .to_mat(Sink.from_graph(RayDatasetSink(rows_per_block=100)), Keep.right))


@pytest.mark.slow
@pytest.mark.parametrize("island", [0, 2], ids=["sink", "source"])
def test_a_killed_island_leaves_exactly_the_failure_free_dataset(ray_session, tmp_path, island):
    seed = random.randrange(1 << 30)
    fraction = random.Random(seed).uniform(0.3, 0.7)
    mat = Materializer.ray(start_timeout=30, checkpoint=CheckpointSettings(
        storage=str(tmp_path / "checkpoints"), interval=0.2, restart=RestartPolicy(backoff=0.0)))
    try:
        dataset = _graph().run(mat, name=f"dataset-{island}")
        g = mat.running_graph(f"dataset-{island}")
        struck = kill_island_at(g, island, fraction, N)
        rows = [r["x"] for r in dataset.result(90).take_all()]
        print(f"seed={seed} fraction={fraction:.2f} killed island {island} after {struck} elements")
        assert struck < N
        assert g.restarts == 1
        assert rows == list(range(N)), f"seed={seed}"
        assert g.wait(30)
    finally:
        mat.shutdown()
    assert wait_no_island_actors() == []
    assert not (tmp_path / "checkpoints" / f"dataset-{island}").exists()  # parts deleted with the checkpoints


@pytest.mark.slow
def test_the_dataset_outlives_the_graph_and_its_islands(ray_session, tmp_path):
    # no interval: only the sink's request (through the island actor's reports) makes the final checkpoint
    mat = Materializer.ray(start_timeout=30, checkpoint=CheckpointSettings(storage=str(tmp_path / "checkpoints")))
    try:
        dataset = (Source.range(0, 1000).map(lambda x: {"x": x}).island()
                   .to_mat(Sink.from_graph(RayDatasetSink(rows_per_block=100)), Keep.right)).run(mat).result(60)
    finally:
        mat.shutdown()
    assert wait_no_island_actors() == []
    assert [r["x"] for r in dataset.take_all()] == list(range(1000))  # blocks owned by the driver
