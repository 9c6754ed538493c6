"""Schemas at the Spark edge: Spark types <-> Arrow types, DDL strings, and strict checks of data against a schema.

Atoll moves Spark data as Arrow: a Spark partition arrives as a ``pyarrow.Table``, and a stream ending in a Spark
DataFrame delivers Arrow tables that the Spark executors read directly. So every schema the Spark edge deals with
is turned into the Arrow schema Spark itself would use for it:

* :func:`to_arrow_schema` takes a Spark ``StructType``, a DDL string (``"id long, name string"``) or an Arrow
  schema and returns that Arrow schema. The per-type mapping is PySpark's own
  (``pyspark.sql.pandas.types.to_arrow_type``): ``bigint -> int64``, ``decimal(p,s) -> decimal128(p,s)``,
  ``timestamp -> timestamp[us, tz]``, ``timestamp_ntz -> timestamp[us]``, ``array<T> -> list<element: T>``,
  ``map<K,V> -> map<K,V>``, ``struct<...> -> struct<...>``, and so on, nullability included.
* :func:`to_spark_schema` goes the other way and, unlike PySpark's ``from_arrow_type``, keeps the nullability of
  array elements and map values.
* :func:`parse_ddl` parses Spark's DDL schema syntax in pure Python, so a bad schema fails when a stream is built,
  before any Spark session exists.

Checking data (:func:`conform`, :func:`check_table`, :func:`rows_to_table`, :func:`pandas_to_table`) is strict:
a value or column of another type, a column too many or too few, and a null in a non-nullable field (at any
depth) raise :class:`~atoll.interop.errors.SchemaMismatchError` naming the column, the expected and the found type,
the stream element and the row. Nothing is coerced: an int is not turned into a string or a float, a float is
not truncated to an int, a ``datetime`` is not truncated to a ``date``. The only changes made are ones that
cannot alter a value: another physical layout of the same logical type (``large_string``/``string_view`` to
``string``, ``large_binary`` to ``binary``, ``large_list`` to ``list``, dictionary-encoded columns decoded),
field names inside lists (Arrow's ``item`` vs Spark's ``element``), the display time zone of a time-zone-aware
timestamp (an instant is the same instant in any zone), a timestamp unit change that loses nothing (a pandas
``datetime64[ns]`` column whose values are whole microseconds), and an all-null column of Arrow's ``null`` type
taking the expected type.

The three parts live in their own modules, re-exported here as the public import point:
:mod:`atoll.interop.spark_ddl` (the DDL parser), :mod:`atoll.interop.spark_types` (Spark <-> Arrow types) and
:mod:`atoll.interop.spark_conform` (strict checks of data).
"""
from __future__ import annotations

from atoll.interop.spark_conform import check_table, conform, pandas_to_table, rows_to_table
from atoll.interop.spark_ddl import parse_ddl
from atoll.interop.spark_types import SchemaLike, to_arrow_schema, to_arrow_type, to_spark_schema, with_timezone

__all__ = [
    "SchemaLike",
    "parse_ddl",
    "to_arrow_schema",
    "to_arrow_type",
    "to_spark_schema",
    "with_timezone",
    "conform",
    "check_table",
    "rows_to_table",
    "pandas_to_table",
]
