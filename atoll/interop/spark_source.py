"""``Source.from_spark``: a Spark DataFrame streamed into a graph partition by partition, as demand arrives.

Two modes, chosen when the blueprint is built:

* **on demand** (the default): Spark runs a job for a partition only when demand reaches it,
  ``prefetch_partitions`` partitions ahead of the one being emitted (the first ``prefetch_partitions`` start when
  the graph is materialized); the executor's Arrow
  data is copied into Ray by a Ray task and the executor's copy is dropped once Ray has it
  (:mod:`atoll.interop.spark_on_demand`). Nothing is cached or collected whole, nothing passes through the Spark
  driver's heap; with one element requested from a DataFrame of 64 partitions, Spark has run 3 tasks.
* **cached** (``cache=True``): when the graph is materialized, Spark computes the whole DataFrame once and caches
  it as Arrow data in its executors (:class:`~atoll.interop.spark_partitions.SparkPartitions`, RayDP's
  recoverable path); only the copy into Ray is on demand. For DataFrames that are expensive to recompute, and for
  recovery: a fetched partition lost with its node is fetched again from Spark's cache.

With checkpoints, the source saves how many rows it emitted and, per partition, a digest of the Arrow data of
those rows (blake2b over each slice's IPC encoding, computed on the helper thread; a run that neither checkpoints
nor restores computes none); a restore reads the DataFrame
again (from the cache when it is still held, else computed again), skips those rows and checks their digests. That
is exact for a deterministic DataFrame (the same rows in the same partition order on every run); a DataFrame that
changed fails the restore with ``SourceReplayMismatchError`` naming the rows of the first partition that differs,
and so do rows that cannot be read again to that count. (The digests are of the slices of ``max_rows_per_batch``
rows: restore with the same setting.) A DataFrame with non-deterministic steps (``rand()`` without a seed,
a round-robin ``repartition`` after a shuffle) may replay different rows: cache it first (``cache=True``).

Either way the island that hosts the source converts each partition in slices of at most ``max_rows_per_batch``
rows on a helper thread, a slice ahead of demand, and emits; memory in Ray is bounded by two partitions plus the
channel buffers, whatever the size of the DataFrame. Spark's cache (or the on-demand jobs) are released or
cancelled when the graph ends.
"""
from __future__ import annotations

import collections
import hashlib
from typing import Any, Iterator, Optional

from ..errors import IllegalStateError
from .._impl.ops.base import SourceStage
from .arrow_blocks import with_shape_of
from .background_source import BackgroundSource, Digested

__all__ = ["SparkSource", "FORMATS"]

FORMATS = ("rows", "arrow", "pandas")
#: rows are converted from Arrow in slices of this many (and emitted one by one)
ROWS_SLICE = 2048
#: partitions being fetched ahead of the one being emitted
FETCH_AHEAD = 2


class _CachedTables:
    """Picklable: the tables of a cached DataFrame (``cache=True``), fetched ``ahead`` partitions ahead."""

    def __init__(self, fetcher, ahead: int = FETCH_AHEAD):
        self.fetcher = fetcher
        self.ahead = ahead

    def __call__(self) -> Iterator[Any]:
        import ray

        fetcher = self.fetcher
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
            yield table
            del table


class _PartitionReader:
    """Picklable iterator factory run on the source's helper thread: partition tables, sliced and converted."""

    def __init__(self, tables, fmt: str, max_rows: int, timezone: Optional[str], digest: bool = False):
        self.tables = tables
        self.fmt = fmt
        self.max_rows = max_rows
        self.timezone = timezone
        self.digest = digest  # yield Digested items (a replayable source: a restore checks what it skips)

    def undigested(self) -> "_PartitionReader":
        """This reader without digests: for a run that neither checkpoints nor restores (``BackgroundSource``)."""
        return _PartitionReader(self.tables, self.fmt, self.max_rows, self.timezone, digest=False)

    def __call__(self) -> Iterator[Any]:
        from .spark_frames import arrow_to_pandas, arrow_to_rows, slices

        fmt, tz, digest = self.fmt, self.timezone, self.digest
        for table in self.tables():
            first = True
            for piece in slices(table, self.max_rows):
                if fmt == "rows":
                    item = arrow_to_rows(piece, tz)
                elif fmt == "arrow":
                    batch = piece.combine_chunks().to_batches()
                    item = batch[0] if batch else _empty_batch(piece.schema)
                else:
                    item = arrow_to_pandas(piece, tz)
                if digest:  # what a restore's replay checks the rows it skips against: a partition is a segment
                    yield Digested(item, arrow_digest(piece, first),
                                   _PartialDigest(piece) if fmt == "rows" else None, segment=first)
                else:
                    yield item
                first = False
            del table


def arrow_digest(data, with_schema: bool = False) -> bytes:
    """A digest of an Arrow table's (or a slice's) content: blake2b over its record batches' IPC encoding
    (~35 ns a row of 4 columns, against ~290 ns to make the row dicts; hashlib releases the GIL), and its schema's when ``with_schema``."""
    h = hashlib.blake2b(digest_size=16)
    if with_schema:
        h.update(data.schema.serialize())
    for batch in data.to_batches():
        h.update(batch.serialize())
    return h.digest()


