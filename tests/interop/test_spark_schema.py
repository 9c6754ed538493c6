"""atoll.interop.spark_schema: DDL parsing, Spark <-> Arrow schemas, and strict checks of data against a schema.

Only test_ddl_parser_agrees_with_spark needs a Spark session; everything else is pure Python/Arrow.
"""
from __future__ import annotations

import datetime as dt
import decimal
import pickle
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from pyspark.sql import Row
from pyspark.sql import types as T

from atoll.errors import StreamError
from atoll.interop.errors import SchemaMismatchError
from atoll.interop.spark_conform import check_table, conform, pandas_to_table, rows_to_table
from atoll.interop.spark_ddl import parse_ddl
from atoll.interop.spark_types import to_arrow_schema, to_spark_schema, with_timezone

from .conftest import fresh_python

ALL_TYPES_DDL = ("i int, l bigint not null, d double, f float, s string, b boolean, bin binary, "
                 "dec decimal(20,4), dt date, ts timestamp, ntz timestamp_ntz, "
                 "arr array<bigint>, st struct<x: bigint, y: string>, m map<string, bigint>, "
                 "nested array<struct<k: string, v: map<string, array<int>>>>")

ALL_TYPES_ARROW = pa.schema([
    pa.field("i", pa.int32()),
    pa.field("l", pa.int64(), nullable=False),
    pa.field("d", pa.float64()),
    pa.field("f", pa.float32()),
    pa.field("s", pa.string()),
    pa.field("b", pa.bool_()),
    pa.field("bin", pa.binary()),
    pa.field("dec", pa.decimal128(20, 4)),
    pa.field("dt", pa.date32()),
    pa.field("ts", pa.timestamp("us", tz="UTC")),
    pa.field("ntz", pa.timestamp("us")),
    pa.field("arr", pa.list_(pa.field("element", pa.int64()))),
    pa.field("st", pa.struct([pa.field("x", pa.int64()), pa.field("y", pa.string())])),
    pa.field("m", pa.map_(pa.string(), pa.int64())),
    pa.field("nested", pa.list_(pa.field("element", pa.struct([
        pa.field("k", pa.string()),
        pa.field("v", pa.map_(pa.string(), pa.list_(pa.field("element", pa.int32())))),
    ])))),
])

SIMPLE = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])


def mismatch(fn, *args, **kwargs) -> SchemaMismatchError:
    with pytest.raises(SchemaMismatchError) as info:
        fn(*args, **kwargs)
    return info.value


# ------------------------------------------------------------------------------------------------ DDL and schemas

def test_parse_ddl_simple_columns():
    assert parse_ddl("id long, name string") == T.StructType([
        T.StructField("id", T.LongType()), T.StructField("name", T.StringType())])


def test_parse_ddl_aliases_colons_case_quotes_not_null_and_comments():
    parsed = parse_ddl("`my col`: INT NOT NULL COMMENT 'the \\'id\\'', b BigInt, c DEC(5, 2), d varchar(10), "
                       "e struct<a:byte,`b c`:smallint>, f numeric, g timestamp_ltz, h void")
    assert [f.name for f in parsed] == ["my col", "b", "c", "d", "e", "f", "g", "h"]
    assert parsed["my col"].dataType == T.IntegerType() and parsed["my col"].nullable is False
    assert parsed["b"].dataType == T.LongType()
    assert parsed["c"].dataType == T.DecimalType(5, 2)
    assert parsed["d"].dataType == T.StringType()
    assert parsed["e"].dataType == T.StructType([T.StructField("a", T.ByteType()),
                                                 T.StructField("b c", T.ShortType())])
    assert parsed["f"].dataType == T.DecimalType(10, 0)
    assert parsed["g"].dataType == T.TimestampType()
    assert parsed["h"].dataType == T.NullType()


def test_parse_ddl_struct_wrapper_and_empty():
    assert parse_ddl("struct<a: int, b: array<string>>") == parse_ddl("a int, b array<string>")
    assert parse_ddl("  ") == T.StructType([])


