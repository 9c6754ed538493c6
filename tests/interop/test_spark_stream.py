"""Source.from_spark / Sink.to_spark / parquet / Ray Data edges, on both materializers, sharing one Spark session."""
from __future__ import annotations


import pandas as pd
import pyarrow as pa
import pytest
import ray

from atoll import Keep, Materializer, Sink, Source
from atoll.interop.errors import SchemaMismatchError
from atoll.testkit import TestSink, assert_all_stages_stopped

from .conftest import ALL_TYPES_DDL
from .interop_helpers import actors_still_alive


@pytest.fixture
def anymat(smat):
    yield smat
    assert_all_stages_stopped(smat, timeout=15.0)


def by_id(rows):
    return sorted(rows, key=lambda r: r["id"])


def collected(df):
    return by_id(r.asDict(recursive=True) for r in df.collect())


def plain(v):
    """A PySpark value with Rows turned into dicts, at any depth."""
    if hasattr(v, "asDict"):
        return {k: plain(x) for k, x in v.asDict().items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    return v


def numbers_df(spark, n, partitions):
    return spark.range(0, n, numPartitions=partitions).selectExpr(
        "id", "id * 2 as twice", "cast(id as string) as name", "cast(id % 7 as double) as k")


# ------------------------------------------------------------------------------------------------- from_spark
def test_from_spark_rows_are_what_collect_gives_for_every_type(spark, all_types_df, anymat):
    rows = Source.from_spark(all_types_df).run_with(Sink.seq(), anymat).result(120)
    assert by_id(rows) == collected(all_types_df)


def test_round_trip_of_every_type_through_an_island(spark, all_types_df, anymat):
    df = (Source.from_spark(all_types_df).island().map(lambda r: r)
          .run_with(Sink.to_spark(all_types_df.schema), anymat).result(120))
    assert df.schema == all_types_df.schema
    assert collected(df) == collected(all_types_df)


def test_round_trip_with_a_ddl_schema(spark, all_types_df, anymat):
    df = Source.from_spark(all_types_df).run_with(Sink.to_spark(ALL_TYPES_DDL), anymat).result(120)
    assert collected(df) == collected(all_types_df)


def test_arrow_batches_respect_max_rows_and_keep_the_data(spark, anymat):
    df = numbers_df(spark, 10_000, 3)
    batches = (Source.from_spark(df, as_="arrow", max_rows_per_batch=1000)
               .run_with(Sink.seq(), anymat).result(120))
    assert all(isinstance(b, pa.RecordBatch) and 0 < b.num_rows <= 1000 for b in batches)
    table = pa.Table.from_batches(batches)
    assert table.num_rows == 10_000
    assert sorted(table.column("id").to_pylist()) == list(range(10_000))
    assert table.schema.field("twice").type == pa.int64()


def test_pandas_frames_as_to_pandas_gives_them(spark, all_types_df, anymat):
    # (PySpark's own toPandas cannot hold the year-1 timestamp_ntz value: that column is left out)
    df = all_types_df.drop("ntz")
    frames = Source.from_spark(df, as_="pandas").run_with(Sink.seq(), anymat).result(120)
    assert all(isinstance(f, pd.DataFrame) for f in frames)
    got = pd.concat(frames).sort_values("id").reset_index(drop=True)
    want = df.toPandas().sort_values("id").reset_index(drop=True)
    assert list(got.columns) == list(want.columns)
    for column in want.columns:
        if column in ("arr", "st", "m", "nested"):  # lists and dicts (PySpark: lists, dicts and Rows)
            assert got[column].tolist() == [plain(v) for v in want[column]], column
        else:
            pd.testing.assert_series_equal(got[column], want[column], check_dtype=False, obj=column)


def test_empty_dataframe_gives_an_empty_stream(spark, anymat):
    df = spark.createDataFrame([], ALL_TYPES_DDL)
    assert Source.from_spark(df).run_with(Sink.seq(), anymat).result(120) == []
    assert Source.from_spark(df.limit(0), as_="arrow").run_with(Sink.seq(), anymat).result(120) == []


def test_many_rows_through_two_islands(spark, anymat):
    n = 200_000
    df = numbers_df(spark, n, 4)
    out = (Source.from_spark(df).map(lambda r: {**r, "twice": r["twice"] + 1}).island()
           .run_with(Sink.to_spark("id long, twice long, name string, k double"), anymat).result(300))
    stats = out.selectExpr("count(*) as n", "sum(twice) as s", "sum(cast(name as long)) as names").collect()[0]
    assert stats["n"] == n
    assert stats["s"] == sum(2 * i + 1 for i in range(n))
    assert stats["names"] == n * (n - 1) // 2


def test_from_spark_checks_its_arguments_when_built(spark):
    with pytest.raises(TypeError, match="from_spark: df must be a pyspark.sql.DataFrame"):
        Source.from_spark([1, 2])
    df = numbers_df(spark, 10, 1)
    with pytest.raises(ValueError, match="as_ must be one of"):
        Source.from_spark(df, as_="json")
    with pytest.raises(ValueError, match="max_rows_per_batch must be an int >= 1"):
        Source.from_spark(df, as_="arrow", max_rows_per_batch=0)


def test_cached_partitions_are_fetched_on_demand(spark, monkeypatch):
    """cache=True: with one element requested, only the first partitions are fetched: the rest waits for demand."""
    from atoll.interop import spark_partitions

    fetched = []
    real_fetch = spark_partitions.PartitionFetcher.fetch

    def counting_fetch(self, i):
        fetched.append(i)
        return real_fetch(self, i)

    monkeypatch.setattr(spark_partitions.PartitionFetcher, "fetch", counting_fetch)
    df = numbers_df(spark, 16_000, 16)
    m = Materializer.local()
    try:
        probe = Source.from_spark(df, max_rows_per_batch=100, cache=True).run_with(TestSink.probe(timeout=60), m)
        probe.request(1)
        assert probe.expect_next()["id"] in range(16_000)
        probe.expect_no_message(1.0)  # time for a source that reads ahead to show it
        assert len(fetched) <= 3, fetched
        rest = probe.to_strict(timeout=120)
        assert len(rest) == 16_000 - 1 and sorted(fetched) == list(range(16))
    finally:
        assert_all_stages_stopped(m, timeout=15.0)
        m.shutdown()


# ---------------------------------------------------------------------------------------------------- to_spark
def test_to_spark_accepts_rows_batches_and_frames_mixed(spark, anymat):
    from pyspark.sql import Row

    elems = [{"id": 1, "name": "a"}, Row(id=2, name="b"),
             pa.RecordBatch.from_pylist([{"id": 3, "name": "c"}, {"id": 4, "name": None}]),
             pd.DataFrame({"id": [5], "name": ["e"]}), {"id": 6, "name": "f"}]
    df = Source.from_iterable(elems).run_with(Sink.to_spark("id long, name string"), anymat).result(120)
    assert [(r.id, r.name) for r in df.orderBy("id").collect()] == [
        (1, "a"), (2, "b"), (3, "c"), (4, None), (5, "e"), (6, "f")]


def test_to_spark_fails_naming_column_types_and_element(spark, anymat):
    elems = [{"id": i, "name": str(i)} for i in range(10)]
    elems[7] = {"id": "seven", "name": "7"}
    fut = Source.from_iterable(elems).run_with(Sink.to_spark("id long, name string"), anymat)
    with pytest.raises(SchemaMismatchError) as info:
        fut.result(120)
    e = info.value
    assert (e.column, e.expected, e.element_index) == ("id", "int64", 7)
    assert "str" in e.found and "element 7" in str(e) and "'id'" in str(e)


def test_to_spark_cancels_upstream_on_a_mismatch(spark, anymat):
    up = (Source.from_iterable([{"a": 1}, {"a": 2.5}, {"a": 3}]).watch_termination(Keep.right)
          .to_mat(Sink.to_spark("a long"), Keep.both))
    done, fut = up.run(anymat)
    with pytest.raises(SchemaMismatchError, match="element 1, column 'a': expected int64, found float"):
        fut.result(120)
    done.result(60)  # upstream was cancelled, not failed: watch_termination completes


def test_inferred_schema_refuses_later_elements_that_differ(spark, anymat):
    elems = [pa.RecordBatch.from_pylist([{"x": 1}]), pa.RecordBatch.from_pylist([{"x": "one"}])]
    fut = Source.from_iterable(elems).run_with(Sink.to_spark(), anymat)
    with pytest.raises(SchemaMismatchError) as info:
        fut.result(120)
    assert info.value.column == "x" and info.value.element_index == 1


def test_inferred_schema_from_rows_and_missing_columns(spark, anymat):
    df = Source.from_iterable([{"x": 1, "y": "a"}, {"x": 2, "y": "b"}]).run_with(Sink.to_spark(), anymat).result(120)
    assert [tuple(r) for r in df.orderBy("x").collect()] == [(1, "a"), (2, "b")]
    fut = Source.from_iterable([{"x": 1, "y": "a"}, {"x": 2}]).run_with(Sink.to_spark("x long, y string"), anymat)
    with pytest.raises(SchemaMismatchError, match="element 1, column 'y'.*no such column"):
        fut.result(120)


def test_to_spark_of_an_empty_stream(spark, anymat):
    df = Source.empty().run_with(Sink.to_spark("id long, name string"), anymat).result(120)
    assert df.count() == 0 and df.schema.simpleString() == "struct<id:bigint,name:string>"
    df = Source.empty().run_with(Sink.to_spark(), anymat).result(120)
    assert df.count() == 0 and df.columns == []


def test_to_spark_fails_with_the_upstream_failure(spark, anymat):
    fut = Source.failed(KeyError("boom")).run_with(Sink.to_spark("a long"), anymat)
    with pytest.raises(KeyError, match="boom"):
        fut.result(120)


def test_to_spark_checks_its_schema_when_built():
    with pytest.raises(ValueError, match="Sink.to_spark: invalid schema 'id lon'"):
        Sink.to_spark("id lon")
    with pytest.raises(TypeError, match="Sink.to_spark: schema must be"):
        Sink.to_spark(42)


def test_to_spark_elements_of_unknown_kind_fail(spark, anymat):
    fut = Source.from_iterable([{"a": 1}, 5]).run_with(Sink.to_spark("a long"), anymat)
    with pytest.raises(SchemaMismatchError, match="element 1: expected a row dict.*found int"):
        fut.result(120)


def test_no_island_actor_is_left_after_to_spark(spark, ray_session):
    m = Materializer.ray(start_timeout=60)
    try:
        fut = (Source.range(0, 1000).map(lambda i: {"id": i}).island()
               .run_with(Sink.to_spark("id long"), m))
        actors = [i.actor for g in m.running_graphs() for i in g._islands]
        assert len(actors) == 2
        assert fut.result(120).count() == 1000
        assert actors_still_alive(actors) == []
    finally:
        m.shutdown()
    assert actors_still_alive(actors, include_warm=True) == []  # the warm ones stop with the materializer


# ------------------------------------------------------------------------------------------ parquet, Ray Data
def test_parquet_round_trip(tmp_path, anymat):
    path = str(tmp_path / "out.parquet")
    rows = [{"id": i, "name": f"n{i}", "x": i / 2} for i in range(5000)]
    n = Source.from_iterable(rows).run_with(Sink.to_parquet(path, "id long, name string, x double"), anymat)
    assert n.result(60) == 5000
    assert Source.from_parquet(path).run_with(Sink.seq(), anymat).result(60) == rows
    sizes = (Source.from_parquet(path, as_="arrow", max_rows_per_batch=2000).map(lambda b: b.num_rows)
             .run_with(Sink.seq(), anymat).result(60))
    assert sizes == [2000, 2000, 1000]
    names = Source.from_parquet(path, as_="pandas", columns=["name"]).run_with(Sink.seq(), anymat).result(60)
    assert list(pd.concat(names)["name"]) == [r["name"] for r in rows]


def test_parquet_sink_refuses_mismatches_and_missing_files(tmp_path, anymat):
    path = str(tmp_path / "bad.parquet")
    fut = Source.from_iterable([{"id": 1}, {"id": None}]).run_with(Sink.to_parquet(path, "id long not null"), anymat)
    with pytest.raises(SchemaMismatchError, match="element 1, column 'id'"):
        fut.result(60)
    fut = Source.from_parquet(str(tmp_path / "missing.parquet")).run_with(Sink.seq(), anymat)
    with pytest.raises(FileNotFoundError):
        fut.result(60)


def test_ray_dataset_edges(anymat):
    ds = ray.data.range(3000, override_num_blocks=3)
    got = Source.from_ray_dataset(ds).map(lambda r: r["id"]).run_with(Sink.seq(), anymat).result(120)
    assert sorted(got) == list(range(3000))
    out = (Source.range(0, 2500).map(lambda i: {"id": i, "sq": i * i}).island()
           .run_with(Sink.to_ray_dataset(), anymat).result(120))
    assert out.count() == 2500
    assert sorted(r["sq"] for r in out.take_all()) == [i * i for i in range(2500)]
    batches = Source.from_ray_dataset(out, as_="arrow").run_with(Sink.seq(), anymat).result(120)
    assert sum(b.num_rows for b in batches) == 2500


def test_from_spark_timestamp_column_feeds_event_time_windows_and_to_spark_takes_windows(spark, anymat):
    from atoll import Aggregate

    df = spark.range(0, 300, numPartitions=3).selectExpr(
        "id", "cast(id % 3 as int) as user", "timestamp_millis(1767225600000 + id * 1000) as ts")
    stats, windows = (Source.from_spark(df, timestamp_column="ts", max_out_of_orderness=0)
                      .tumbling_window(60_000, key=lambda r: r["user"], aggregate=Aggregate.count())
                      .island()
                      .to_mat(Sink.to_spark("key int, start long, end long, value long, timing string"), Keep.both)
                      .run(anymat))
    got = sorted((r.key, r.start, r.value, r.timing) for r in windows.result(60).collect())
    base = 1767225600000
    want = sorted((u, base + m * 60_000, sum(1 for i in range(m * 60, m * 60 + 60) if i < 300 and i % 3 == u),
                   "on_time") for u in range(3) for m in range(5))
    assert got == want
    assert stats.snapshot()["late_dropped"] == 0


def test_from_spark_timestamp_column_is_checked_when_built(spark):
    df = spark.range(0, 3).selectExpr("id", "timestamp_millis(id) as ts")
    with pytest.raises(ValueError, match="from_spark: timestamp_column 'nope'"):
        Source.from_spark(df, timestamp_column="nope")
    with pytest.raises(ValueError, match="as_='rows'"):
        Source.from_spark(df, as_="arrow", timestamp_column="ts")
