"""from_spark's Ray islands have their partitions read from the executor by the long-lived hub actor (no Ray task,
so no worker process to start per partition), which hands each on as its Arrow IPC stream; the tables read from them
are exactly Spark's rows."""
from __future__ import annotations

import datetime

import pyarrow as pa
import ray

from atoll.interop import spark_on_demand
from atoll.interop.spark_frames import arrow_to_rows
from atoll.interop.spark_on_demand import OnDemandPartitions, partition_table


def _df(spark):
    return spark.range(0, 900, numPartitions=3).selectExpr(
        "id", "cast(id % 7 as int) as k", "concat('u-', cast(id as string)) as name",
        "timestamp_millis(1767225600000 + id * 50) as ts")


def _expected(lo: int, hi: int) -> list:
    start = datetime.datetime(2026, 1, 1)  # the session time zone is UTC (conftest)
    return [{"id": i, "k": i % 7, "name": f"u-{i}", "ts": start + datetime.timedelta(milliseconds=50 * i)}
            for i in range(lo, hi)]


def test_the_hub_reads_a_computed_partition_from_its_executor(spark, ray_session):
    with OnDemandPartitions(_df(spark), prefetch=1, remote=True) as parts:
        hub, key = parts._box.target, parts._box.key
        executor, error = ray.get(hub.answer.remote(key, 0, 120))  # partition 0's job starts when prepared
        assert error is None
        client = parts.client
        stream = ray.get(hub.fetch.remote(f"raydp-executor-{executor}", parts.rdd_id, 0, client.schema_json,
                                          client.driver_agent_url))
        assert isinstance(stream, pa.Buffer)  # as it came from the executor: not read into a table in the hub
        table = partition_table(stream)
        assert table.schema == parts.schema
        assert arrow_to_rows(table, parts.timezone) == _expected(0, 300)


def test_a_ray_islands_client_gets_every_partition_through_the_hub_and_no_task(spark, ray_session, monkeypatch):
    def no_task():
        raise AssertionError("a fetch task was started")

    monkeypatch.setattr(spark_on_demand, "_fetch_task", no_task)
    with OnDemandPartitions(_df(spark), prefetch=2, remote=True) as parts:
        rows = [r for table in parts.client.tables() for r in arrow_to_rows(table, parts.timezone)]
    assert rows == _expected(0, 900)