@pytest.mark.parametrize("ddl, message", [
    ("a int,", "expected a column name, found the end"),
    ("a array<int", "expected '>', found the end"),
    ("a blob", "unknown type 'blob'"),
    ("a int, A string", "duplicate column 'A'"),
    ("a decimal(40, 2)", "out of range"),
    ("a map<int, boolean>>", "unexpected '>'"),
    ("a int not nul", "expected NULL after NOT"),
    ("a interval day", "interval types are not supported"),
    ("a int; b int", "unexpected character ';'"),
])
def test_parse_ddl_errors_name_the_problem(ddl, message):
    with pytest.raises(ValueError) as info:
        parse_ddl(ddl)
    assert message in str(info.value)
    assert repr(ddl) in str(info.value)


def test_parse_ddl_rejects_non_strings():
    with pytest.raises(TypeError):
        parse_ddl(42)


def test_ddl_parser_agrees_with_spark(spark):
    from pyspark.sql.types import _parse_datatype_string

    for ddl in [ALL_TYPES_DDL, "a: byte, b: decimal(  16 , 8   ) ", "A DOUBLE, `b c` STRING NOT NULL",
                "x array<map<string, struct<p: int, q: array<binary>>>>", "t timestamp, n timestamp_ntz"]:
        assert parse_ddl(ddl) == _parse_datatype_string(ddl), ddl


def test_to_arrow_schema_maps_every_spark_type():
    assert to_arrow_schema(ALL_TYPES_DDL) == ALL_TYPES_ARROW
    assert to_arrow_schema(parse_ddl(ALL_TYPES_DDL)) == ALL_TYPES_ARROW
    assert to_arrow_schema(ALL_TYPES_ARROW) is ALL_TYPES_ARROW


class _PointUDT(T.UserDefinedType):
    """A user-defined type stored as an array of doubles (what the mappings convert is its ``sqlType``)."""

    @classmethod
    def sqlType(cls):
        return T.ArrayType(T.DoubleType(), False)


SPARK_TYPES = [T.BooleanType(), T.ByteType(), T.ShortType(), T.IntegerType(), T.LongType(), T.FloatType(),
               T.DoubleType(), T.DecimalType(20, 4), T.DecimalType(), T.StringType(), T.BinaryType(), T.DateType(),
               T.TimestampType(), T.TimestampNTZType(), T.DayTimeIntervalType(), T.NullType(),
               T.ArrayType(T.LongType()), T.ArrayType(T.StringType(), False),
               T.MapType(T.StringType(), T.DoubleType()), T.MapType(T.IntegerType(), T.BinaryType(), False),
               T.StructType([T.StructField("x", T.LongType(), False), T.StructField("y", T.DateType())]),
               T.ArrayType(T.StructType([T.StructField("m", T.MapType(T.StringType(), T.TimestampType()))])),
               _PointUDT()]


def test_the_spark_to_arrow_mapping_is_pysparks_for_every_type():
    from pyspark.sql.pandas.types import to_arrow_type as pyspark_to_arrow_type

    from atoll.interop.spark_types import to_arrow_type

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # PySpark's LooseVersion
        for t in SPARK_TYPES:
            assert to_arrow_type(t) == pyspark_to_arrow_type(t), t
        for t in (T.YearMonthIntervalType(), T.ArrayType(T.YearMonthIntervalType())):
            with pytest.raises(TypeError):
                pyspark_to_arrow_type(t)
            with pytest.raises(TypeError, match="has no Arrow counterpart"):
                to_arrow_type(t)


def test_the_arrow_to_spark_mapping_is_pysparks_for_every_type_apart_from_naive_timestamps_and_nullability():
    from pyspark.sql.pandas.types import from_arrow_type

    arrow = [pa.bool_(), pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.float32(), pa.float64(),
             pa.decimal128(12, 3), pa.string(), pa.large_string(), pa.binary(), pa.large_binary(), pa.date32(),
             pa.timestamp("us", tz="UTC"), pa.timestamp("ms", tz="Asia/Tokyo"), pa.duration("us"), pa.null(),
             pa.dictionary(pa.int32(), pa.string()), pa.list_(pa.int64()), pa.map_(pa.string(), pa.float64()),
             pa.struct([pa.field("x", pa.int32()), pa.field("y", pa.list_(pa.date32()))])]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for t in arrow:
            expected = T.StructType([T.StructField("c", from_arrow_type(t))])
            assert to_spark_schema(pa.schema([pa.field("c", t)])) == expected, t
        # PySpark maps a naive timestamp to timestamp (ours: timestamp_ntz, Spark's own type for it)
        assert to_spark_schema(pa.schema([("c", pa.timestamp("us"))]))["c"].dataType == T.TimestampNTZType()
        for t in (pa.uint8(), pa.date64(), pa.time32("s")):
            with pytest.raises(TypeError):
                from_arrow_type(t)
            with pytest.raises(TypeError, match="has no Spark counterpart"):
                to_spark_schema(pa.schema([("c", t)]))


