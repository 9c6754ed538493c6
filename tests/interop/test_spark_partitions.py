"""atoll.interop.spark_partitions: a DataFrame prepared once, its partitions fetched into Ray on demand."""
from __future__ import annotations

import pickle
import sys

import pyarrow as pa
import pytest
import ray
import ray.cloudpickle
from pyspark.storagelevel import StorageLevel

from atoll.errors import IllegalStateError
from atoll.interop.spark_frames import arrow_to_rows
from atoll.interop.spark_partitions import PartitionFetcher, SparkPartitions
from atoll.interop.spark_schema import to_arrow_schema

from .conftest import ALL_TYPES_DDL

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray workers cannot import this test module


def persisted(spark, rdd_id: int) -> bool:
    return rdd_id in spark.sparkContext._jsc.getPersistentRDDs()


def test_every_type_arrives_with_the_schema_spark_writes(spark, all_types_df):
    with SparkPartitions(all_types_df) as parts:
        assert parts.num_partitions == 2
        assert parts.schema == to_arrow_schema(ALL_TYPES_DDL)  # session time zone is UTC here
        tables = [ray.get(parts.fetch(i)) for i in range(parts.num_partitions)]
    for table in tables:
        assert isinstance(table, pa.Table)
        assert table.schema == parts.schema
        assert table.schema.metadata is None
    rows = sorted((r for t in tables for r in arrow_to_rows(t)), key=lambda r: r["id"])
    assert rows == sorted((r.asDict(recursive=True) for r in all_types_df.collect()), key=lambda r: r["id"])


def test_timestamps_come_in_the_session_time_zone(spark):
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        df = spark.sql("select timestamp'2024-06-01 12:00:00' as ts, array(timestamp'2024-06-01 12:00:00') as a")
        with SparkPartitions(df) as parts:
            table = ray.get(parts.fetch(0))
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
    assert parts.timezone == "America/New_York"
    assert parts.schema.field("ts").type == pa.timestamp("us", tz="America/New_York")
    assert table.schema == parts.schema
    assert parts.schema.field("a").type.value_type == pa.timestamp("us", tz="America/New_York")
    # the literal was read in New York time
    assert table.column("ts")[0].as_py().isoformat() == "2024-06-01T12:00:00-04:00"


def test_many_partitions_fetched_out_of_order(spark):
    df = spark.range(0, 2000, numPartitions=16).selectExpr("id", "spark_partition_id() as pid")
    with SparkPartitions(df) as parts:
        assert parts.num_partitions == 16
        order = [11, 3, 15, 0, 7, 12, 1, 9, 14, 4, 6, 10, 2, 13, 8, 5]
        # one at a time, as a stream fetches on demand (and one Ray worker serves them all)
        tables = {i: ray.get(parts.fetch(i)) for i in order}
        assert ray.get(parts.fetch(11)).equals(tables[11])
    ids = []
    for i, table in tables.items():
        assert table.num_rows == 125
        assert set(table.column("pid").to_pylist()) == {i}
        ids.extend(table.column("id").to_pylist())
    assert sorted(ids) == list(range(2000))


def test_dataframe_without_partitions_keeps_its_schema(spark):
    df = spark.sql("select id, cast(id as string) as name, array(id) as a from range(0)")
    with SparkPartitions(df) as parts:
        assert parts.num_partitions == 0
        assert parts.fetch_all() == []
        assert parts.schema == pa.schema([pa.field("id", pa.int64(), nullable=False),
                                          pa.field("name", pa.string(), nullable=False),
                                          pa.field("a", pa.list_(pa.field("element", pa.int64(), nullable=False)),
                                                   nullable=False)])
        with pytest.raises(IndexError, match="partition 0 out of range"):
            parts.fetch(0)


def test_empty_partitions_give_empty_tables_with_the_schema(spark):
    df = spark.createDataFrame([], ALL_TYPES_DDL)
    with SparkPartitions(df) as parts:
        assert parts.num_partitions >= 1
        for i in range(parts.num_partitions):
            table = ray.get(parts.fetch(i))
            assert table.num_rows == 0
            assert table.schema == parts.schema == to_arrow_schema(ALL_TYPES_DDL)


