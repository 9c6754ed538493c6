"""Arrow data in Ray -> a Spark DataFrame, and Arrow tables -> Python rows / pandas, as PySpark gives them.

**To Spark.** :func:`arrow_refs_to_spark` turns a list of ``ray.ObjectRef``\\ s of Arrow tables (owned by the
driver, e.g. the chunks a stream sink collected) into a Spark DataFrame of a given schema, one Spark partition per
ref. It does not use RayDP's ``ray_dataset_to_spark_dataframe`` for Arrow tables (``ray.data...to_spark``),
because that path goes Arrow -> pandas -> Arrow in Spark's Python workers and loses data on the way: maps fail
(pandas gives lists of pairs where PySpark wants dicts) and a nullable ``bigint`` passes through ``float64``.
Instead each table is checked against the schema and encoded as an Arrow IPC stream by Ray tasks (a few, each
taking a contiguous group of the tables, see :data:`TABLES_PER_TASK`; on a one-node Ray, calls of the same
groups on ``from_spark``'s long-lived hub actor, which needs no worker process started), and RayDP's JVM reader (``RayDatasetRDD`` + ``ObjectStoreReader.RayDatasetToDataFrame``, the path
RayDP uses for IPC blocks) lets Spark's executors read those bytes straight from the object store into Spark rows:
no pandas, no Python workers, every Spark type.

The DataFrame is lazy: Spark reads the encoded bytes from Ray every time it is evaluated, so this module keeps
them alive until :func:`release_frame` is called for the DataFrame or the Spark session stops
(:func:`atoll.interop.spark_session.stop`). The caller's original table refs are not needed after the call.

**From Arrow.** :func:`arrow_to_rows` gives the dicts ``Row.asDict(recursive=True)`` would give for the same
Spark rows (``Decimal``, ``date``, naive local ``datetime``, ``bytearray``, lists, dicts for maps and structs);
:func:`arrow_to_pandas` gives what ``DataFrame.toPandas()`` would (maps as dicts, dates as ``date`` objects,
timestamps as naive wall-clock time); :func:`slices` cuts a table into zero-copy pieces of at most ``n`` rows.

Private APIs used: ``raydp.spark.dataset._convert_by_rdd`` (RayDP 1.6.5) and Ray's
``ray._private.worker.global_worker.core_worker.get_owner_address`` (what RayDP's ``get_locations`` calls).
"""
from __future__ import annotations

import datetime as _dt
import threading
import uuid
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import pyarrow as pa
import pyarrow.types as pat

from atoll.errors import IllegalStateError
from atoll.interop.errors import SchemaMismatchError
from atoll.interop.spark_conform import conform
from atoll.interop.spark_session import active_session, on_stop
from atoll.interop.spark_types import SchemaLike, to_arrow_schema, to_spark_schema
from atoll.interop.task_groups import PER_TASK, groups

__all__ = ["arrow_refs_to_spark", "release_frame", "retained_frames", "arrow_to_rows", "arrow_to_pandas", "slices"]

_FRAME_ATTR = "_atoll_frame_id"
_retained: Dict[str, List[Any]] = {}  # frame id -> refs of the IPC bytes its DataFrame reads
_retained_lock = threading.Lock()


def _encode_for_spark(data: Any, schema: pa.Schema):
    """Ray task body: check ``data`` against ``schema`` and encode it as an Arrow IPC stream (bytes, rows)."""
    table = conform(data, schema)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        writer.write_table(table)
    # bytes (not a pyarrow Buffer): Ray stores bytes in its cross-language format, which the JVM reads as byte[]
    return sink.getvalue().to_pybytes(), table.num_rows


def encode_group(start: int, schema: pa.Schema, *tables: Any) -> tuple:
    """Ray task (or hub actor) body: :func:`_encode_for_spark` of each table in turn (``start``: the first one's position among
    the frame's refs, named by a mismatch) -> ``(bytes_0, rows_0, bytes_1, rows_1, ...)``."""
    out: list = []
    for j, data in enumerate(tables):
        try:
            out.extend(_encode_for_spark(data, schema))
        except SchemaMismatchError as e:
            raise e.with_element_index(start + j) from None
    return tuple(out)