def test_the_type_mappings_do_not_import_setuptools():
    """PySpark's mappings import ``distutils.version``, i.e. setuptools (~0.2 s) where setuptools is installed."""
    code = ("import sys\n"
            "from atoll.interop.spark_types import to_arrow_schema, to_spark_schema\n"
            f"to_spark_schema(to_arrow_schema({ALL_TYPES_DDL!r}, timezone='UTC'))\n"
            "print(sorted(m for m in ('distutils', 'setuptools') if m in sys.modules))\n")
    assert fresh_python(code).strip() == "[]"


def test_to_arrow_schema_keeps_nullability_of_elements_values_and_fields():
    st = T.StructType([
        T.StructField("a", T.ArrayType(T.LongType(), containsNull=False), nullable=False),
        T.StructField("m", T.MapType(T.StringType(), T.LongType(), valueContainsNull=False)),
        T.StructField("s", T.StructType([T.StructField("x", T.LongType(), nullable=False)])),
    ])
    schema = to_arrow_schema(st)
    assert schema.field("a").nullable is False
    assert schema.field("a").type.value_field.nullable is False
    assert schema.field("m").type.item_field.nullable is False
    assert schema.field("s").type.field("x").nullable is False
    assert to_spark_schema(schema) == st


def test_to_arrow_schema_shows_timestamps_in_the_given_time_zone():
    schema = to_arrow_schema("ts timestamp, ntz timestamp_ntz, a array<timestamp>, m map<string, timestamp>",
                             timezone="Europe/Paris")
    assert schema.field("ts").type == pa.timestamp("us", tz="Europe/Paris")
    assert schema.field("ntz").type == pa.timestamp("us")
    assert schema.field("a").type.value_type == pa.timestamp("us", tz="Europe/Paris")
    assert schema.field("m").type.item_type == pa.timestamp("us", tz="Europe/Paris")
    in_utc = to_arrow_schema("ts timestamp, ntz timestamp_ntz, a array<timestamp>, m map<string, timestamp>")
    assert with_timezone(schema, "UTC") == in_utc
    assert to_arrow_schema(schema) is schema
    assert to_arrow_schema(schema, timezone="UTC") == in_utc


def test_to_spark_schema_from_arrow_ddl_and_struct():
    st = parse_ddl(ALL_TYPES_DDL)
    assert to_spark_schema(ALL_TYPES_ARROW) == st
    assert to_spark_schema(ALL_TYPES_DDL) == st
    assert to_spark_schema(pa.schema([("s", pa.large_string()), ("b", pa.large_binary())])) == parse_ddl(
        "s string, b binary")
    with pytest.raises(TypeError):
        to_spark_schema(42)
    with pytest.raises(TypeError):
        to_arrow_schema([("a", pa.int64())])


# ------------------------------------------------------------------------------------------------ Arrow tables

def test_check_table_accepts_a_matching_table_and_record_batch():
    table = pa.table({"id": pa.array([1, 2]), "name": pa.array(["a", None])},
                     schema=SIMPLE.with_metadata({b"k": b"v"}))
    out = check_table(table, SIMPLE)
    assert out.schema == SIMPLE and out.schema.metadata is None
    assert out.equals(table.replace_schema_metadata())
    assert check_table(table.to_batches()[0], SIMPLE).equals(out)


def test_check_table_reorders_columns_by_name_and_normalizes_layouts():
    table = pa.table({"name": pa.array(["a", "b"], pa.large_string()), "id": pa.array([1, 2])})
    out = check_table(table, SIMPLE)
    assert out.schema == SIMPLE
    assert out.to_pylist() == [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]


