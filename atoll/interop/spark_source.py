"""``Source.from_spark``: a Spark DataFrame streamed into a graph partition by partition, as demand arrives.

When the graph is materialized (on the driver, which owns the Spark session) the DataFrame is prepared by
:class:`~atoll.interop.spark_partitions.SparkPartitions`: **Spark computes the whole DataFrame once and caches
it as Arrow data in its executors** -- that Spark work is done up front, because Spark has no pull-based
partition iterator to offer an outside consumer. What is streamed is the copy into Ray and everything after:
the island that hosts the source fetches a partition from its executor only when the partitions fetched before
it are nearly consumed (two partitions in flight), converts it in slices of at most ``max_rows_per_batch`` rows
on a helper thread a few slices ahead of demand, and emits. So the first element leaves the source after one
partition was copied, and memory in Ray is bounded by two partitions plus the channel buffers whatever the size
of the DataFrame. The cache is released when the graph ends.
"""
from __future__ import annotations

import collections
from typing import Any, Iterator, Optional

from ..errors import IllegalStateError
from .._impl.ops.base import SourceStage
from .arrow_blocks import with_shape_of
from .background_source import BackgroundSource

__all__ = ["SparkSource", "FORMATS"]

FORMATS = ("rows", "arrow", "pandas")
#: rows are converted from Arrow in slices of this many (and emitted one by one)
ROWS_SLICE = 2048
#: partitions being fetched ahead of the one being emitted
FETCH_AHEAD = 2


class _PartitionReader:
    """Picklable iterator factory run on the source's helper thread: fetch, slice, convert."""

    def __init__(self, fetcher, fmt: str, max_rows: int, timezone: Optional[str], ahead: int = FETCH_AHEAD):
        self.fetcher = fetcher
        self.fmt = fmt
        self.max_rows = max_rows
        self.timezone = timezone
        self.ahead = ahead

    def __call__(self) -> Iterator[Any]:
        import ray

        from .spark_frames import arrow_to_pandas, arrow_to_rows, slices

        fetcher, fmt, tz = self.fetcher, self.fmt, self.timezone
        n = fetcher.num_partitions
        pending: collections.deque = collections.deque()
        nxt = 0
        while nxt < n and len(pending) < self.ahead:
            pending.append(fetcher.fetch(nxt))
            nxt += 1
        while pending:
            table = ray.get(pending.popleft())
            if nxt < n:
                pending.append(fetcher.fetch(nxt))
                nxt += 1
            for piece in slices(table, self.max_rows):
                if fmt == "rows":
                    yield arrow_to_rows(piece, tz)
                elif fmt == "arrow":
                    batch = piece.combine_chunks().to_batches()
                    yield batch[0] if batch else _empty_batch(piece.schema)
                else:
                    yield arrow_to_pandas(piece, tz)
            del table


def _empty_batch(schema):
    import pyarrow as pa

    return pa.RecordBatch.from_pylist([], schema=schema)


class SparkSource(SourceStage):
    """Emits the rows of a Spark DataFrame as dicts (``rows``), ``pyarrow.RecordBatch``\\ es (``arrow``) or pandas
    DataFrames (``pandas``), fetching partitions on demand (see the module docstring for what Spark does up front).

    **Emits when** downstream pulls and converted data is at hand. **Backpressures** the fetching of further
    partitions. **Completes when** every partition was emitted. **Fails when** Spark or the fetch fails.
    """

    def __init__(self, df: Any, as_: str = "rows", max_rows_per_batch: Optional[int] = None):
        try:
            from pyspark.sql import DataFrame
        except ImportError as e:  # pragma: no cover - pyspark is a dependency
            raise IllegalStateError("Source.from_spark needs pyspark") from e
        if not isinstance(df, DataFrame):
            raise TypeError(f"Source.from_spark: df must be a pyspark.sql.DataFrame, got {type(df).__name__}")
        if as_ not in FORMATS:
            raise ValueError(f"Source.from_spark: as_ must be one of {FORMATS}, got {as_!r}")
        if max_rows_per_batch is not None and (
                not isinstance(max_rows_per_batch, int) or isinstance(max_rows_per_batch, bool)
                or max_rows_per_batch < 1):
            raise ValueError(f"Source.from_spark: max_rows_per_batch must be an int >= 1 or None, "
                             f"got {max_rows_per_batch!r}")
        super().__init__("from_spark")
        self.df = df
        self.fmt = as_
        if max_rows_per_batch is None:
            max_rows_per_batch = ROWS_SLICE if as_ == "rows" else 10_000
        self.max_rows = max_rows_per_batch

    def prepare_on_driver(self, ctx):
        from .spark_partitions import SparkPartitions

        parts = SparkPartitions(self.df)
        ctx.on_end(parts.release)
        reader = _PartitionReader(parts.fetcher, self.fmt, self.max_rows, parts.timezone)
        stage = BackgroundSource("from_spark", reader, prefetch=2, chunked=self.fmt == "rows")
        return with_shape_of(stage, self), None

    def create_logic(self, attributes):
        raise IllegalStateError("Source.from_spark must be materialized by a graph run from the driver that "
                                "holds the DataFrame's Spark session (not inside a substream)")

    def __reduce__(self):
        raise TypeError("Source.from_spark holds a Spark DataFrame, which cannot be pickled; run the graph from "
                        "the driver that created the DataFrame")
