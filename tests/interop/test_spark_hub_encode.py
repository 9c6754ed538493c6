"""On a one-node Ray, to_spark's tables are encoded for Spark's reader by the driver's from_spark hub actor (no
task, so no worker process to start when the stream ends); without a hub, by Ray tasks. Same DataFrame either
way, and a mismatch is named at its table's position."""
from __future__ import annotations

import pyarrow as pa
import pytest
import ray

from atoll.interop import spark_frames, spark_on_demand
from atoll.interop.errors import SchemaMismatchError
from atoll.interop.spark_frames import arrow_refs_to_spark, release_frame
from atoll.interop.spark_schema import to_arrow_schema

SCHEMA = to_arrow_schema("id bigint, name string, at timestamp")


def _tables():
    import datetime

    at = datetime.datetime(2026, 1, 1, 12, 30, tzinfo=datetime.timezone.utc)
    return [pa.table({"id": list(range(10 * i, 10 * i + i + 1)), "name": [f"t{i}"] * (i + 1),
                      "at": [at] * (i + 1)}, schema=SCHEMA) for i in range(5)]


def _partitions(df) -> list:
    """Each Spark partition's rows; timestamps as epoch seconds (PySpark gives naive local times)."""
    return df.rdd.glom().map(lambda rows: [(r["id"], r["name"], r["at"].timestamp()) for r in rows]).collect()


def _expected(tables) -> list:
    return [[(r["id"], r["name"], r["at"].timestamp()) for r in t.to_pylist()] for t in tables]


def _check_each_table_is_a_partition() -> list:
    """Encode ``_tables()`` into a DataFrame and check it holds each table as one partition; the tables."""
    tables = _tables()
    df = arrow_refs_to_spark([ray.put(t) for t in tables], SCHEMA)
    try:
        assert _partitions(df) == _expected(tables)
    finally:
        release_frame(df)
    return tables


def _no_task():
    raise AssertionError("an encoding task was started")


def test_the_hub_encodes_when_there_is_one(spark, monkeypatch):
    spark_on_demand.start_hub()
    assert spark_on_demand.running_hub() is not None
    monkeypatch.setattr(spark_frames, "_encoder", _no_task)
    tables = _check_each_table_is_a_partition()
    good, bad = tables[0], pa.table({"id": ["1"], "name": ["a"], "at": tables[0]["at"][:1]})
    with pytest.raises(SchemaMismatchError) as info:
        arrow_refs_to_spark([ray.put(t) for t in (good, good, bad, good, bad)], SCHEMA)
    assert (info.value.column, info.value.element_index) == ("id", 2)


def test_without_a_hub_tasks_encode(spark):
    spark_on_demand.stop_hub()
    try:
        assert spark_on_demand.running_hub() is None
        _check_each_table_is_a_partition()
    finally:
        spark_on_demand.start_hub()
