"""Spark types <-> Arrow types: the Arrow schema Spark itself uses for a Spark schema, and back.

* :func:`to_arrow_schema` takes a Spark ``StructType``, a DDL string (``"id long, name string"``) or an Arrow
  schema and returns that Arrow schema. The per-type mapping is PySpark 3.5's
  (``pyspark.sql.pandas.types.to_arrow_type``): ``bigint -> int64``, ``decimal(p,s) -> decimal128(p,s)``,
  ``timestamp -> timestamp[us, tz]``, ``timestamp_ntz -> timestamp[us]``, ``array<T> -> list<element: T>``,
  ``map<K,V> -> map<K,V>``, ``struct<...> -> struct<...>``, and so on, nullability included.
* :func:`to_spark_schema` goes the other way and, unlike PySpark's ``from_arrow_type``, keeps the nullability of
  array elements and map values.
* :func:`with_timezone` shows every time-zone-aware timestamp of a schema in a given zone, as a Spark session
  ships them.

DDL strings are parsed by :mod:`atoll.interop.spark_ddl`. The type mappings are written out here rather than
called from PySpark: its functions import ``distutils.version`` on every call, which in a virtual environment with
setuptools imports all of setuptools (~0.2 s on a small machine, on the clock of the first ``Sink.to_spark`` or
``Source.from_spark`` of a process). ``tests/interop/test_spark_schema.py`` checks that they agree with PySpark's
for every type.
"""
from __future__ import annotations

from typing import Optional, Union

import pyarrow as pa
import pyarrow.types as pat

from atoll.interop.spark_ddl import parse_ddl

__all__ = ["SchemaLike", "to_arrow_schema", "to_arrow_type", "to_spark_schema", "with_timezone"]

#: What the schema arguments of the Spark edge accept.
SchemaLike = Union["pa.Schema", "StructType", str]  # noqa: F821 (StructType is pyspark's)


def _normalize_spark_type(dt):
    """CHAR/VARCHAR to STRING (as Spark does for DataFrame schemas); recurse into nested types."""
    from pyspark.sql import types as T

    if isinstance(dt, (T.CharType, T.VarcharType)):
        return T.StringType()
    if isinstance(dt, T.ArrayType):
        return T.ArrayType(_normalize_spark_type(dt.elementType), dt.containsNull)
    if isinstance(dt, T.MapType):
        return T.MapType(_normalize_spark_type(dt.keyType), _normalize_spark_type(dt.valueType),
                         dt.valueContainsNull)
    if isinstance(dt, T.StructType):
        return T.StructType([T.StructField(f.name, _normalize_spark_type(f.dataType), f.nullable, f.metadata)
                             for f in dt.fields])
    return dt


def with_timezone(schema: pa.Schema, timezone: str) -> pa.Schema:
    """``schema`` with every time-zone-aware timestamp (at any depth) displayed in ``timezone``.

    Spark writes its ``timestamp`` columns to Arrow in the session time zone (``spark.sql.session.timeZone``);
    this turns the schema of a Spark type into exactly what Spark ships.
    """
    return pa.schema([_field_with_timezone(f, timezone) for f in schema], metadata=schema.metadata)


def _field_with_timezone(field: pa.Field, timezone: str) -> pa.Field:
    return field.with_type(_type_with_timezone(field.type, timezone))


def _type_with_timezone(t: pa.DataType, timezone: str) -> pa.DataType:
    if pat.is_timestamp(t):
        return pa.timestamp(t.unit, timezone) if t.tz is not None else t
    if pat.is_map(t):
        return pa.map_(_field_with_timezone(t.key_field, timezone), _field_with_timezone(t.item_field, timezone),
                       keys_sorted=t.keys_sorted)
    if pat.is_list(t):
        return pa.list_(_field_with_timezone(t.value_field, timezone))
    if pat.is_large_list(t):
        return pa.large_list(_field_with_timezone(t.value_field, timezone))
    if pat.is_struct(t):
        return pa.struct([_field_with_timezone(t.field(i), timezone) for i in range(t.num_fields)])
    return t


def _arrow_type_of(dt) -> pa.DataType:
    """The Arrow type of Spark type ``dt`` (CHAR/VARCHAR already normalized), as PySpark 3.5's ``to_arrow_type``."""
    from pyspark.sql import types as T

    kind = type(dt)
    for spark, arrow in ((T.BooleanType, pa.bool_), (T.ByteType, pa.int8), (T.ShortType, pa.int16),
                         (T.IntegerType, pa.int32), (T.LongType, pa.int64), (T.FloatType, pa.float32),
                         (T.DoubleType, pa.float64), (T.StringType, pa.string), (T.BinaryType, pa.binary),
                         (T.DateType, pa.date32), (T.NullType, pa.null)):
        if kind is spark:
            return arrow()
    if kind is T.DecimalType:
        return pa.decimal128(dt.precision, dt.scale)
    if kind is T.TimestampType:  # Spark ships timestamps in UTC; with_timezone shows them in the session's zone
        return pa.timestamp("us", tz="UTC")
    if kind is T.TimestampNTZType:
        return pa.timestamp("us")
    if kind is T.DayTimeIntervalType:
        return pa.duration("us")
    if kind is T.ArrayType:
        return pa.list_(pa.field("element", _arrow_type_of(dt.elementType), nullable=dt.containsNull))
    if kind is T.MapType:
        return pa.map_(pa.field("key", _arrow_type_of(dt.keyType), nullable=False),
                       pa.field("value", _arrow_type_of(dt.valueType), nullable=dt.valueContainsNull))
    if kind is T.StructType:
        return pa.struct([pa.field(f.name, _arrow_type_of(f.dataType), nullable=f.nullable) for f in dt.fields])
    if isinstance(dt, T.UserDefinedType):
        return _arrow_type_of(dt.sqlType())
    raise TypeError(f"Spark type {dt.simpleString() if hasattr(dt, 'simpleString') else dt!r} has no Arrow "
                    "counterpart (Spark cannot ship it as Arrow)")


