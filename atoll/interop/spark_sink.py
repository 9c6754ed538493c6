"""``Sink.to_spark``: a stream collected into a Spark DataFrame through the Ray object store and RayDP.

The island hosting the sink gathers elements into Arrow blocks checked against the schema and puts them into
the object store as they fill (:mod:`atoll.interop.arrow_blocks`); when the stream completes, the driver hands
the blocks to Spark (:func:`atoll.interop.spark_frames.arrow_refs_to_spark`: encoded for Spark's JVM reader by
Ray tasks next to the data, never through the driver's heap) and completes ``Future[pyspark.sql.DataFrame]``.
"""
from __future__ import annotations

from typing import Any, Optional

import pyarrow as pa

from ..errors import IllegalStateError
from .._impl.ops.base import SinkStage
from .arrow_blocks import ROWS_PER_BLOCK, prepare_block_sink

__all__ = ["SparkSink", "arrow_schema_of"]


def arrow_schema_of(schema: Any, op: str) -> Optional[pa.Schema]:
    """``schema`` (``None``, an Arrow schema, a Spark ``StructType`` or a DDL string) as an Arrow schema, checked
    now so that a bad schema fails when the blueprint is built."""
    if schema is None or isinstance(schema, pa.Schema):
        return schema
    from .spark_types import to_arrow_schema

    if not isinstance(schema, str):
        try:
            from pyspark.sql.types import StructType
        except ImportError:  # pragma: no cover
            StructType = ()
        if not isinstance(schema, StructType):
            raise TypeError(f"{op}: schema must be None, a DDL string, a pyspark StructType or a pyarrow Schema, "
                            f"got {type(schema).__name__}")
    try:
        return to_arrow_schema(schema)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{op}: invalid schema {schema!r}: {e}") from None


class SparkSink(SinkStage):
    """Collects the stream into a Spark DataFrame: ``Future[pyspark.sql.DataFrame]``, completed after the stream
    completed and Spark has the data (see the module docstring).

    Elements: row dicts, ``pyspark.sql.Row``\\ s, Arrow tables/record batches, pandas DataFrames. With ``schema``
    every element is checked against it; without, the schema is inferred from the first batch (the first Arrow or
    pandas element, or the first block of up to 65536 rows) and later elements are checked against that. A
    mismatch fails the stream with :class:`~atoll.interop.errors.SchemaMismatchError` naming the column, expected
    and found types and the element's index. A stream with no element and no schema gives an empty DataFrame with
    no columns. ``spark`` defaults to the running Spark-on-Ray session.

    **With checkpoints** exactly once: blocks are committed with the checkpoint covering them (as Parquet parts
    under the checkpoint storage, :mod:`atoll.interop.arrow_blocks`), the sink asks for a final checkpoint at
    the end of the stream, and the DataFrame is built from the committed blocks only: after a recovery it
    equals the failure-free run's. The storage must be reachable from the sink's island and from the driver.

    **Backpressures** never. **Completes** its future when upstream completed and the DataFrame is built.
    **Cancels when** an element does not fit the schema.
    """

    def __init__(self, schema: Any = None, spark: Any = None, rows_per_block: int = ROWS_PER_BLOCK):
        if not isinstance(rows_per_block, int) or isinstance(rows_per_block, bool) or rows_per_block < 1:
            raise ValueError(f"Sink.to_spark: rows_per_block must be an int >= 1, got {rows_per_block!r}")
        super().__init__("to_spark")
        self.schema = arrow_schema_of(schema, "Sink.to_spark")
        self.spark = spark
        self.rows_per_block = rows_per_block

    def prepare_on_driver(self, ctx):
        spark = self.spark

        def convert(refs, schema, owned):
            from .spark_frames import arrow_refs_to_spark

            session = spark
            if session is None:
                from .spark_session import active_session

                session = active_session()
                if session is None:
                    raise IllegalStateError("Sink.to_spark: no Spark session is running; start one with "
                                            "atoll.interop.spark.session()")
            if schema is None:
                from pyspark.sql.types import StructType

                return session.createDataFrame([], StructType([]))
            return arrow_refs_to_spark(refs, schema, session)

        return prepare_block_sink(ctx, "to_spark", self.schema, self.rows_per_block, self, convert)

    def create_logic_and_materialized_value(self, attributes):
        raise IllegalStateError("Sink.to_spark must be materialized by a graph run from the driver "
                                "(not inside a substream)")