def test_check_table_accepts_arrow_list_item_names_dictionary_and_all_null_columns():
    schema = to_arrow_schema("tags array<string>, cat string, nothing bigint")
    table = pa.table({"tags": pa.array([["a"], None]),                     # list<item: string>
                      "cat": pa.array(["x", "y"]).dictionary_encode(),
                      "nothing": pa.array([None, None])})                  # Arrow's null type
    out = check_table(table, schema)
    assert out.schema == schema
    assert out.to_pylist() == [{"tags": ["a"], "cat": "x", "nothing": None},
                               {"tags": None, "cat": "y", "nothing": None}]


def test_check_table_wrong_type_names_column_expected_found_and_element():
    table = pa.table({"id": pa.array(["1"]), "name": pa.array(["a"])})
    err = mismatch(check_table, table, SIMPLE, element_index=3)
    assert (err.column, err.expected, err.found, err.element_index) == ("id", "int64", "string", 3)
    assert str(err) == "element 3, column 'id': expected int64, found string"
    err = mismatch(check_table, pa.table({"id": [1], "name": [7]}), SIMPLE, element_index=0)
    assert str(err) == "element 0, column 'name': expected string, found int64"


def test_check_table_does_not_widen_or_narrow_numbers():
    err = mismatch(check_table, pa.table({"id": pa.array([1], pa.int32()), "name": ["a"]}), SIMPLE)
    assert (err.expected, err.found) == ("int64", "int32")
    err = mismatch(check_table, pa.table({"x": pa.array([1.0])}), pa.schema([("x", pa.int64())]))
    assert (err.expected, err.found) == ("int64", "double")


def test_check_table_extra_missing_and_duplicate_columns_fail():
    err = mismatch(check_table, pa.table({"id": [1], "name": ["a"], "extra": [1]}), SIMPLE, element_index=1)
    assert err.column == "extra" and err.expected == "no such column" and err.found == "int64"
    assert "element 1, column 'extra'" in str(err)
    err = mismatch(check_table, pa.table({"id": [1]}), SIMPLE, element_index=2)
    assert str(err) == "element 2, column 'name': expected string, found no such column"
    dup = pa.Table.from_arrays([pa.array([1]), pa.array([2])], names=["id", "id"])
    err = mismatch(check_table, dup, SIMPLE)
    assert err.column == "id" and err.found == "2 columns"


def test_check_table_null_in_non_nullable_column_names_the_row():
    table = pa.Table.from_batches([pa.record_batch({"id": [1, 2], "name": ["a", "b"]}),
                                   pa.record_batch({"id": [3, None], "name": ["c", "d"]})])
    err = mismatch(check_table, table, SIMPLE, element_index=5)
    assert (err.column, err.expected, err.found, err.row, err.element_index) == ("id", "int64 not null", "null", 3, 5)
    assert str(err) == "element 5, row 3, column 'id': expected int64 not null, found null"


def test_check_table_null_in_non_nullable_nested_fields():
    st = T.StructType([
        T.StructField("a", T.ArrayType(T.LongType(), containsNull=False)),
        T.StructField("m", T.MapType(T.StringType(), T.LongType(), valueContainsNull=False)),
        T.StructField("s", T.StructType([T.StructField("x", T.LongType(), nullable=False)])),
    ])
    expected = to_arrow_schema(st)
    good = pa.table({"a": pa.array([[1], None, [2, 3]]),
                     "m": pa.array([[("k", 1)], None, []], pa.map_(pa.string(), pa.int64())),
                     "s": pa.array([{"x": 1}, None, {"x": 3}])})
    assert check_table(good, expected).schema == expected  # a null struct may have null children
    bad_list = good.set_column(0, "a", pa.array([[1], None, [2, None]]))
    err = mismatch(check_table, bad_list, expected)
    assert (err.column, err.row, err.found) == ("a.element", 2, "null")
    bad_map = good.set_column(1, "m", pa.array([[("k", 1)], None, [("z", None)]], pa.map_(pa.string(), pa.int64())))
    err = mismatch(check_table, bad_map, expected)
    assert (err.column, err.row, err.expected) == ("m.value", 2, "int64 not null")
    bad_struct = good.set_column(2, "s", pa.array([{"x": 1}, None, {"x": None}]))
    err = mismatch(check_table, bad_struct, expected, element_index=9)
    assert str(err) == "element 9, row 2, column 's.x': expected int64 not null, found null"


