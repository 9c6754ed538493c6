"""Sink: a blueprint with exactly one open input (Pekko's ``Sink``)."""
from __future__ import annotations

from typing import Any, Callable, Optional

from ..materializer.linear_builder import LinearTraversalBuilder
from .._impl.ops import sinks as K
from ..stage.shapes import SinkShape
from .blueprint import Blueprint
from .async_ops import AsyncSinks
from .collection_ops import CollectionSinks
from .keep import Keep
from .source import _linear


class Sink(AsyncSinks, CollectionSinks, Blueprint):
    """Consumes elements; materializes a result (usually a ``concurrent.futures.Future``)."""

    __slots__ = ()

    def __init__(self, builder: LinearTraversalBuilder):
        super().__init__(builder, SinkShape(builder.in_port))

    def __repr__(self):
        return f"Sink({self.builder.in_port!r})"

    def run_with(self, source, materializer: Optional[Any] = None) -> Any:
        """Run ``source`` into this sink; returns this sink's materialized value."""
        from .source import Source

        return Source.from_graph(source).to_mat(self, Keep.right).run(materializer)

    def contramap(self, fn: Callable[[Any], Any]) -> "Sink":
        """A sink that applies ``fn`` to each element before this sink sees it."""
        from .flow import Flow

        return Flow().map(fn).to_mat(self, Keep.right)

    # ------------------------------------------------------------------ factories
    @staticmethod
    def from_graph(graph) -> "Sink":
        """A Sink from a GraphStage or graph with one open inlet and no outlet."""
        if isinstance(graph, Sink):
            return graph
        shape = graph.shape
        if len(shape.inlets) != 1 or shape.outlets:
            raise ValueError(f"Sink.from_graph needs a graph with exactly one inlet and no outlet, got {shape!r}")
        return Sink(_linear(graph))

    @staticmethod
    def seq() -> "Sink":
        """Collect every element: ``Future[list]``."""
        return Sink.from_graph(K.SeqSink())

    @staticmethod
    def to_spark(schema: Any = None, spark: Any = None) -> "Sink":
        """Collect into a Spark DataFrame: ``Future[pyspark.sql.DataFrame]``. Elements (row dicts, Rows, Arrow
        batches, pandas frames) are checked against ``schema`` (a ``StructType``, a DDL string such as
        ``"id long, name string"``, or inferred from the first batch) and kept as Arrow blocks in the Ray object
        store until Spark takes them through RayDP."""
        from ..interop.spark_sink import SparkSink

        return Sink.from_graph(SparkSink(schema, spark))

    @staticmethod
    def to_spark_stream(spark: Any = None, *, path: Any = None, table: Optional[str] = None,
                        format: Optional[str] = None, foreach_batch: Optional[Callable[[Any, int], None]] = None,
                        checkpoint_location: Any = None, trigger: Any = None, output_mode: str = "append",
                        options: Optional[dict] = None, partition_by: Optional[list] = None,
                        query_name: Optional[str] = None, schema: Any = None, rows_per_batch: int = 65536,
                        max_batch_delay: float = 0.5, max_pending_batches: int = 2,
                        staging_dir: Any = None) -> "Sink":
        """Write with a Spark Structured Streaming query fed by the graph (``writeStream`` to ``path`` in
        ``format``, to ``table``, or through ``foreach_batch``), elements checked as ``to_spark`` checks them;
        micro-batches of up to ``rows_per_batch`` rows (or what ``max_batch_delay`` seconds gathered), at most
        ``max_pending_batches`` waiting for Spark. Materializes a future of the rows written (``.query``: the
        ``StreamingQuery``). See :mod:`atoll.interop.spark_stream_sink`."""
        from ..interop.spark_stream_sink import SparkStreamSink

        return Sink.from_graph(SparkStreamSink(
            spark, path=path, table=table, format=format, foreach_batch=foreach_batch,
            checkpoint_location=checkpoint_location, trigger=trigger, output_mode=output_mode, options=options,
            partition_by=partition_by, query_name=query_name, schema=schema, rows_per_batch=rows_per_batch,
            max_batch_delay=max_batch_delay, max_pending_batches=max_pending_batches, staging_dir=staging_dir))

    @staticmethod
    def to_parquet(path: Any, schema: Any = None, single_file: bool = False) -> "Sink":
        """Write to one Parquet file (checked as ``to_spark`` checks): ``Future[int]``, the rows written. With
        checkpoints ``path`` is a dataset directory of part files committed per checkpoint, or with
        ``single_file=True`` one file assembled from them at the end (see ``ParquetSink``)."""
        from ..interop.parquet import ParquetSink

        return Sink.from_graph(ParquetSink(path, schema, single_file=single_file))

    @staticmethod
    def to_ray_dataset(schema: Any = None) -> "Sink":
        """Collect into a ``ray.data.Dataset`` of Arrow blocks: ``Future[ray.data.Dataset]``."""
        from ..interop.ray_dataset import RayDatasetSink

        return Sink.from_graph(RayDatasetSink(schema))

    @staticmethod
    def ignore() -> "Sink":
        """Drop every element: ``Future[Done]``."""
        return Sink.from_graph(K.IgnoreSink())

    @staticmethod
    def foreach(fn: Callable[[Any], Any]) -> "Sink":
        """Call ``fn(elem)`` for every element: ``Future[Done]``. With checkpoints at-least-once: after a restore
        ``fn`` sees again the elements after the restored checkpoint's cut (see ``ForeachSink``)."""
        return Sink.from_graph(K.ForeachSink(fn))

    @staticmethod
    def fold(zero: Any, fn: Callable[[Any, Any], Any]) -> "Sink":
        """``Future`` of the fold of every element."""
        return Sink.from_graph(K.FoldSink(zero, fn))

    @staticmethod
    def reduce(fn: Callable[[Any, Any], Any]) -> "Sink":
        """``Future`` of the reduction (``NoSuchElementError`` for an empty stream)."""
        return Sink.from_graph(K.ReduceSink(fn))

    @staticmethod
    def head() -> "Sink":
        """``Future`` of the first element (``NoSuchElementError`` for an empty stream)."""
        return Sink.from_graph(K.HeadSink(optional=False))

    @staticmethod
    def head_option() -> "Sink":
        """``Future`` of the first element, or None."""
        return Sink.from_graph(K.HeadSink(optional=True))

    @staticmethod
    def last() -> "Sink":
        """``Future`` of the last element (``NoSuchElementError`` for an empty stream)."""
        return Sink.from_graph(K.LastSink(optional=False))

    @staticmethod
    def last_option() -> "Sink":
        """``Future`` of the last element, or None."""
        return Sink.from_graph(K.LastSink(optional=True))

    @staticmethod
    def cancelled() -> "Sink":
        """Cancel upstream at once."""
        return Sink.from_graph(K.CancelledSink())

    @staticmethod
    def on_complete(fn: Callable[[Optional[BaseException]], Any]) -> "Sink":
        """Consume everything; call ``fn(None)`` on completion, ``fn(exc)`` on failure."""
        return Sink.from_graph(K.OnCompleteSink(fn))
