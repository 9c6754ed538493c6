"""Source.from_spark in checkpointed graphs: a restore reads the DataFrame again and skips the rows emitted before
the cut, on demand and from the cache; a Ray graph reading a DataFrame recovers from a killed island exactly."""
from __future__ import annotations

import operator
import sys

import pytest
import ray.cloudpickle

from atoll import CheckpointSettings, Keep, KillSwitches, Materializer, RestartPolicy, Sink, Source
from atoll.testkit.chaos import kill_island
from atoll.testkit.round_trip import checkpoint_round_trip

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray workers cannot import this test module


@pytest.mark.parametrize("cache", [False, True], ids=["on-demand", "cached"])
@pytest.mark.parametrize("at", [0, 700, 2999])
def test_from_spark_restores_exactly(spark, tmp_path, cache, at):
    df = spark.range(0, 3000, numPartitions=4).selectExpr("id", "id * 3 as y")
    expected, got = checkpoint_round_trip(lambda: Source.from_spark(df, cache=cache).map(lambda r: (r["id"], r["y"])),
                                          at, storage=str(tmp_path), timeout=60)
    assert expected == [(i, 3 * i) for i in range(3000)]
    assert got == expected


def test_a_ray_graph_reading_spark_recovers_from_a_killed_island(spark, ray_session, tmp_path):
    df = spark.range(0, 1_000_000, numPartitions=8).selectExpr("id % 50 as user")
    mat = Materializer.ray(start_timeout=30, checkpoint=CheckpointSettings(
        storage=str(tmp_path), restart=RestartPolicy(backoff=0.0)))
    try:
        switch, counts = (Source.from_spark(df).throttle(200, 0.1).via_mat(KillSwitches.single(), Keep.right)
                          .island().map(lambda r: r["user"]).island()
                          .to_mat(Sink.fold((), lambda acc, u: acc + (u,)), Keep.both)).run(mat, name="spark-kill")
        g = mat.running_graph("spark-kill")
        assert _wait(lambda: _received(g) >= 300)
        g.checkpoint_now(timeout=60)
        kill_island(g, 2)  # the island reading Spark
        assert _wait(lambda: g.attempt == 1)
        assert _wait(lambda: _received(g) >= 300)  # the new attempt reads Spark again
        g.checkpoint_now(timeout=60)
        switch.shutdown()
        got = counts.result(60)
        assert list(got) == [i % 50 for i in range(len(got))]  # nothing lost, duplicated or reordered
        assert len(got) >= 300 and g.restarts == 1
    finally:
        mat.shutdown()


def test_a_restarted_attempt_gets_the_partitions_the_first_one_already_consumed(spark, ray_session, tmp_path):
    """The new attempt asks for partitions again (replay), including ones the first attempt consumed and released
    and the ones whose jobs started when the graph was built: each request is served again."""
    df = spark.range(0, 1_000_000, numPartitions=400).selectExpr("id")
    mat = Materializer.ray(start_timeout=30, checkpoint=CheckpointSettings(
        storage=str(tmp_path), restart=RestartPolicy(backoff=0.0)))
    try:
        switch, ids = (Source.from_spark(df).throttle(200, 0.1).via_mat(KillSwitches.single(), Keep.right)
                       .island().map(lambda r: r["id"]).island()
                       .to_mat(Sink.fold((), lambda acc, i: acc + (i,)), Keep.both)).run(mat, name="spark-replay")
        g = mat.running_graph("spark-replay")
        assert _wait(lambda: _received(g) >= 6000)  # partitions 0 and 1 (2500 rows each) emitted and released
        g.checkpoint_now(timeout=60)
        kill_island(g, 2)  # the island reading Spark
        assert _wait(lambda: g.attempt == 1)
        assert _wait(lambda: _received(g) >= 300)  # the new attempt reads Spark again
        switch.shutdown()
        got = ids.result(60)
        assert list(got) == list(range(len(got)))  # nothing lost, duplicated or reordered
        assert len(got) >= 6300 and g.restarts == 1
    finally:
        mat.shutdown()


def _received(g) -> int:
    """Elements the graph's islands received through their channels, the most any island did."""
    return max((i.get("elements_in") or 0 for i in g.islands()), default=0)


def _wait(condition, timeout: float = 60.0) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