def test_check_table_nested_type_mismatch_names_the_path():
    expected = to_arrow_schema("s struct<x: bigint, y: array<string>>")
    table = pa.table({"s": pa.array([{"x": 1, "y": [1, 2]}])})
    err = mismatch(check_table, table, expected)
    assert (err.column, err.expected, err.found) == ("s.y.element", "string", "int64")
    table = pa.table({"s": pa.array([{"y": ["a"], "x": 1}])})
    err = mismatch(check_table, table, expected)
    assert err.column == "s" and "struct fields ['y', 'x'] instead of ['x', 'y']" in str(err)


def test_check_table_timestamps_zone_awareness_and_units():
    expected = to_arrow_schema("ts timestamp")
    instant = dt.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=dt.timezone.utc)
    paris = pa.table({"ts": pa.array([instant], pa.timestamp("us", tz="Europe/Paris"))})
    assert check_table(paris, expected).column("ts").to_pylist() == [instant]
    naive = pa.table({"ts": pa.array([instant.replace(tzinfo=None)], pa.timestamp("us"))})
    err = mismatch(check_table, naive, expected)
    assert (err.expected, err.found) == ("timestamp[us, tz=UTC]", "timestamp[us]")
    assert "not an instant" in str(err)
    nanos = pa.table({"ts": pa.array([1_000, 2_000], pa.timestamp("ns", tz="UTC"))})
    assert check_table(nanos, expected).column("ts").to_pylist()[1] == dt.datetime(
        1970, 1, 1, 0, 0, 0, 2, tzinfo=dt.timezone.utc)
    lossy = pa.table({"ts": pa.array([1_001], pa.timestamp("ns", tz="UTC"))})
    err = mismatch(check_table, lossy, expected)
    assert err.column == "ts" and "cannot convert without changing values" in str(err)


def test_check_table_rejects_non_arrow_input():
    err = mismatch(check_table, [{"id": 1}], SIMPLE, element_index=4)
    assert err.element_index == 4 and err.found == "list"


# ------------------------------------------------------------------------------------------------ Python rows

ROW = {"i": 1, "l": 2 ** 62 + 1, "d": 1.5, "f": 0.25, "s": "x", "b": True, "bin": b"\x00\xff",
       "dec": decimal.Decimal("12.3456"), "dt": dt.date(2024, 2, 29),
       "ts": dt.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=dt.timezone.utc),
       "ntz": dt.datetime(2024, 1, 2, 3, 4, 5), "arr": [1, None, 3], "st": {"x": 1, "y": None},
       "m": {"a": 1, "b": None}, "nested": [{"k": "q", "v": {"z": [1, None]}}]}
NULL_ROW = {k: None for k in ROW} | {"l": 0}


def test_rows_to_table_builds_every_type_exactly():
    table = rows_to_table([ROW, NULL_ROW], ALL_TYPES_ARROW)
    assert table.schema == ALL_TYPES_ARROW
    first, second = table.to_pylist(maps_as_pydicts="strict")
    assert first == ROW
    assert second == NULL_ROW


def test_rows_to_table_by_columns_equals_the_row_path_for_every_type(monkeypatch):
    """Plain dict rows go column by column (flat columns of accepted types checked at C speed, the others through
    the row path's converters value by value): the same table as the row path, for every type, nulls, and naive,
    UTC and other zones' datetimes."""
    from atoll.interop import spark_conform

    zone = dt.timezone(dt.timedelta(hours=-5))
    rows = [ROW, NULL_ROW,
            dict(ROW, ts=dt.datetime(2024, 6, 1, 12, 0, 0), dt=dt.date(1999, 12, 31)),
            dict(ROW, ts=dt.datetime(2024, 6, 1, 12, 0, 0, tzinfo=zone), dec=decimal.Decimal("-0.5"))]
    by_columns = spark_conform._fast_rows_to_table(rows, ALL_TYPES_ARROW)
    assert by_columns is not None
    monkeypatch.setattr(spark_conform, "_fast_rows_to_table", lambda rows, schema: None)
    by_rows = rows_to_table(rows, ALL_TYPES_ARROW)
    assert by_columns.equals(by_rows)
    assert by_columns.schema == by_rows.schema == ALL_TYPES_ARROW


