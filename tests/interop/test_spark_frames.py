"""atoll.interop.spark_frames: Arrow refs in Ray -> Spark DataFrames, and Arrow -> rows/pandas as PySpark gives them."""
from __future__ import annotations

import datetime as dt
import decimal
import gc

import pandas as pd
import pyarrow as pa
import pytest
import ray

from atoll.interop.errors import SchemaMismatchError
from atoll.interop.spark_frames import (arrow_refs_to_spark, arrow_to_pandas, arrow_to_rows, release_frame,
                                        retained_frames, slices)
from atoll.interop.spark_partitions import SparkPartitions
from atoll.interop.spark_schema import parse_ddl, to_arrow_schema

from .conftest import fresh_python


def by_id(rows):
    return sorted(rows, key=lambda r: r["id"])


def collected(df):
    return by_id(r.asDict(recursive=True) for r in df.collect())


def test_round_trip_spark_partitions_arrow_spark_keeps_every_type_and_null(spark, all_types_df):
    with SparkPartitions(all_types_df) as parts:
        refs = [parts.fetch(i) for i in range(parts.num_partitions)]
        back = arrow_refs_to_spark(refs, parts.schema)
    try:
        assert back.schema == all_types_df.schema
        assert back.rdd.getNumPartitions() == 2
        expected = collected(all_types_df)
        assert collected(back) == expected
        assert expected[0]["l"] == 2 ** 62 + 1  # no trip through float64
        assert expected[0]["m"] == {"k": 1, "z": None} and expected[1]["m"] == {}
        assert expected[2] == {"id": 3} | {k: None for k in expected[2] if k != "id"}
    finally:
        release_frame(back)


def test_arrow_to_rows_matches_row_as_dict(spark, all_types_df):
    with SparkPartitions(all_types_df) as parts:
        tables = [ray.get(parts.fetch(i)) for i in range(parts.num_partitions)]
    rows = by_id(r for t in tables for r in arrow_to_rows(t))
    assert rows == collected(all_types_df)
    first = rows[0]
    assert type(first["dec"]) is decimal.Decimal and type(first["bin"]) is bytearray
    assert first["ts"] == dt.datetime(2024, 1, 2, 3, 4, 5, 123456) and first["ts"].tzinfo is None
    assert first["nested"] == [{"k": "q", "v": {"w": [1, None]}}, None]
    assert arrow_to_rows(tables[0].to_batches()[0]) == arrow_to_rows(tables[0])


def test_arrow_to_rows_time_zone_of_timestamps():
    table = pa.table({"ts": pa.array([dt.datetime(2024, 6, 1, 16, 0, tzinfo=dt.timezone.utc)],
                                     pa.timestamp("us", tz="UTC"))})
    assert arrow_to_rows(table, timezone="America/New_York") == [{"ts": dt.datetime(2024, 6, 1, 12, 0)}]
    local = dt.datetime(2024, 6, 1, 16, 0, tzinfo=dt.timezone.utc).astimezone().replace(tzinfo=None)
    assert arrow_to_rows(table) == [{"ts": local}]



def _per_row(value: dt.datetime, zone: str) -> dt.datetime:
    from zoneinfo import ZoneInfo

    return value.astimezone(ZoneInfo(zone)).replace(tzinfo=None)


def test_arrow_to_rows_time_zone_conversion_keeps_fold_across_dst_changes():
    # the hours around New York's clock changes of 2024 (back on Nov 3, forward on Mar 10), every 7 minutes
    utc = dt.timezone.utc
    instants = [dt.datetime(2024, 11, 3, 4, 0, tzinfo=utc) + dt.timedelta(minutes=7 * i) for i in range(60)]
    instants += [dt.datetime(2024, 3, 10, 5, 0, tzinfo=utc) + dt.timedelta(minutes=7 * i) for i in range(60)]
    for unit in ("s", "ms", "us"):
        table = pa.table({"ts": pa.array(instants + [None], pa.timestamp(unit, tz="UTC"))})
        rows = arrow_to_rows(table, timezone="America/New_York")
        expected = [_per_row(v, "America/New_York") for v in instants] + [None]
        assert [r["ts"] for r in rows] == expected
        assert [r["ts"].fold for r in rows[:-1]] == [v.fold for v in expected[:-1]]
        assert sum(v.fold for v in expected[:-1]) == 8  # 01:04 .. 01:53 the second time
        assert all(r["ts"].tzinfo is None for r in rows[:-1])


