"""Strict checks of data against a schema at the Spark edge.

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

A schema given as a ``StructType`` or a DDL string is first turned into Spark's Arrow schema by
:func:`atoll.interop.spark_types.to_arrow_schema`.
"""
from __future__ import annotations

import datetime as _dt
import decimal as _decimal
from collections.abc import Mapping
from operator import itemgetter
from typing import Any, Callable, Iterable, List, Optional, Union

import numpy as np
import pyarrow as pa
import pyarrow.types as pat

from atoll.interop.errors import SchemaMismatchError
from atoll.interop.spark_types import SchemaLike, to_arrow_schema

__all__ = ["conform", "check_table", "rows_to_table", "pandas_to_table"]


# ---------------------------------------------------------------------------------------------------------------
# Checking Arrow data against a schema
# ---------------------------------------------------------------------------------------------------------------

def _describe(t: pa.DataType, nullable: bool = True) -> str:
    return str(t) if nullable else f"{t} not null"


class _Mismatch(Exception):
    """Internal: a mismatch found below the top level, before the element index is known."""

    def __init__(self, column, expected, found, row=None, detail=None):
        super().__init__(column)
        self.args5 = (column, expected, found, row, detail)

    def error(self, element_index):
        column, expected, found, row, detail = self.args5
        return SchemaMismatchError(column, expected, found, element_index, row, detail)


def _compatible(exp: pa.DataType, found: pa.DataType, path: str) -> None:
    """Raise _Mismatch unless ``found`` holds the same logical type as ``exp`` (see the module docstring)."""
    if pat.is_dictionary(found):
        _compatible(exp, found.value_type, path)
        return
    if pat.is_null(found):
        return  # all-null column: takes any type (the null check sees the nulls)
    ok = False
    if pat.is_string(exp) or pat.is_large_string(exp):
        ok = pat.is_string(found) or pat.is_large_string(found) or pat.is_string_view(found)
    elif pat.is_binary(exp) or pat.is_large_binary(exp):
        ok = pat.is_binary(found) or pat.is_large_binary(found) or pat.is_binary_view(found)
    elif pat.is_timestamp(exp):
        ok = pat.is_timestamp(found) and ((exp.tz is None) == (found.tz is None))
        if pat.is_timestamp(found) and not ok:
            raise _Mismatch(path, str(exp), str(found), detail=(
                "a timestamp without time zone is not an instant: give it a time zone first"
                if found.tz is None else "a time-zone-aware timestamp where a local (NTZ) one is expected"))
    elif pat.is_duration(exp):
        ok = pat.is_duration(found)
    elif pat.is_decimal(exp):
        ok = pat.is_decimal(found) and found.precision == exp.precision and found.scale == exp.scale
    elif pat.is_map(exp):
        if pat.is_map(found):
            _compatible(exp.key_type, found.key_type, path + ".key")
            _compatible(exp.item_type, found.item_type, path + ".value")
            return
    elif pat.is_list(exp) or pat.is_large_list(exp):
        if pat.is_list(found) or pat.is_large_list(found):
            _compatible(exp.value_type, found.value_type, path + ".element")
            return
    elif pat.is_struct(exp):
        if pat.is_struct(found):
            exp_names = [exp.field(i).name for i in range(exp.num_fields)]
            found_names = [found.field(i).name for i in range(found.num_fields)]
            if exp_names == found_names:
                for i in range(exp.num_fields):
                    _compatible(exp.field(i).type, found.field(i).type, f"{path}.{exp_names[i]}")
                return
            raise _Mismatch(path, str(exp), str(found),
                            detail=f"struct fields {found_names} instead of {exp_names}")
    else:
        ok = exp.equals(found)
    if not ok:
        raise _Mismatch(path, str(exp), str(found))