#: tables encoded by one Ray task at most: a frame's tables are encoded by few tasks (two for up to 32 tables),
#: which the worker pool's idle workers take, rather than one task per table, for which Ray started new workers
#: (~0.5 s of CPU each) whenever the idle ones were fewer (:mod:`atoll.interop.task_groups`)
TABLES_PER_TASK = PER_TASK

_encode_task = None


def _encoder():
    global _encode_task
    if _encode_task is None:
        import ray

        _encode_task = ray.remote(num_cpus=0, max_retries=3)(encode_group)
    return _encode_task


def _encoder_for_driver():
    """What encodes the tables: on a one-node Ray, this driver's ``from_spark`` hub actor when it has one
    (``MailboxHub.encode``: its process is up for the Spark session, where a task may wait 0.5-1 s for a new
    worker process, with the stream already ended); else Ray tasks, which Ray places next to the data."""
    import ray

    from .spark_on_demand import running_hub

    hub = running_hub()
    if hub is not None and len([n for n in ray.nodes() if n.get("Alive")]) == 1:
        return hub.encode
    return _encoder()


def _owner_addresses(refs: Sequence[Any]) -> List[bytes]:
    import ray

    core_worker = ray._private.worker.global_worker.core_worker
    return [core_worker.get_owner_address(ref) for ref in refs]


def arrow_refs_to_spark(refs: Sequence[Any], schema: SchemaLike, spark=None):
    """A Spark DataFrame with ``schema`` whose partitions are the Arrow tables behind ``refs``.

    ``refs`` are ``ray.ObjectRef``\\ s (owned by this process) of ``pyarrow.Table``\\ s -- or of anything
    :func:`~atoll.interop.spark_conform.conform` accepts: record batches, pandas DataFrames, lists of row dicts.
    ``schema`` is an Arrow schema, a Spark ``StructType`` or a DDL string. Each table is checked against the
    schema (strictly, see :mod:`atoll.interop.spark_conform`); a mismatch raises
    :class:`~atoll.interop.errors.SchemaMismatchError` here, naming the ref's position as the element index.
    No refs give an empty DataFrame with the schema. Blocks until every table has been encoded (not until Spark
    has read them: Spark reads lazily, and the encoded data is kept for it, see :func:`release_frame`).
    ``spark`` defaults to the running Spark-on-Ray session.
    """
    import ray
    from pyspark.sql import DataFrame

    spark_schema = to_spark_schema(schema)
    arrow_schema = to_arrow_schema(spark_schema)  # exactly the layout Spark's reader expects
    if spark is None:
        spark = active_session()
        if spark is None:
            raise IllegalStateError("arrow_refs_to_spark: no Spark session is running; start one with "
                                    "atoll.interop.spark_session.session()")
    refs = list(refs)
    for i, ref in enumerate(refs):
        if not isinstance(ref, ray.ObjectRef):
            raise TypeError(f"arrow_refs_to_spark: refs[{i}] must be a ray.ObjectRef, got {type(ref).__name__}")
    if not refs:
        return spark.createDataFrame([], spark_schema)
    encode = _encoder_for_driver()
    blobs, counts = [], []
    for group in groups(len(refs), TABLES_PER_TASK):
        out = encode.options(num_returns=2 * len(group)).remote(group.start, arrow_schema,
                                                                *refs[group.start:group.stop])
        blobs.extend(out[0::2])
        counts.extend(out[1::2])
    for count in counts:  # in order: a mismatch is reported for the first table that has one
        try:
            ray.get(count)
        except SchemaMismatchError as exc:
            cause = getattr(exc, "cause", None)
            cause = cause if isinstance(cause, SchemaMismatchError) else exc
            raise cause.with_element_index(cause.element_index) from None
    from raydp.spark.dataset import _convert_by_rdd

    df = _convert_by_rdd(spark, blobs, _owner_addresses(blobs), spark_schema)
    frame_id = uuid.uuid4().hex
    with _retained_lock:
        _retained[frame_id] = blobs
    setattr(df, _FRAME_ATTR, frame_id)
    assert isinstance(df, DataFrame)
    return df