def test_arrow_to_rows_zoned_timestamps_with_nulls_offsets_and_chunks_match_the_per_value_conversion():
    utc = dt.timezone.utc
    values = [dt.datetime(2024, 3, 31, 0, 30, tzinfo=utc) + dt.timedelta(minutes=37 * i) for i in range(40)]
    arr = pa.array([None if i % 7 == 3 else v for i, v in enumerate(values)], pa.timestamp("ms", tz="UTC"))
    column = pa.chunked_array([arr.slice(5, 20), arr.slice(25, 15)])  # two chunks, each at an offset
    rows = arrow_to_rows(pa.table({"ts": column}), timezone="Europe/Paris")
    expected = [None if v is None else _per_row(v, "Europe/Paris") for v in column.to_pylist()]
    assert None in expected and [r["ts"] for r in rows] == expected


def test_arrow_to_rows_of_zoned_timestamps_imports_no_pandas(tmp_path):
    """pyarrow imports pandas for a timestamp column's ``to_numpy()`` (~0.5 s in a fresh island process, on the way
    to a Spark source's first element): the conversion reads the values buffer instead. A fresh process reads an
    Arrow file (as an island gets a partition) and converts it."""
    path = str(tmp_path / "ts.arrow")
    table = pa.table({"ts": pa.array([0, 1_000, None, 1_767_225_600_000_000], pa.timestamp("us", tz="UTC")),
                      "n": pa.array([1, 2, 3, 4])})
    with pa.OSFile(path, "wb") as f, pa.ipc.new_file(f, table.schema) as writer:
        writer.write_table(table)
    code = ("import sys, pyarrow as pa\n"
            "from atoll.interop.spark_frames import arrow_to_rows\n"
            f"rows = arrow_to_rows(pa.ipc.open_file(pa.memory_map({path!r})).read_all(), timezone='Europe/Paris')\n"
            "print(len(rows), rows[2]['ts'], rows[3]['ts'], 'pandas' in sys.modules)\n")
    assert fresh_python(code).split() == ["4", "None", "2026-01-01", "01:00:00", "False"]


def test_arrow_to_rows_column_by_column_keeps_key_order_types_and_odd_tables():
    table = pa.table({"b": pa.array([1, None], pa.int64()), "a": pa.array(["x", "y"]),
                      "bin": pa.array([b"1", None], pa.binary()),
                      "m": pa.array([[("k", 1)], None], pa.map_(pa.string(), pa.int64())),
                      "ts": pa.array([0, 1_000_000], pa.timestamp("us", tz="Asia/Tokyo"))})
    rows = arrow_to_rows(table, timezone="Europe/Paris")
    assert rows == [{"b": 1, "a": "x", "bin": bytearray(b"1"), "m": {"k": 1}, "ts": dt.datetime(1970, 1, 1, 1, 0)},
                    {"b": None, "a": "y", "bin": None, "m": None, "ts": dt.datetime(1970, 1, 1, 1, 0, 1)}]
    assert [list(r) for r in rows] == [["b", "a", "bin", "m", "ts"]] * 2
    assert type(rows[0]["bin"]) is bytearray
    # duplicate names: as to_pylist (one key, the last column's value); no columns: an empty dict per row
    dup = pa.Table.from_arrays([pa.array([1, 2]), pa.array([3, 4])], names=["x", "x"])
    assert arrow_to_rows(dup) == dup.to_pylist() == [{"x": 3}, {"x": 4}]
    assert arrow_to_rows(pa.table({"a": [1, 2]}).select([])) == [{}, {}]
    assert arrow_to_rows(pa.table({"a": pa.array([], pa.int64())})) == []
    assert arrow_to_rows(pa.table({"t": pa.array([], pa.timestamp("us", tz="UTC"))}), timezone="UTC") == []
    far = pa.table({"t": pa.array([-62135596800, 253402300799], pa.timestamp("s", tz="UTC"))})  # years 1, 9999
    assert arrow_to_rows(far, timezone="UTC") == [{"t": dt.datetime(1, 1, 1)}, {"t": dt.datetime(9999, 12, 31, 23, 59, 59)}]
    # a zone Arrow does not know falls back to the per-value conversion (which fails the same way as before)
    from zoneinfo import ZoneInfoNotFoundError

    with pytest.raises(ZoneInfoNotFoundError):
        arrow_to_rows(pa.table({"ts": pa.array([0], pa.timestamp("us", tz="UTC"))}), timezone="Nowhere/Else")