def _parents(arr: pa.Array, rows: np.ndarray) -> np.ndarray:
    """For a list-like ``arr`` (rows[i] = top-level row of arr[i]): the top-level row of each flattened value."""
    offsets = np.asarray(arr.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    lengths = np.diff(offsets)
    if arr.null_count:
        lengths = np.where(np.asarray(arr.is_valid().to_numpy(zero_copy_only=False)), lengths, 0)
    return np.repeat(rows, lengths)


def _first_null(arr: pa.Array, rows: np.ndarray, valid_parent: Optional[np.ndarray] = None) -> Optional[int]:
    if arr.null_count == 0:
        return None
    nulls = ~np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    if valid_parent is not None:
        nulls &= valid_parent
    idx = np.flatnonzero(nulls)
    return int(rows[idx[0]]) if len(idx) else None


def _check_nested_nulls(arr: pa.Array, exp: pa.DataType, path: str, rows: np.ndarray) -> None:
    """Raise _Mismatch where ``arr`` (already type-compatible with ``exp``) has a null in a non-nullable
    nested field. ``rows[i]`` is the top-level row of ``arr[i]``."""
    if pat.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if pat.is_null(arr.type) or len(arr) == 0:
        return
    if pat.is_map(exp):
        entries_type = pa.list_(pa.field("entries", pa.struct([arr.type.key_field, arr.type.item_field]), False))
        as_list = arr.view(entries_type)
        entries = as_list.flatten()
        child_rows = _parents(as_list, rows)
        values = entries.field(1)
        if not exp.item_field.nullable:
            bad = _first_null(values, child_rows)
            if bad is not None:
                raise _Mismatch(path + ".value", _describe(exp.item_type, False), "null", bad)
        _check_nested_nulls(entries.field(0), exp.key_type, path + ".key", child_rows)
        _check_nested_nulls(values, exp.item_type, path + ".value", child_rows)
    elif pat.is_list(exp) or pat.is_large_list(exp):
        values = arr.flatten()
        child_rows = _parents(arr, rows)
        if not exp.value_field.nullable:
            bad = _first_null(values, child_rows)
            if bad is not None:
                raise _Mismatch(path + ".element", _describe(exp.value_type, False), "null", bad)
        _check_nested_nulls(values, exp.value_type, path + ".element", child_rows)
    elif pat.is_struct(exp):
        valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        for i in range(exp.num_fields):
            f = exp.field(i)
            child = arr.field(i)
            if not f.nullable:
                bad = _first_null(child, rows, valid)
                if bad is not None:
                    raise _Mismatch(f"{path}.{f.name}", _describe(f.type, False), "null", bad)
            if _has_required_nested(f.type):
                keep = pa.array(valid)
                _check_nested_nulls(child.filter(keep), f.type, f"{path}.{f.name}", rows[valid])


def _has_required_nested(t: pa.DataType) -> bool:
    if pat.is_map(t):
        return (not t.item_field.nullable) or _has_required_nested(t.key_type) or _has_required_nested(t.item_type)
    if pat.is_list(t) or pat.is_large_list(t):
        return (not t.value_field.nullable) or _has_required_nested(t.value_type)
    if pat.is_struct(t):
        return any((not t.field(i).nullable) or _has_required_nested(t.field(i).type) for i in range(t.num_fields))
    return False


def _conform_column(col: pa.ChunkedArray, field: pa.Field) -> pa.ChunkedArray:
    """Check one top-level column against ``field`` and return it with exactly ``field.type``."""
    name = field.name
    exp = field.type
    _compatible(exp, col.type, name)
    if pat.is_dictionary(col.type):
        col = pa.chunked_array([c.dictionary_decode() for c in col.chunks], type=col.type.value_type)
    if not field.nullable and col.null_count:
        base = 0
        for chunk in col.chunks:
            if chunk.null_count:
                bad = _first_null(chunk, np.arange(base, base + len(chunk)))
                raise _Mismatch(name, _describe(exp, False), "null", bad)
            base += len(chunk)
    if _has_required_nested(exp):
        base = 0
        for chunk in col.chunks:
            _check_nested_nulls(chunk, exp, name, np.arange(base, base + len(chunk)))
            base += len(chunk)
    if col.type.equals(exp):
        return col
    try:
        return col.cast(exp, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise _Mismatch(name, str(exp), str(col.type), detail=f"cannot convert without changing values: {exc}")


def check_table(data: Union[pa.Table, pa.RecordBatch], schema: SchemaLike, *,
                element_index: Optional[int] = None) -> pa.Table:
    """Check an Arrow table or record batch against ``schema`` and return it as a table with exactly that schema.

    Columns are matched by name (their order may differ); an extra, missing or duplicated column, a column of
    another type, or a null in a non-nullable field raises :class:`SchemaMismatchError`. ``element_index`` is the
    position of ``data`` in its stream, quoted in the error.
    """
    expected = schema if isinstance(schema, pa.Schema) else to_arrow_schema(schema)
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    elif not isinstance(data, pa.Table):
        raise SchemaMismatchError(None, "a pyarrow Table or RecordBatch", type(data).__name__, element_index)
    names = data.schema.names
    seen = set()
    for n in names:
        if n in seen:
            raise SchemaMismatchError(n, "one column of that name", f"{names.count(n)} columns", element_index)
        seen.add(n)
    expected_names = set(expected.names)
    for n in names:
        if n not in expected_names:
            raise SchemaMismatchError(n, "no such column", str(data.schema.field(n).type), element_index,
                                      detail=f"the schema has columns {expected.names}")
    if data.schema.equals(expected, check_metadata=False) and names == expected.names and not any(
            (not f.nullable and data.column(i).null_count) or _has_required_nested(f.type)
            for i, f in enumerate(expected)):
        return data.replace_schema_metadata(expected.metadata)
    columns = []
    for field in expected:
        if field.name not in seen:
            raise SchemaMismatchError(field.name, _describe(field.type, field.nullable), "no such column",
                                      element_index)
        try:
            columns.append(_conform_column(data.column(field.name), field))
        except _Mismatch as m:
            raise m.error(element_index) from None
    return pa.Table.from_arrays(columns, schema=expected)


# ---------------------------------------------------------------------------------------------------------------
# Checking Python values (rows, pandas object columns) against a schema
# ---------------------------------------------------------------------------------------------------------------

def _found(value: Any) -> str:
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{type(value).__name__} {text}"


_INT_RANGES = {
    pa.int8(): (-2 ** 7, 2 ** 7 - 1), pa.int16(): (-2 ** 15, 2 ** 15 - 1),
    pa.int32(): (-2 ** 31, 2 ** 31 - 1), pa.int64(): (-2 ** 63, 2 ** 63 - 1),
    pa.uint8(): (0, 2 ** 8 - 1), pa.uint16(): (0, 2 ** 16 - 1),
    pa.uint32(): (0, 2 ** 32 - 1), pa.uint64(): (0, 2 ** 64 - 1),
}

Converter = Callable[[Any, Optional[int]], Any]


def _value_converter(t: pa.DataType, nullable: bool, path: str) -> Converter:
    """A function (value, row) -> value ready for ``pa.array(..., type=t)``; raises _Mismatch on a wrong value."""
    inner = _non_null_converter(t, path)
    described = _describe(t, nullable)

    def convert(value, row):
        if value is None:
            if not nullable:
                raise _Mismatch(path, described, "null", row)
            return None
        return inner(value, row)

    return convert


def _non_null_converter(t: pa.DataType, path: str) -> Converter:
    described = str(t)

    def mismatch(value, row, detail=None):
        return _Mismatch(path, described, _found(value), row, detail)

    if pat.is_boolean(t):
        def conv(v, row):
            if isinstance(v, (bool, np.bool_)):
                return bool(v)
            raise mismatch(v, row)
        return conv
    if pat.is_integer(t):
        lo, hi = _INT_RANGES[t]

        def conv(v, row):
            if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
                iv = int(v)
                if lo <= iv <= hi:
                    return iv
                raise mismatch(v, row, f"out of range [{lo}, {hi}]")
            raise mismatch(v, row)
        return conv
    if pat.is_floating(t):
        def conv(v, row):
            if isinstance(v, (float, np.floating)):
                return float(v)
            raise mismatch(v, row)
        return conv
    if pat.is_string(t) or pat.is_large_string(t) or pat.is_string_view(t):
        def conv(v, row):
            if isinstance(v, str):
                return v
            raise mismatch(v, row)
        return conv
    if pat.is_binary(t) or pat.is_large_binary(t) or pat.is_binary_view(t) or pat.is_fixed_size_binary(t):
        def conv(v, row):
            if isinstance(v, (bytes, bytearray, memoryview)):
                return bytes(v)
            raise mismatch(v, row)
        return conv
    if pat.is_decimal(t):
        quantum = _decimal.Decimal(1).scaleb(-t.scale)

        def conv(v, row):
            if not isinstance(v, _decimal.Decimal):
                raise mismatch(v, row)
            if not v.is_finite():
                raise mismatch(v, row, "not a finite number")
            try:
                exact = v.quantize(quantum, context=_decimal.Context(prec=80, traps=[_decimal.InvalidOperation]))
            except _decimal.InvalidOperation:
                raise mismatch(v, row, f"more than {t.precision} digits") from None
            if exact != v:
                raise mismatch(v, row, f"more than {t.scale} digits after the point")
            if len(exact.as_tuple().digits) > t.precision and exact != 0:
                raise mismatch(v, row, f"more than {t.precision} digits")
            return exact
        return conv
    if pat.is_date32(t) or pat.is_date64(t):
        def conv(v, row):
            if isinstance(v, _dt.date) and not isinstance(v, _dt.datetime):
                return v
            raise mismatch(v, row)
        return conv
    if pat.is_timestamp(t):
        if t.tz is not None:
            def conv(v, row):
                if isinstance(v, _dt.datetime):
                    # a naive datetime is local time, as PySpark reads it (TimestampType.toInternal)
                    return v.astimezone(_dt.timezone.utc)
                raise mismatch(v, row)
        else:
            def conv(v, row):
                if isinstance(v, _dt.datetime) and v.tzinfo is None:
                    return v
                if isinstance(v, _dt.datetime):
                    raise mismatch(v, row, "a time-zone-aware datetime for a timestamp without time zone")
                raise mismatch(v, row)
        return conv
    if pat.is_duration(t):
        def conv(v, row):
            if isinstance(v, _dt.timedelta):
                return v
            raise mismatch(v, row)
        return conv
    if pat.is_null(t):
        def conv(v, row):
            raise mismatch(v, row)
        return conv
    if pat.is_map(t):
        key_conv = _value_converter(t.key_type, False, path + ".key")
        item_conv = _value_converter(t.item_type, t.item_field.nullable, path + ".value")

        def conv(v, row):
            if not isinstance(v, Mapping):
                raise mismatch(v, row)
            return [(key_conv(k, row), item_conv(x, row)) for k, x in v.items()]
        return conv
    if pat.is_list(t) or pat.is_large_list(t) or pat.is_fixed_size_list(t):
        elem_conv = _value_converter(t.value_type, t.value_field.nullable, path + ".element")

        def conv(v, row):
            if isinstance(v, np.ndarray):
                if v.ndim != 1:
                    raise mismatch(v, row)
                v = v.tolist()
            if not isinstance(v, (list, tuple)):
                raise mismatch(v, row)
            return [elem_conv(x, row) for x in v]
        return conv
    if pat.is_struct(t):
        fields = [t.field(i) for i in range(t.num_fields)]
        names = [f.name for f in fields]
        convs = [_value_converter(f.type, f.nullable, f"{path}.{f.name}") for f in fields]

        def conv(v, row):
            if hasattr(v, "asDict") and isinstance(v, tuple):  # pyspark.sql.Row
                v = v.asDict()
            if isinstance(v, Mapping):
                for k in v:
                    if k not in names:
                        raise _Mismatch(f"{path}.{k}", "no such field", _found(v[k]), row,
                                        f"struct fields are {names}")
                out = {}
                for f, c in zip(fields, convs):
                    if f.name not in v:
                        raise _Mismatch(f"{path}.{f.name}", _describe(f.type, f.nullable), "no such field", row)
                    out[f.name] = c(v[f.name], row)
                return out
            if isinstance(v, (list, tuple)):
                if len(v) != len(fields):
                    raise mismatch(v, row, f"{len(v)} values for {len(fields)} fields")
                return {f.name: c(x, row) for f, c, x in zip(fields, convs, v)}
            raise mismatch(v, row)
        return conv
    raise _Mismatch(path, described, "a type Atoll cannot check", None,
                    "supported: booleans, integers, floats, strings, binary, decimals, dates, timestamps, "
                    "durations, lists, maps, structs")


def _as_row_dict(row: Any) -> Optional[Mapping]:
    if hasattr(row, "asDict") and isinstance(row, tuple):  # pyspark.sql.Row
        return row.asDict()
    if isinstance(row, Mapping):
        return row
    return None


def _fast_python_types(t: pa.DataType) -> Optional[frozenset]:
    """The Python types whose values Arrow converts to ``t`` exactly as the checked path would, for flat types."""
    if pat.is_boolean(t):
        return frozenset((bool,))
    if pat.is_integer(t):
        return frozenset((int,))  # not bool: type(True) is bool; Arrow itself refuses out-of-range ints
    if pat.is_floating(t):
        return frozenset((float,))
    if pat.is_string(t) or pat.is_large_string(t):
        return frozenset((str,))
    return None


_DICT = {dict}


def _fast_rows_to_table(rows: List[Any], expected: pa.Schema) -> Optional[pa.Table]:
    """``rows_to_table`` for the common case -- plain dicts with exactly the schema's columns -- column by column:
    a flat column whose values are of an accepted Python type is checked at C speed (``set(map(type, column))``),
    any other column (timestamps, dates, decimals, nested types ...) value by value with the row path's own
    converter, and Arrow converts. ``None`` when anything does not fit: the row path then finds and names the
    problem. (A single timestamp column used to send the whole table down the row path: 5.6 us a row for the
    demo's 6-column windows, 1.65 us now.)"""
    names = expected.names
    n = len(names)
    if not rows or set(map(type, rows)) != _DICT or set(map(len, rows)) != {n}:
        return None
    try:  # every row has n keys, each of the schema's n names: exactly the schema's columns
        columns = [list(map(itemgetter(name), rows)) for name in names]
    except KeyError:
        return None
    for i, f in enumerate(expected):
        types = _fast_python_types(f.type)
        if types is not None:
            if not set(map(type, columns[i])) <= (types | {type(None)} if f.nullable else types):
                return None
            continue
        try:
            conv = _value_converter(f.type, f.nullable, f.name)
            columns[i] = [conv(v, None) for v in columns[i]]
        except _Mismatch:
            return None
    try:
        arrays = [pa.array(col, type=f.type) for col, f in zip(columns, expected)]
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return None
    return pa.Table.from_arrays(arrays, schema=expected)


def rows_to_table(rows: Iterable[Any], schema: SchemaLike, *, element_index: Optional[int] = None,
                  number_rows: bool = True) -> pa.Table:
    """Build an Arrow table with exactly ``schema`` from rows (dicts, or ``pyspark.sql.Row``), checking every value.

    Python values are accepted as PySpark accepts them for the type, and no further: ``bool`` for boolean,
    ``int`` in range for integers (not ``bool``), ``float`` for float/double (not ``int``), ``str`` for string,
    ``bytes``/``bytearray`` for binary, ``Decimal`` that fits for decimal(p,s), ``date`` (not ``datetime``) for
    date, ``datetime`` for timestamp (a naive one is local time, as in PySpark), ``list``/``tuple`` for arrays,
    ``dict`` for maps, and ``dict``/``Row``/``tuple`` for structs. Every row must have exactly the schema's
    columns. With ``number_rows`` the error names the row's position in ``rows``.
    """
    expected = schema if isinstance(schema, pa.Schema) else to_arrow_schema(schema)
    if not isinstance(rows, list):
        rows = list(rows)
    fast = _fast_rows_to_table(rows, expected)
    if fast is not None:
        return fast
    fields = list(expected)
    try:
        convs = [_value_converter(f.type, f.nullable, f.name) for f in fields]
    except _Mismatch as m:
        raise m.error(element_index) from None
    names = [f.name for f in fields]
    name_set = set(names)
    columns: List[list] = [[] for _ in fields]
    for i, row in enumerate(rows):
        row_no = i if number_rows else None
        d = _as_row_dict(row)
        if d is None:
            raise SchemaMismatchError(None, "a row (a dict or a pyspark Row)", _found(row), element_index, row_no)
        for k in d:
            if k not in name_set:
                raise SchemaMismatchError(str(k), "no such column", _found(d[k]), element_index, row_no,
                                          f"the schema has columns {names}")
        try:
            for col, f, conv in zip(columns, fields, convs):
                if f.name not in d:
                    raise _Mismatch(f.name, _describe(f.type, f.nullable), "no such column", row_no)
                col.append(conv(d[f.name], row_no))
        except _Mismatch as m:
            raise m.error(element_index) from None
    arrays = [pa.array(col, type=f.type) for col, f in zip(columns, fields)]
    return pa.Table.from_arrays(arrays, schema=expected)


def _is_missing(v: Any) -> bool:
    if v is None:
        return True
    if isinstance(v, float) and v != v:
        return True
    try:
        import pandas as pd

        return v is pd.NA or v is pd.NaT
    except ImportError:  # pragma: no cover
        return False


def pandas_to_table(frame, schema: SchemaLike, *, element_index: Optional[int] = None) -> pa.Table:
    """Check a pandas DataFrame against ``schema`` and return it as an Arrow table with exactly that schema.

    Typed columns (numbers, booleans, strings, ``datetime64``, nullable ``Int64``...) are converted by Arrow
    and then checked as in :func:`check_table` (so an ``int64`` column where ``double`` is expected fails, and
    a float column holding NaN where ``bigint`` is expected fails too: use pandas' nullable ``Int64``).
    ``object`` columns (lists, dicts, Decimals, dates, ...) are checked value by value as in
    :func:`rows_to_table`; ``None``, ``NaN``, ``pd.NA`` and ``NaT`` in them mean null. The index is ignored.
    """
    import pandas as pd

    expected = schema if isinstance(schema, pa.Schema) else to_arrow_schema(schema)
    if not isinstance(frame, pd.DataFrame):
        raise SchemaMismatchError(None, "a pandas DataFrame", type(frame).__name__, element_index)
    names = [str(c) for c in frame.columns]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise SchemaMismatchError(dup, "one column of that name", f"{names.count(dup)} columns", element_index)
    expected_names = set(expected.names)
    for n, c in zip(names, frame.columns):
        if n not in expected_names:
            raise SchemaMismatchError(n, "no such column", f"pandas dtype {frame[c].dtype}", element_index,
                                      detail=f"the schema has columns {expected.names}")
    by_name = dict(zip(names, frame.columns))
    columns = []
    for field in expected:
        if field.name not in by_name:
            raise SchemaMismatchError(field.name, _describe(field.type, field.nullable), "no such column",
                                      element_index)
        series = frame[by_name[field.name]]
        try:
            if series.dtype == object:
                conv = _value_converter(field.type, field.nullable, field.name)
                values = [conv(None if _is_missing(v) else v, i) for i, v in enumerate(series.tolist())]
                columns.append(pa.chunked_array([pa.array(values, type=field.type)], type=field.type))
            else:
                arr = pa.Array.from_pandas(series)
                columns.append(_conform_column(pa.chunked_array([arr], type=arr.type), field))
        except _Mismatch as m:
            raise m.error(element_index) from None
    return pa.Table.from_arrays(columns, schema=expected)


def conform(data: Any, schema: SchemaLike, *, element_index: Optional[int] = None) -> pa.Table:
    """Check ``data`` against ``schema`` and return it as an Arrow table with exactly that schema.

    ``data`` may be a ``pyarrow.Table`` or ``RecordBatch`` (:func:`check_table`), a pandas DataFrame
    (:func:`pandas_to_table`), one row (a ``dict`` or ``pyspark.sql.Row``) or a list/tuple of rows
    (:func:`rows_to_table`). Raises :class:`~atoll.interop.errors.SchemaMismatchError` (with ``element_index``,
    the position of ``data`` in its stream) when the data does not fit.
    """
    expected = schema if isinstance(schema, pa.Schema) else to_arrow_schema(schema)
    if isinstance(data, (pa.Table, pa.RecordBatch)):
        return check_table(data, expected, element_index=element_index)
    if _as_row_dict(data) is not None:
        return rows_to_table([data], expected, element_index=element_index, number_rows=False)
    if isinstance(data, (list, tuple)):
        return rows_to_table(data, expected, element_index=element_index)
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover
        pd = None
    if pd is not None and isinstance(data, pd.DataFrame):
        return pandas_to_table(data, expected, element_index=element_index)
    raise SchemaMismatchError(None, "a pyarrow Table/RecordBatch, a pandas DataFrame, a row dict or a list of rows",
                              type(data).__name__, element_index)