def release_frame(df) -> None:
    """Let go of the Ray data behind a DataFrame from :func:`arrow_refs_to_spark`; it cannot be evaluated after.

    (Spark reads that data on every evaluation; ``df.cache()`` or writing it out first keeps the results.)
    Idempotent; does nothing for other DataFrames.
    """
    frame_id = getattr(df, _FRAME_ATTR, None)
    if frame_id is not None:
        with _retained_lock:
            _retained.pop(frame_id, None)


def retained_frames() -> int:
    """How many DataFrames from :func:`arrow_refs_to_spark` still hold Ray data."""
    with _retained_lock:
        return len(_retained)


def _release_all() -> None:
    with _retained_lock:
        _retained.clear()


on_stop(_release_all)  # stopping the Spark session releases every retained frame


# ---------------------------------------------------------------------------------------------------------------
# Arrow -> Python rows / pandas
# ---------------------------------------------------------------------------------------------------------------

def _local_naive(timezone: Optional[str]) -> Callable[[_dt.datetime], _dt.datetime]:
    if timezone is None:
        return lambda d: d.astimezone().replace(tzinfo=None)  # local time, as PySpark's collect() gives
    from zoneinfo import ZoneInfo

    zone = ZoneInfo(timezone)
    return lambda d: d.astimezone(zone).replace(tzinfo=None)


def _py_converter(t: pa.DataType, to_naive) -> Optional[Callable[[Any], Any]]:
    """Fix-up of one ``to_pylist`` value of Arrow type ``t`` to PySpark's Python value, or None if none needed."""
    if pat.is_timestamp(t) and t.tz is not None:
        return lambda v: None if v is None else to_naive(v)
    if pat.is_binary(t) or pat.is_large_binary(t) or pat.is_binary_view(t) or pat.is_fixed_size_binary(t):
        return lambda v: None if v is None else bytearray(v)
    if pat.is_map(t):
        kc = _py_converter(t.key_type, to_naive)
        vc = _py_converter(t.item_type, to_naive)
        if kc is None and vc is None:
            return None
        kc = kc or (lambda x: x)
        vc = vc or (lambda x: x)
        return lambda v: None if v is None else {kc(k): vc(x) for k, x in v.items()}
    if pat.is_list(t) or pat.is_large_list(t) or pat.is_fixed_size_list(t):
        ec = _py_converter(t.value_type, to_naive)
        if ec is None:
            return None
        return lambda v: None if v is None else [ec(x) for x in v]
    if pat.is_struct(t):
        convs = [(t.field(i).name, _py_converter(t.field(i).type, to_naive)) for i in range(t.num_fields)]
        convs = [(n, c) for n, c in convs if c is not None]
        if not convs:
            return None

        def conv(v):
            if v is None:
                return None
            for n, c in convs:
                v[n] = c(v[n])
            return v
        return conv
    return None


def _has_map(t: pa.DataType) -> bool:
    if pat.is_map(t):
        return True
    if pat.is_list(t) or pat.is_large_list(t) or pat.is_fixed_size_list(t):
        return _has_map(t.value_type)
    if pat.is_struct(t):
        return any(_has_map(t.field(i).type) for i in range(t.num_fields))
    return False