def test_arrow_to_pandas_like_to_pandas():
    schema = to_arrow_schema("id bigint, day date, ts timestamp, attrs map<string, bigint>, tags array<string>")
    table = pa.Table.from_pylist([
        {"id": 1, "day": dt.date(2024, 1, 1), "ts": dt.datetime(2024, 6, 1, 16, 0, tzinfo=dt.timezone.utc),
         "attrs": [("a", 1)], "tags": ["x"]},
        {"id": None, "day": None, "ts": None, "attrs": None, "tags": None},
    ], schema=schema)
    frame = arrow_to_pandas(table, timezone="America/New_York")
    assert list(frame.columns) == ["id", "day", "ts", "attrs", "tags"]
    assert frame["day"].tolist() == [dt.date(2024, 1, 1), None]
    assert frame["ts"][0] == pd.Timestamp("2024-06-01 12:00:00") and frame["ts"].dt.tz is None
    assert pd.isna(frame["ts"][1])
    assert frame["attrs"].tolist() == [{"a": 1}, None]
    assert list(frame["tags"][0]) == ["x"]
    assert frame["id"].tolist()[0] == 1 and pd.isna(frame["id"][1])


def test_no_refs_give_an_empty_dataframe_with_the_schema(spark):
    df = arrow_refs_to_spark([], "id bigint not null, tags array<string>, m map<string, double>")
    assert df.schema == parse_ddl("id bigint not null, tags array<string>, m map<string, double>")
    assert df.count() == 0


def test_refs_to_empty_tables_and_many_refs(spark):
    schema = to_arrow_schema("id bigint, name string")
    tables = [pa.table({"id": [i, i + 100], "name": [str(i), None]}, schema=schema) for i in range(10)]
    tables.insert(3, schema.empty_table())
    refs = [ray.put(t) for t in tables]
    df = arrow_refs_to_spark(refs, schema)
    try:
        assert df.rdd.getNumPartitions() == 11
        rows = collected(df)
        assert len(rows) == 20 and rows[0] == {"id": 0, "name": "0"} and rows[-1] == {"id": 109, "name": None}
    finally:
        release_frame(df)


def test_refs_to_batches_row_lists_and_pandas_are_accepted(spark):
    ddl = "id bigint, name string"
    refs = [ray.put(pa.record_batch({"id": [1], "name": ["a"]})),
            ray.put([{"id": 2, "name": "b"}]),
            ray.put(pd.DataFrame({"id": [3], "name": ["c"]})),
            ray.put(pa.table({"name": pa.array(["d"], pa.large_string()), "id": [4]}))]
    df = arrow_refs_to_spark(refs, ddl)
    try:
        assert df.schema == parse_ddl(ddl)
        assert collected(df) == [{"id": i, "name": n} for i, n in zip(range(1, 5), "abcd")]
    finally:
        release_frame(df)


def test_a_mismatching_table_fails_naming_its_position(spark):
    schema = to_arrow_schema("id bigint, name string")
    refs = [ray.put(pa.table({"id": [1], "name": ["a"]})), ray.put(pa.table({"id": ["1"], "name": ["a"]}))]
    with pytest.raises(SchemaMismatchError) as info:
        arrow_refs_to_spark(refs, schema)
    err = info.value
    assert (err.column, err.expected, err.found, err.element_index) == ("id", "int64", "string", 1)
    assert str(err) == "element 1, column 'id': expected int64, found string"
    refs = [ray.put(pa.table({"id": [1, None], "name": ["a", "b"]}))]
    with pytest.raises(SchemaMismatchError, match=r"element 0, row 1, column 'id': expected int64 not null"):
        arrow_refs_to_spark(refs, "id bigint not null, name string")


def test_the_dataframe_keeps_its_data_until_released(spark):
    before = retained_frames()
    refs = [ray.put(pa.table({"x": list(range(i * 10, i * 10 + 10))})) for i in range(3)]
    df = arrow_refs_to_spark(refs, "x bigint")
    del refs
    gc.collect()
    assert retained_frames() == before + 1
    assert df.count() == 30
    assert df.selectExpr("sum(x)").first()[0] == sum(range(30))  # evaluated again, still there
    release_frame(df)
    release_frame(df)
    assert retained_frames() == before


def test_bad_arguments(spark):
    with pytest.raises(TypeError, match=r"refs\[1\] must be a ray.ObjectRef"):
        arrow_refs_to_spark([ray.put(pa.table({"x": [1]})), pa.table({"x": [1]})], "x bigint")
    with pytest.raises(ValueError, match="cannot parse schema"):
        arrow_refs_to_spark([], "x bigint,")
    with pytest.raises(TypeError):
        arrow_refs_to_spark([], 42)


def test_slices_cut_tables_without_copying():
    table = pa.table({"x": list(range(10))})
    pieces = list(slices(table, 4))
    assert [p.num_rows for p in pieces] == [4, 4, 2]
    assert pa.concat_tables(pieces).equals(table)
    assert list(slices(table, None)) == [table]
    assert list(slices(table, 10)) == [table]
    assert list(slices(table.slice(0, 0), 3)) == []
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="max_rows"):
            list(slices(table, bad))
