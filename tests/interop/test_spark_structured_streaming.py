"""Source.from_spark_stream: Structured Streaming micro-batches into a graph, on the shared Spark session."""
from __future__ import annotations

import sys

import pytest
import ray
import ray.cloudpickle

from atoll import KillSwitches, Keep, Sink, Source
from atoll.testkit import TestSink, assert_all_stages_stopped
from .interop_helpers import rate_df, wait_until

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray workers cannot import this test module


@pytest.fixture
def anymat(smat, spark):
    yield smat
    assert_all_stages_stopped(smat, timeout=15.0)
    assert wait_until(lambda: not spark.streams.active), "a Spark query was left running"


def test_rate_source_elements_arrive_in_order_and_the_kill_switch_stops_the_query(spark, anymat):
    (switch, probe) = (Source.from_spark_stream(rate_df(spark), trigger="200 milliseconds")
                       .via_mat(KillSwitches.single(), Keep.right)
                       .to_mat(TestSink.probe(timeout=60), Keep.both).run(anymat))
    probe.request(300)
    values = [probe.expect_next()["value"] for _ in range(300)]
    assert values == list(range(300))
    assert len(spark.streams.active) == 1
    switch.shutdown()
    probe.expect_complete()
    assert wait_until(lambda: not spark.streams.active)


def test_backpressure_holds_the_next_micro_batch(spark, anymat):
    """With nothing requested after the first element, the query cannot get more than two batches further."""
    probe = Source.from_spark_stream(rate_df(spark, 500)).run_with(TestSink.probe(timeout=60), anymat)
    probe.request(1)
    assert probe.expect_next()["value"] == 0
    query = spark.streams.active[0]
    probe.expect_no_message(2.0)  # the query would run many batches in this time without backpressure
    progress = query.recentProgress
    assert len(progress) <= 3, [p["batchId"] for p in progress]
    probe.cancel()
    assert wait_until(lambda: not spark.streams.active)


def test_file_source_with_timestamps_completes_with_available_now(spark, anymat, tmp_path):
    import json
    import os

    src = tmp_path / "in"
    src.mkdir()
    for f in range(3):
        with open(src / f"part-{f}.json", "w") as out:
            for k in range(4):
                i = f * 4 + k
                out.write(json.dumps({"id": i, "ts": f"2024-01-01T00:00:{i:02d}Z"}) + "\n")
        os.utime(src / f"part-{f}.json", (1_700_000_000 + f, 1_700_000_000 + f))  # Spark reads by modification time
    df = (spark.readStream.schema("id long, ts timestamp").option("maxFilesPerTrigger", 1).json(str(src)))
    source = Source.from_spark_stream(df, trigger={"availableNow": True}, timestamp_column="ts",
                                      checkpoint_location=str(tmp_path / "chk"))
    rows = source.run_with(Sink.seq(), anymat).result(120)
    assert [r["id"] for r in rows] == list(range(12))  # one file per micro-batch, in order
    assert wait_until(lambda: not spark.streams.active)


def test_a_failing_query_fails_the_graph(spark, anymat):
    from pyspark.sql.functions import udf

    @udf("long")
    def fail_at_50(v):
        if v == 50:
            raise ValueError("rate value fifty refused")
        return v

    df = rate_df(spark, 100).select(fail_at_50("value").alias("v"))
    future = Source.from_spark_stream(df).run_with(Sink.seq(), anymat)
    with pytest.raises(Exception, match="rate value fifty refused"):
        future.result(120)


def test_bad_arguments_fail_when_built(spark):
    stream = rate_df(spark)
    with pytest.raises(ValueError, match="not a streaming DataFrame.*Source.from_spark"):
        Source.from_spark_stream(spark.range(3))
    with pytest.raises(TypeError, match="streaming_df must be a pyspark"):
        Source.from_spark_stream([1])
    with pytest.raises(ValueError, match="trigger must have exactly one of"):
        Source.from_spark_stream(stream, trigger={"continuous": "1 second"})
    with pytest.raises(TypeError, match="trigger must be None"):
        Source.from_spark_stream(stream, trigger=5)
    with pytest.raises(ValueError, match="trigger once must be True"):
        Source.from_spark_stream(stream, trigger={"once": False})
    with pytest.raises(ValueError, match="as_ must be one of"):
        Source.from_spark_stream(stream, as_="csv")
    with pytest.raises(ValueError, match="timestamp_column 'nope' is not a column"):
        Source.from_spark_stream(stream, timestamp_column="nope")
    assert not spark.streams.active  # nothing started at build time