class _PartialDigest:
    """``partial(k)`` of a rows item: the digest of the first ``k`` rows of its Arrow slice."""

    __slots__ = ("piece",)

    def __init__(self, piece):
        self.piece = piece

    def __call__(self, k: int) -> bytes:
        return arrow_digest(self.piece.slice(0, k))


def _empty_batch(schema):
    import pyarrow as pa

    return pa.RecordBatch.from_pylist([], schema=schema)


class SparkSource(SourceStage):
    """Emits the rows of a Spark DataFrame as dicts (``rows``), ``pyarrow.RecordBatch``\\ es (``arrow``) or pandas
    DataFrames (``pandas``), computing (or, with ``cache=True``, fetching) partitions on demand (see the module
    docstring).

    **Emits when** downstream pulls and converted data is at hand. **Backpressures** Spark: a partition's job runs
    only ``prefetch_partitions`` partitions ahead of the one being emitted. **Completes when** every partition was
    emitted. **Fails when** a Spark job or a fetch fails (:class:`~atoll.interop.spark_on_demand.SparkJobError`
    with Spark's message). **Cancels** Spark's running jobs for this source when downstream cancels or the graph
    ends.
    """

    def __init__(self, df: Any, as_: str = "rows", max_rows_per_batch: Optional[int] = None, *,
                 cache: bool = False, prefetch_partitions: int = FETCH_AHEAD):
        try:
            from pyspark.sql import DataFrame
        except ImportError as e:  # pragma: no cover - pyspark is a dependency
            raise IllegalStateError("Source.from_spark needs pyspark") from e
        if not isinstance(df, DataFrame):
            raise TypeError(f"Source.from_spark: df must be a pyspark.sql.DataFrame, got {type(df).__name__}")
        if df.isStreaming:
            raise ValueError("Source.from_spark: df is a streaming DataFrame (from spark.readStream); "
                             "use Source.from_spark_stream for it")
        if as_ not in FORMATS:
            raise ValueError(f"Source.from_spark: as_ must be one of {FORMATS}, got {as_!r}")
        if max_rows_per_batch is not None and (
                not isinstance(max_rows_per_batch, int) or isinstance(max_rows_per_batch, bool)
                or max_rows_per_batch < 1):
            raise ValueError(f"Source.from_spark: max_rows_per_batch must be an int >= 1 or None, "
                             f"got {max_rows_per_batch!r}")
        if not isinstance(cache, bool):
            raise TypeError(f"Source.from_spark: cache must be a bool, got {cache!r}")
        if (not isinstance(prefetch_partitions, int) or isinstance(prefetch_partitions, bool)
                or prefetch_partitions < 1):
            raise ValueError(f"Source.from_spark: prefetch_partitions must be an int >= 1, "
                             f"got {prefetch_partitions!r}")
        super().__init__("from_spark")
        self.df = df
        self.fmt = as_
        if max_rows_per_batch is None:
            max_rows_per_batch = ROWS_SLICE if as_ == "rows" else 10_000
        self.max_rows = max_rows_per_batch
        self.cache = cache
        self.prefetch_partitions = prefetch_partitions

    def prepare_on_driver(self, ctx):
        if self.cache:
            from .spark_partitions import SparkPartitions

            parts = SparkPartitions(self.df)
            ctx.on_end(parts.release)
            reader = _PartitionReader(_CachedTables(parts.fetcher, self.prefetch_partitions), self.fmt,
                                      self.max_rows, parts.timezone, digest=True)
            prefetch = 2
        else:
            from .spark_on_demand import OnDemandPartitions

            parts = OnDemandPartitions(self.df, prefetch=self.prefetch_partitions, remote=ctx.remote)
            ctx.on_end(parts.close)
            if ctx.remote:  # the Spark side is prepared while the island actors start: the plans wait for it
                ctx.before_plans_sent(parts.prepared)
            reader = _PartitionReader(parts.client.tables, self.fmt, self.max_rows, parts.timezone, digest=True)
            prefetch = 1  # one converted slice ahead: the partitions ahead are Spark's prefetch
        # replayable: a restore recomputes (or re-fetches from the cache) the partitions and skips the rows
        # already emitted, which assumes the DataFrame yields the same rows in the same order each time
        stage = BackgroundSource("from_spark", reader, prefetch=prefetch, chunked=self.fmt == "rows",
                                 replayable=True)
        return with_shape_of(stage, self), None

    def create_logic(self, attributes):
        raise IllegalStateError("Source.from_spark must be materialized by a graph run from the driver that "
                                "holds the DataFrame's Spark session (not inside a substream)")

    def __reduce__(self):
        raise TypeError("Source.from_spark holds a Spark DataFrame, which cannot be pickled; run the graph from "
                        "the driver that created the DataFrame")
