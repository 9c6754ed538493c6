"""Source: a blueprint with exactly one open output (Pekko's ``Source``)."""
from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Callable, Iterable, Optional

from ..materializer.linear_builder import LinearTraversalBuilder
from .._impl.ops import sources as S
from ..stage.shapes import SourceShape
from .blueprint import Blueprint, builder_of
from .flow_ops import FlowOps
from .graph_ops import GraphOps
from .event_time_ops import EventTimeOps
from .async_ops import AsyncOps, AsyncSources
from .collection_ops import CollectionOps, CollectionSources
from .rate_ops import RateOps
from .time_ops import TimeOps
from .pool_ops import PoolOps
from .keep import Keep
from .runnable_graph import RunnableGraph


def _linear(graph, combine=Keep.right) -> LinearTraversalBuilder:
    return LinearTraversalBuilder.from_builder(builder_of(graph), graph.shape, combine)


class Source(FlowOps, GraphOps, EventTimeOps, AsyncOps, PoolOps, TimeOps, RateOps, CollectionOps, AsyncSources,
             CollectionSources, Blueprint):
    """Emits elements downstream; compose with ``via``/``to`` and run with ``run_with``."""

    __slots__ = ()

    def __init__(self, builder: LinearTraversalBuilder):
        super().__init__(builder, SourceShape(builder.out_port))

    def __repr__(self):
        return f"Source({self.builder.out_port!r})"

    # ------------------------------------------------------------------ composition
    def via(self, flow) -> "Source":
        """This source followed by ``flow`` (keeps this source's materialized value)."""
        return self.via_mat(flow, Keep.left)

    def via_mat(self, flow, combine: Callable[[Any, Any], Any]) -> "Source":
        """This source followed by ``flow``; materialized value ``combine(this, flow's)``."""
        _check_flow(flow, "via")
        return Source(self.builder.append(_linear(flow), combine))

    def to(self, sink) -> RunnableGraph:
        """Connect to ``sink``; keeps this source's materialized value."""
        return self.to_mat(sink, Keep.left)

    def to_mat(self, sink, combine: Callable[[Any, Any], Any]) -> RunnableGraph:
        """Connect to ``sink``; materialized value ``combine(this, sink's)``."""
        _check_sink(sink, "to")
        return RunnableGraph(self.builder.append(_linear(sink), combine))

    def run_with(self, sink, materializer: Optional[Any] = None) -> Any:
        """Connect to ``sink``, run, and return the sink's materialized value."""
        return self.to_mat(sink, Keep.right).run(materializer)

    def run(self, materializer: Optional[Any] = None) -> Future:
        """Run into ``Sink.ignore()``; returns its ``Future[Done]``."""
        from .sink import Sink

        return self.run_with(Sink.ignore(), materializer)

    def run_fold(self, zero: Any, fn: Callable[[Any, Any], Any], materializer: Optional[Any] = None) -> Future:
        from .sink import Sink

        return self.run_with(Sink.fold(zero, fn), materializer)

    def run_foreach(self, fn: Callable[[Any], Any], materializer: Optional[Any] = None) -> Future:
        from .sink import Sink

        return self.run_with(Sink.foreach(fn), materializer)

    # ------------------------------------------------------------------ factories
    @staticmethod
    def from_graph(graph) -> "Source":
        """A Source from a GraphStage or graph with one open outlet."""
        if isinstance(graph, Source):
            return graph
        shape = graph.shape
        if len(shape.outlets) != 1 or shape.inlets:
            raise ValueError(f"Source.from_graph needs a graph with exactly one outlet and no inlet, got {shape!r}")
        return Source(_linear(graph))

    @staticmethod
    def single(elem: Any) -> "Source":
        """Emit ``elem`` and complete."""
        return Source.from_graph(S.SingleSource(elem))

    @staticmethod
    def from_iterable(iterable: Iterable[Any]) -> "Source":
        """Emit the elements of ``iterable``: ``iter(iterable)`` is called once per materialization
        and one element is taken per pull, never ahead of demand. A one-shot iterator (a generator)
        is used up by the first materialization; use ``from_iterator`` to run a blueprint again."""
        return Source.from_graph(S.IterableSource(iterable))

    @staticmethod
    def from_iterator(factory: Callable[[], Iterable[Any]], replay: Optional[str] = None) -> "Source":
        """Emit the elements of the iterator ``factory()`` returns; ``factory`` is called once per
        materialization and one element is taken per pull, never ahead of demand.

        With checkpointing, an iterator cannot be rewound, so the stage is refused unless
        ``replay="skip"``: a restore calls ``factory()`` again and skips the elements emitted before the
        checkpoint. That is exact only if ``factory`` is deterministic (same elements in the same order)."""
        return Source.from_graph(S.IterableSource(factory, name="from_iterator", factory=True, replay=replay))

    @staticmethod
    def range(start: int, stop: int, step: int = 1) -> "Source":
        """Emit ``range(start, stop, step)`` (``stop`` exclusive)."""
        return Source.from_graph(S.RangeSource(start, stop, step))

    @staticmethod
    def repeat(elem: Any) -> "Source":
        """Emit ``elem`` forever."""
        return Source.from_graph(S.RepeatSource(elem))

    @staticmethod
    def empty() -> "Source":
        """Complete without elements."""
        return Source.from_graph(S.EmptySource())

    @staticmethod
    def never() -> "Source":
        """Never emit and never complete."""
        return Source.from_graph(S.NeverSource())

    @staticmethod
    def failed(exc: BaseException) -> "Source":
        """Fail with ``exc`` right away."""
        return Source.from_graph(S.FailedSource(exc))

    @staticmethod
    def unfold(state: Any, fn: Callable[[Any], Optional[tuple]]) -> "Source":
        """Emit ``elem`` for each ``(state, elem) = fn(state)`` until ``fn`` returns None."""
        return Source.from_graph(S.UnfoldSource(state, fn))

    @staticmethod
    def from_future(future: Future) -> "Source":
        """Emit the result of ``future`` (nothing if it is None) and complete; fail if it fails."""
        return Source.from_graph(S.FutureSource(future))

    @staticmethod
    def tick(initial_delay: float, interval: float, tick: Any) -> "Source":
        """Emit ``tick`` after ``initial_delay`` and then every ``interval`` seconds, when downstream is
        ready at that moment (a tick that finds no demand is dropped); materializes a ``Cancellable``
        whose ``cancel()`` completes the stream."""
        return Source.from_graph(S.TickSource(initial_delay, interval, tick))

    @staticmethod
    def from_spark(df: Any, as_: str = "rows", max_rows_per_batch: Optional[int] = None,
                   timestamp_column: Optional[str] = None, max_out_of_orderness=0, *, cache: bool = False,
                   prefetch_partitions: int = 2) -> "Source":
        """Stream a Spark DataFrame: rows as dicts (``rows``), ``pyarrow.RecordBatch``\\ es (``arrow``) or pandas
        DataFrames (``pandas``) of at most ``max_rows_per_batch`` rows. Spark computes a partition only when
        demand reaches it, ``prefetch_partitions`` ahead; ``cache=True`` has Spark compute and cache the whole
        DataFrame when the graph starts instead. See :mod:`atoll.interop.spark_source`.
        ``timestamp_column``: rows carry that column as their event timestamp (a timestamp column as epoch
        milliseconds, a numeric one as it is), with bounded out-of-orderness watermarks
        (``with_timestamps``); rows only."""
        from ..interop.spark_source import SparkSource

        source = Source.from_graph(SparkSource(df, as_, max_rows_per_batch, cache=cache,
                                               prefetch_partitions=prefetch_partitions))
        if timestamp_column is None:
            return source
        if as_ != "rows":
            raise ValueError(f"from_spark: timestamp_column needs as_='rows' (one timestamp per element), got {as_!r}")
        columns = list(getattr(df, "columns", []) or [])
        if timestamp_column not in columns:
            raise ValueError(f"from_spark: timestamp_column {timestamp_column!r} is not a column of the DataFrame "
                             f"(columns: {columns})")
        return source.with_timestamps(_column_timestamp(timestamp_column), max_out_of_orderness=max_out_of_orderness)

    @staticmethod
    def from_spark_stream(streaming_df: Any, trigger: Any = None, as_: str = "rows",
                          max_rows_per_batch: Optional[int] = None, timestamp_column: Optional[str] = None,
                          max_out_of_orderness=0, checkpoint_location: Optional[str] = None) -> "Source":
        """Feed the micro-batches of a Spark Structured Streaming DataFrame into the graph, batch after batch,
        with backpressure (the next micro-batch waits until the graph has taken the previous one); the query is
        stopped when the graph ends. ``trigger``: ``None``, a processing-time string or a dict such as
        ``{"availableNow": True}``. ``timestamp_column`` as in ``from_spark``. See
        :mod:`atoll.interop.spark_stream`."""
        from ..interop.spark_stream import SparkStreamSource

        source = Source.from_graph(SparkStreamSource(streaming_df, trigger, as_, max_rows_per_batch,
                                                     checkpoint_location))
        if timestamp_column is None:
            return source
        if as_ != "rows":
            raise ValueError(f"from_spark_stream: timestamp_column needs as_='rows', got {as_!r}")
        columns = list(streaming_df.columns)
        if timestamp_column not in columns:
            raise ValueError(f"from_spark_stream: timestamp_column {timestamp_column!r} is not a column of the "
                             f"DataFrame (columns: {columns})")
        return source.with_timestamps(_column_timestamp(timestamp_column), max_out_of_orderness=max_out_of_orderness)

    @staticmethod
    def from_parquet(path: Any, as_: str = "rows", max_rows_per_batch: Optional[int] = None,
                     columns: Optional[list] = None) -> "Source":
        """Read a Parquet file or directory lazily, batch by batch, as rows, Arrow batches or pandas frames."""
        from ..interop.parquet import parquet_source

        return Source.from_graph(parquet_source(path, as_, max_rows_per_batch, columns))

    @staticmethod
    def from_ray_dataset(ds: Any, as_: str = "rows", max_rows_per_batch: Optional[int] = None) -> "Source":
        """Stream a ``ray.data.Dataset`` (executed as demand arrives) as rows, Arrow batches or pandas frames.
        Replayable under checkpoints (executed in block order, verified by digests on restore; see
        ``atoll.interop.ray_dataset.ray_dataset_source``)."""
        from ..interop.ray_dataset import ray_dataset_source

        return Source.from_graph(ray_dataset_source(ds, as_, max_rows_per_batch))


def _column_timestamp(column: str):
    """The event time of a row: a datetime column as epoch milliseconds, a number as it is."""
    def ts(row):
        value = row[column]
        if hasattr(value, "timestamp"):
            return int(value.timestamp() * 1000)
        return value

    return ts


def _check_flow(flow, op: str) -> None:
    shape = getattr(flow, "shape", None)
    if shape is None or len(shape.inlets) != 1 or len(shape.outlets) != 1:
        raise TypeError(f"{op}: expected a Flow (one inlet, one outlet), got {flow!r}")


def _check_sink(sink, op: str) -> None:
    shape = getattr(sink, "shape", None)
    if shape is None or len(shape.inlets) != 1 or shape.outlets:
        raise TypeError(f"{op}: expected a Sink (one inlet, no outlet), got {sink!r}")