def to_arrow_type(spark_type, timezone: Optional[str] = None) -> pa.DataType:
    """The Arrow type Spark uses for ``spark_type`` (PySpark 3.5's mapping).

    Time-zone-aware timestamps are shown in ``timezone`` (PySpark's ``"UTC"`` when not given).
    """
    t = _arrow_type_of(_normalize_spark_type(spark_type))
    return _type_with_timezone(t, timezone) if timezone is not None else t


def to_arrow_schema(schema: SchemaLike, timezone: Optional[str] = None) -> pa.Schema:
    """The Arrow schema Spark uses for ``schema`` (a ``StructType``, a DDL string, or an Arrow schema).

    Time-zone-aware timestamps are shown in ``timezone`` when it is given: a Spark session writes them in its
    ``spark.sql.session.timeZone``. Otherwise they are ``"UTC"`` for a Spark schema (as in PySpark), and an Arrow
    schema is returned as it is.
    """
    from pyspark.sql.types import StructType

    if isinstance(schema, pa.Schema):
        result = schema
    elif isinstance(schema, (str, StructType)):
        struct = parse_ddl(schema) if isinstance(schema, str) else schema
        result = pa.schema([pa.field(f.name, _arrow_type_of(f.dataType), nullable=f.nullable)
                            for f in _normalize_spark_type(struct).fields])
    else:
        raise TypeError("to_arrow_schema: schema must be a pyarrow.Schema, a pyspark StructType or a DDL string, "
                        f"got {type(schema).__name__}")
    return with_timezone(result, timezone) if timezone is not None else result


def _spark_type_of(t: pa.DataType):
    from pyspark.sql import types as T

    if pat.is_dictionary(t):
        return _spark_type_of(t.value_type)
    if pat.is_list(t) or pat.is_large_list(t):
        return T.ArrayType(_spark_type_of(t.value_type), t.value_field.nullable)
    if pat.is_map(t):
        return T.MapType(_spark_type_of(t.key_type), _spark_type_of(t.item_type), t.item_field.nullable)
    if pat.is_struct(t):
        return T.StructType([T.StructField(t.field(i).name, _spark_type_of(t.field(i).type), t.field(i).nullable)
                             for i in range(t.num_fields)])
    if pat.is_string(t) or pat.is_large_string(t) or pat.is_string_view(t):
        return T.StringType()
    if pat.is_binary(t) or pat.is_large_binary(t) or pat.is_binary_view(t):
        return T.BinaryType()
    if pat.is_timestamp(t):
        return T.TimestampType() if t.tz is not None else T.TimestampNTZType()
    if pat.is_decimal(t):
        return T.DecimalType(precision=t.precision, scale=t.scale)
    for is_kind, spark in ((pat.is_boolean, T.BooleanType), (pat.is_int8, T.ByteType), (pat.is_int16, T.ShortType),
                           (pat.is_int32, T.IntegerType), (pat.is_int64, T.LongType),
                           (pat.is_float32, T.FloatType), (pat.is_float64, T.DoubleType),
                           (pat.is_date32, T.DateType), (pat.is_duration, T.DayTimeIntervalType),
                           (pat.is_null, T.NullType)):
        if is_kind(t):
            return spark()
    raise TypeError(f"Arrow type {t} has no Spark counterpart (as in PySpark's from_arrow_type)")


def to_spark_schema(schema: SchemaLike):
    """The Spark ``StructType`` for ``schema`` (an Arrow schema, a ``StructType`` or a DDL string).

    Arrow ``timestamp`` with a time zone becomes Spark ``timestamp``, without one ``timestamp_ntz``; the
    nullability of fields, array elements and map values is kept.
    """
    from pyspark.sql.types import StructField, StructType

    if isinstance(schema, StructType):
        return _normalize_spark_type(schema)
    if isinstance(schema, str):
        return parse_ddl(schema)
    if not isinstance(schema, pa.Schema):
        raise TypeError("to_spark_schema: schema must be a pyarrow.Schema, a pyspark StructType or a DDL string, "
                        f"got {type(schema).__name__}")
    return StructType([StructField(f.name, _spark_type_of(f.type), f.nullable) for f in schema])