def test_some_partitions_empty_after_a_filter(spark):
    df = spark.range(0, 100, numPartitions=4).where("id < 10 or id >= 75")
    with SparkPartitions(df) as parts:
        counts = [ray.get(parts.fetch(i)).num_rows for i in range(parts.num_partitions)]
    assert counts == [10, 0, 0, 25]


def test_release_unpersists_and_is_idempotent(spark):
    parts = SparkPartitions(spark.range(0, 10, numPartitions=2))
    assert not parts.released and persisted(spark, parts.rdd_id)
    first = parts.fetch(0)
    assert ray.get(first).num_rows == 5
    parts.release()
    assert parts.released and not persisted(spark, parts.rdd_id)
    parts.release()
    assert ray.get(first).num_rows == 5  # what was fetched stays
    with pytest.raises(IllegalStateError, match="released"):
        parts.fetch(1)
    with pytest.raises(IllegalStateError, match="released"):
        parts.fetcher
    assert "released" in repr(parts)


def test_context_manager_releases_even_on_error(spark):
    with pytest.raises(KeyError):
        with SparkPartitions(spark.range(3)) as parts:
            rdd_id = parts.rdd_id
            assert persisted(spark, rdd_id)
            raise KeyError("boom")
    assert parts.released and not persisted(spark, rdd_id)


@ray.remote(num_cpus=0)
def rows_in_partitions(fetcher: PartitionFetcher, order) -> list:
    return [ray.get(fetcher.fetch(i)).num_rows for i in order]


def test_fetcher_is_plain_data_usable_from_another_ray_worker(spark):
    with SparkPartitions(spark.range(0, 30, numPartitions=3)) as parts:
        fetcher = pickle.loads(pickle.dumps(parts.fetcher))
        assert fetcher == parts.fetcher and fetcher.num_partitions == 3 and fetcher.schema == parts.schema
        assert ray.get(rows_in_partitions.remote(fetcher, [2, 0, 1])) == [10, 10, 10]


def test_memory_only_storage_level(spark):
    with SparkPartitions(spark.range(0, 10, numPartitions=2), storage_level=StorageLevel.MEMORY_ONLY) as parts:
        assert [t.num_rows for t in ray.get(parts.fetch_all())] == [5, 5]


def test_bad_arguments(spark):
    with pytest.raises(TypeError, match="pyspark DataFrame"):
        SparkPartitions([1, 2])
    df = spark.range(1)
    with pytest.raises(TypeError, match="storage_level"):
        SparkPartitions(df, storage_level="MEMORY")
    with pytest.raises(ValueError, match="fetch_num_cpus"):
        SparkPartitions(df, fetch_num_cpus=-1)
    with SparkPartitions(df) as parts:
        with pytest.raises(TypeError, match="must be an int"):
            parts.fetch("0")
        with pytest.raises(IndexError):
            parts.fetch(parts.num_partitions)
        with pytest.raises(IndexError):
            parts.fetch(-1)


def test_columns_with_empty_offsets_buffers_are_rebuilt_so_ray_can_pickle_them(ray_session):
    from atoll.interop.spark_partitions import _repair_offsets, _short_offsets

    # what Spark's Java Arrow writer produces for an empty map: zero-length keys with an empty offsets buffer
    keys = pa.Array.from_buffers(pa.string(), 0, [None, pa.py_buffer(b""), pa.py_buffer(b"")])
    empty_map = pa.MapArray.from_arrays(pa.array([0, 0], pa.int32()), keys, pa.array([], pa.int64()))
    table = pa.table({"m": empty_map, "x": [1]})
    assert _short_offsets(table.column("m").chunk(0)) and not _short_offsets(table.column("x").chunk(0))
    repaired = _repair_offsets(table)
    assert repaired.equals(table) and not _short_offsets(repaired.column("m").chunk(0))
    assert ray.get(ray.put(repaired)).equals(table)