def arrow_to_rows(table: pa.Table, timezone: Optional[str] = None) -> List[Dict[str, Any]]:
    """The rows of ``table`` as dicts of Python values, as ``Row.asDict(recursive=True)`` gives them in PySpark.

    ``bigint``/``int`` -> ``int``, ``double`` -> ``float``, ``decimal`` -> ``Decimal``, ``date`` -> ``date``,
    ``timestamp`` -> naive ``datetime`` in local time (like ``collect()``; or in ``timezone`` if given),
    ``timestamp_ntz`` -> naive ``datetime``, ``binary`` -> ``bytearray``, arrays -> lists, maps and structs ->
    dicts, nulls -> ``None``. Accepts a ``RecordBatch`` too.

    Converted column by column (each column's values at C speed, time-zone conversions of top-level timestamps
    in Arrow) and assembled into dicts by the channel codec's row builder: 20% faster than ``Table.to_pylist``
    plus per-row fix-ups on flat columns, ~3x less per row of a time-zone-aware timestamp column.
    """
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    schema = table.schema
    names = schema.names
    to_naive = _local_naive(timezone)
    if not names or len(set(names)) != len(names):  # no columns, or duplicate names: as to_pylist does it
        return _rows_by_pylist(table, to_naive)
    from .._rows import rows_of

    columns = [_column_values(field.type, column, to_naive, timezone)
               for field, column in zip(schema, table.columns)]
    return rows_of(names, columns)


def _rows_by_pylist(table: pa.Table, to_naive) -> List[Dict[str, Any]]:
    """``arrow_to_rows`` through ``Table.to_pylist`` and per-row fix-ups."""
    if any(_has_map(f.type) for f in table.schema):
        rows = table.to_pylist(maps_as_pydicts="strict")
    else:  # the option costs ~3x even without maps
        rows = table.to_pylist()
    fixes = [(f.name, _py_converter(f.type, to_naive)) for f in table.schema]
    fixes = [(n, c) for n, c in fixes if c is not None]
    if fixes:
        for row in rows:
            for n, c in fixes:
                row[n] = c(row[n])
    return rows


#: timestamp units whose values ``to_pylist`` gives as ``datetime`` (nanoseconds may give pandas Timestamps)
_DATETIME_UNITS = ("s", "ms", "us")
_DATETIME_OR_NONE = frozenset((_dt.datetime, type(None)))


def _column_values(t: pa.DataType, column: Any, to_naive, timezone: Optional[str]) -> list:
    """One column's values as :func:`arrow_to_rows` gives them."""
    if pat.is_timestamp(t) and t.tz is not None and timezone is not None and t.unit in _DATETIME_UNITS:
        values = _local_timestamps(column, t.unit, timezone)
        if values is not None:
            return values
    values = column.to_pylist(maps_as_pydicts="strict") if _has_map(t) else column.to_pylist()
    fix = _py_converter(t, to_naive)
    if fix is not None:
        values = [fix(v) for v in values]
    return values


def _local_timestamps(column: Any, unit: str, timezone: str) -> Optional[list]:
    """A time-zone-aware timestamp column as naive wall-clock ``datetime``\\ s in ``timezone``, converted by
    Arrow; the same values as ``d.astimezone(ZoneInfo(timezone)).replace(tzinfo=None)`` per value, ``fold``
    included (set on the second occurrence of a wall-clock time repeated when clocks go back). ``None`` when
    Arrow cannot convert (an unknown zone name): the caller converts value by value."""
    import pyarrow.compute as pc

    try:
        local = pc.local_timestamp(column.cast(pa.timestamp(unit, tz=timezone)))
        # a wall-clock time that occurs twice maps back to its earlier instant; values that are not that
        # earlier instant are the second occurrence (fold=1), as astimezone gives them
        earliest = pc.assume_timezone(local, timezone=timezone, ambiguous="earliest", nonexistent="earliest")
        second = pc.not_equal(earliest.cast(pa.int64()), column.cast(pa.int64()))
        any_second = pc.any(second).as_py()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    values = _naive_datetimes(local, unit)
    if not set(map(type, values)) <= _DATETIME_OR_NONE:  # beyond datetime's years numpy gives ints
        values = local.to_pylist()
    if any_second:
        for i, s in enumerate(second.to_pylist()):
            if s:
                values[i] = values[i].replace(fold=1)
    return values