def test_rows_to_table_accepts_pyspark_rows_tuples_for_structs_and_naive_local_timestamps():
    schema = to_arrow_schema("id bigint, p struct<x: bigint, y: string>, ts timestamp")
    naive = dt.datetime(2024, 6, 1, 12, 0, 0)
    table = rows_to_table([Row(id=1, p=Row(x=1, y="a"), ts=naive), {"id": 2, "p": (2, "b"), "ts": None}], schema)
    assert table.column("p").to_pylist() == [{"x": 1, "y": "a"}, {"x": 2, "y": "b"}]
    # a naive datetime is local time, as PySpark reads it
    assert table.column("ts")[0].as_py() == naive.astimezone(dt.timezone.utc)


@pytest.mark.parametrize("column, value, expected, found", [
    ("s", 5, "string", "int 5"),
    ("i", "5", "int32", "str '5'"),
    ("i", True, "int32", "bool True"),
    ("i", 2 ** 31, "int32", "int 2147483648"),
    ("d", 1, "double", "int 1"),
    ("i", 1.0, "int32", "float 1.0"),
    ("b", 1, "bool", "int 1"),
    ("bin", "text", "binary", "str 'text'"),
    ("dec", 1.5, "decimal128(20, 4)", "float 1.5"),
    ("dec", decimal.Decimal("1.23456"), "decimal128(20, 4)", "Decimal Decimal('1.23456')"),
    ("dt", dt.datetime(2024, 1, 1), "date32[day]", "datetime datetime.datetime(2024, 1, 1, 0, 0)"),
    ("ts", "2024-01-01", "timestamp[us, tz=UTC]", "str '2024-01-01'"),
    ("ntz", dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc), "timestamp[us]", None),
    ("arr", "abc", "list<element: int64>", "str 'abc'"),
    ("m", [("a", 1)], "map<string, int64>", "list [('a', 1)]"),
])
def test_rows_to_table_refuses_values_of_another_type(column, value, expected, found):
    rows = [ROW, dict(ROW, **{column: value})]
    err = mismatch(rows_to_table, rows, ALL_TYPES_ARROW, element_index=7)
    assert (err.column, err.expected, err.row, err.element_index) == (column, expected, 1, 7)
    if found is not None:
        assert err.found == found
    assert str(err).startswith(f"element 7, row 1, column '{column}': expected {expected}, found ")


@pytest.mark.parametrize("column, value, path, expected, found", [
    ("arr", [1, "2"], "arr.element", "int64", "str '2'"),
    ("st", {"x": "1", "y": None}, "st.x", "int64", "str '1'"),
    ("st", {"x": 1}, "st.y", "string", "no such field"),
    ("st", {"x": 1, "y": None, "z": 0}, "st.z", "no such field", "int 0"),
    ("m", {None: 1}, "m.key", "string not null", "null"),
    ("m", {"a": "1"}, "m.value", "int64", "str '1'"),
    ("nested", [{"k": "q", "v": {"z": [1, 2.5]}}], "nested.element.v.value.element", "int32", "float 2.5"),
])
def test_rows_to_table_nested_mismatches_name_the_path(column, value, path, expected, found):
    err = mismatch(rows_to_table, [dict(ROW, **{column: value})], ALL_TYPES_ARROW)
    assert (err.column, err.expected, err.found, err.row) == (path, expected, found, 0)


def test_rows_to_table_missing_extra_and_null_columns():
    err = mismatch(rows_to_table, [{"id": 1}], SIMPLE, element_index=0)
    assert str(err) == "element 0, row 0, column 'name': expected string, found no such column"
    err = mismatch(rows_to_table, [{"id": 1, "name": "a", "age": 3}], SIMPLE)
    assert (err.column, err.expected, err.found) == ("age", "no such column", "int 3")
    err = mismatch(rows_to_table, [{"id": 1, "name": "a"}, {"id": None, "name": "b"}], SIMPLE, element_index=2)
    assert str(err) == "element 2, row 1, column 'id': expected int64 not null, found null"
    err = mismatch(rows_to_table, [5], SIMPLE)
    assert err.column is None and err.found == "int 5"