def _naive_datetimes(column: Any, unit: str) -> list:
    """A naive timestamp column (s, ms or us) as ``datetime``\\ s (None for nulls), through numpy's ``datetime64``
    (~30x faster than ``to_pylist``). Read from the values buffer, not with ``to_numpy()``: pyarrow imports pandas
    for that (and for ``fill_null`` with a Python value, or a boolean ``to_numpy``), ~0.5 s in a fresh island
    process, right on the way to a Spark source's first element."""
    import numpy as np
    import pyarrow.compute as pc

    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not len(arr):
        return []
    data = np.frombuffer(arr.buffers()[1], dtype=np.int64, count=len(arr), offset=arr.offset * 8)
    values = data.astype(f"datetime64[{unit}]").tolist()
    if arr.null_count:
        for i in pc.indices_nonzero(arr.is_null()).to_pylist():
            values[i] = None
    return values


def arrow_to_pandas(table: pa.Table, timezone: Optional[str] = None):
    """``table`` as a pandas DataFrame, as PySpark's ``toPandas()`` gives it.

    Maps become dicts, dates ``datetime.date`` objects, time-zone-aware timestamps naive wall-clock times in
    ``timezone`` (PySpark uses the session time zone; the default here is the local one), other types Arrow's
    usual pandas conversion (a nullable integer column with nulls becomes ``float64``, as in PySpark).
    Arrays, maps and structs are Python lists and dicts (PySpark gives lists, dicts and ``Row``\\ s), with
    values as :func:`arrow_to_rows` gives them. Timestamps are ``datetime64[ns]`` as in PySpark, except in a table holding one outside the nanosecond range
    (years 1677-2262), which PySpark cannot convert at all: those stay microseconds. Accepts a ``RecordBatch`` too.
    """
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    options = {"maps_as_pydicts": "strict"} if any(_has_map(f.type) for f in table.schema) else {}
    try:  # nanosecond timestamps, as PySpark gives them
        frame = table.to_pandas(date_as_object=True, coerce_temporal_nanoseconds=True, **options)
    except (pa.ArrowInvalid, OverflowError):  # a timestamp beyond 1677..2262: keep Arrow's microseconds
        frame = table.to_pandas(date_as_object=True, **options)
    tz = None
    for field in table.schema:
        if pat.is_timestamp(field.type) and field.type.tz is not None:
            if tz is None:
                if timezone is None:
                    from dateutil.tz import tzlocal

                    tz = tzlocal()
                else:
                    tz = timezone
            frame[field.name] = frame[field.name].dt.tz_convert(tz).dt.tz_localize(None)
    nested = [i for i, f in enumerate(table.schema) if _is_nested(f.type)]
    if nested:
        import pandas as pd

        to_naive = _local_naive(timezone)
        for i in nested:
            field = table.schema.field(i)
            values = table.column(i).to_pylist(**({"maps_as_pydicts": "strict"} if _has_map(field.type) else {}))
            fix = _py_converter(field.type, to_naive)
            if fix is not None:
                values = [fix(v) for v in values]
            frame[field.name] = pd.Series(values, index=frame.index, dtype=object)
    return frame


def _is_nested(t: pa.DataType) -> bool:
    return (pat.is_list(t) or pat.is_large_list(t) or pat.is_fixed_size_list(t) or pat.is_struct(t)
            or pat.is_map(t))


def slices(table: pa.Table, max_rows: Optional[int]) -> Iterator[pa.Table]:
    """Zero-copy pieces of ``table`` of at most ``max_rows`` rows each, in order (``None``: the whole table).

    An empty table gives no pieces.
    """
    if max_rows is not None and (isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 1):
        raise ValueError(f"slices: max_rows must be a positive int or None, got {max_rows!r}")
    n = table.num_rows
    if n == 0:
        return
    if max_rows is None or n <= max_rows:
        yield table
        return
    for start in range(0, n, max_rows):
        yield table.slice(start, max_rows)