def test_conform_dispatches_on_the_kind_of_data():
    table = pa.table({"id": [1], "name": ["a"]})
    expected = check_table(table, SIMPLE)
    assert conform(table, SIMPLE).equals(expected)
    assert conform(table.to_batches()[0], SIMPLE).equals(expected)
    assert conform({"id": 1, "name": "a"}, SIMPLE).equals(expected)
    assert conform(Row(id=1, name="a"), SIMPLE).equals(expected)
    assert conform([{"id": 1, "name": "a"}], SIMPLE).equals(expected)
    assert conform(pd.DataFrame({"id": [1], "name": ["a"]}), SIMPLE).equals(expected)
    assert conform([], SIMPLE).num_rows == 0
    assert conform({"id": 1, "name": "a"}, "id bigint not null, name string").equals(expected)
    err = mismatch(conform, {"id": "1", "name": "a"}, SIMPLE, element_index=12)
    assert str(err) == "element 12, column 'id': expected int64, found str '1'"  # one row: no row number
    err = mismatch(conform, 42, SIMPLE, element_index=1)
    assert err.found == "int" and err.element_index == 1


# ------------------------------------------------------------------------------------------------ pandas

def test_pandas_to_table_typed_and_object_columns():
    schema = to_arrow_schema("id bigint, name string, score double, ts timestamp, tags array<string>, "
                             "attrs map<string, bigint>, day date, amount decimal(10,2)")
    frame = pd.DataFrame({
        "id": pd.array([1, None], dtype="Int64"),
        "name": ["a", None],
        "score": [1.5, float("nan")],
        "ts": pd.to_datetime(["2024-01-01T00:00:00Z", None], utc=True),
        "tags": [["x", "y"], None],
        "attrs": [{"k": 1}, float("nan")],
        "day": [dt.date(2024, 1, 1), None],
        "amount": [decimal.Decimal("1.50"), None],
    }, index=[10, 20])
    table = pandas_to_table(frame, schema)
    assert table.schema == schema
    assert table.to_pylist(maps_as_pydicts="strict") == [
        {"id": 1, "name": "a", "score": 1.5, "ts": dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc),
         "tags": ["x", "y"], "attrs": {"k": 1}, "day": dt.date(2024, 1, 1), "amount": decimal.Decimal("1.50")},
        {"id": None, "name": None, "score": None, "ts": None, "tags": None, "attrs": None, "day": None,
         "amount": None},
    ]


def test_pandas_to_table_mismatches():
    schema = to_arrow_schema("id bigint, name string")
    err = mismatch(pandas_to_table, pd.DataFrame({"id": [1.0, float("nan")], "name": ["a", "b"]}), schema,
                   element_index=4)
    assert str(err) == "element 4, column 'id': expected int64, found double"
    err = mismatch(pandas_to_table, pd.DataFrame({"id": [1], "name": [2]}), schema)
    assert (err.column, err.expected, err.found) == ("name", "string", "int64")
    err = mismatch(pandas_to_table, pd.DataFrame({"id": [1], "name": ["a"], "x": [1]}), schema)
    assert err.column == "x" and err.expected == "no such column"
    err = mismatch(pandas_to_table, pd.DataFrame({"id": [1]}), schema)
    assert err.column == "name" and err.found == "no such column"
    err = mismatch(pandas_to_table, pd.DataFrame({"id": [1, 2], "name": ["a", np.int64(3)]}, dtype=object), schema)
    assert (err.column, err.row, err.found) == ("name", 1, "int64 np.int64(3)")


# ------------------------------------------------------------------------------------------------ the error

def test_schema_mismatch_error_is_a_stream_error_and_pickles():
    err = SchemaMismatchError("a.b", "int64 not null", "null", element_index=3, row=2, detail="why")
    assert isinstance(err, StreamError)
    copy = pickle.loads(pickle.dumps(err))
    assert type(copy) is SchemaMismatchError and str(copy) == str(err)
    assert (copy.column, copy.expected, copy.found, copy.element_index, copy.row, copy.detail) == (
        "a.b", "int64 not null", "null", 3, 2, "why")
    assert str(err) == "element 3, row 2, column 'a.b': expected int64 not null, found null (why)"
    assert str(err.with_element_index(8)).startswith("element 8, row 2")
