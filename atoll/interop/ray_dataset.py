"""Ray Data edges: ``Source.from_ray_dataset`` streams a Dataset's blocks on demand, ``Sink.to_ray_dataset``
collects a stream into a Dataset of Arrow blocks."""
from __future__ import annotations

from typing import Any, Iterator, Optional

from .._impl.ops.base import SinkStage
from .arrow_blocks import ROWS_PER_BLOCK, prepare_block_sink
from .background_source import BackgroundSource
from .parquet import batches_as, check_format
from .spark_sink import arrow_schema_of
from .task_groups import map_grouped, returns

__all__ = ["ray_dataset_source", "RayDatasetSink"]


class _DatasetReader:
    def __init__(self, ds: Any, fmt: str, max_rows: Optional[int]):
        self.ds, self.fmt, self.max_rows = ds, fmt, max_rows

    def __call__(self) -> Iterator[Any]:
        # Ray Data's streaming executor runs here, on the source's helper thread, and produces blocks only as
        # fast as they are taken (prefetch_batches=1)
        batches = self.ds.iter_batches(batch_size=self.max_rows, batch_format="pyarrow", prefetch_batches=1)
        return batches_as(batches, self.fmt)


def ray_dataset_source(ds: Any, as_: str = "rows", max_rows_per_batch: Optional[int] = None) -> BackgroundSource:
    """A stage emitting the rows (dicts), Arrow batches or pandas frames of a ``ray.data.Dataset``, executing
    it as a stream as demand arrives.

    **Emits when** downstream pulls. **Backpressures** Ray Data's execution (one batch prefetched).
    **Completes when** the Dataset is exhausted. **Fails when** its execution fails.
    """
    import ray.data

    if not isinstance(ds, ray.data.Dataset):
        raise TypeError(f"Source.from_ray_dataset: ds must be a ray.data.Dataset, got {type(ds).__name__}")
    check_format(as_, max_rows_per_batch, "Source.from_ray_dataset")
    if max_rows_per_batch is None and as_ == "rows":
        max_rows_per_batch = 2048
    return BackgroundSource("from_ray_dataset", _DatasetReader(ds, as_, max_rows_per_batch), prefetch=2,
                            chunked=as_ == "rows")


def _adopt(*tables):
    return returns(tables)


_adopt_task = None


def _adopted(refs):
    """Copies of ``refs`` owned by this process (object store to object store, not through this heap)."""
    global _adopt_task
    import ray

    if _adopt_task is None:
        _adopt_task = ray.remote(num_cpus=0)(_adopt)
    copies = map_grouped(_adopt_task, list(refs))
    ray.wait(copies, num_returns=len(copies), fetch_local=False)
    return copies


class RayDatasetSink(SinkStage):
    """Collects the stream into a ``ray.data.Dataset`` of Arrow blocks: ``Future[ray.data.Dataset]``.

    Elements and schema checks as for ``Sink.to_spark`` (row dicts, Arrow, pandas; ``schema`` optional).
    **With checkpoints** exactly once, as ``Sink.to_spark``: the Dataset holds only blocks committed by
    checkpoints, read back into blocks the driver owns after the final checkpoint.
    **Backpressures** never. **Completes** its future when upstream completes. **Cancels when** an element does
    not fit the schema.
    """

    def __init__(self, schema: Any = None, rows_per_block: int = ROWS_PER_BLOCK):
        if not isinstance(rows_per_block, int) or isinstance(rows_per_block, bool) or rows_per_block < 1:
            raise ValueError(f"Sink.to_ray_dataset: rows_per_block must be an int >= 1, got {rows_per_block!r}")
        super().__init__("to_ray_dataset")
        self.schema = arrow_schema_of(schema, "Sink.to_ray_dataset")
        self.rows_per_block = rows_per_block

    def prepare_on_driver(self, ctx):
        def convert(refs, schema, owned):
            import ray.data

            if not refs:
                import pyarrow as pa

                return ray.data.from_arrow((schema if schema is not None else pa.schema([])).empty_table())
            return ray.data.from_arrow_refs(_adopted(refs) if ctx.remote and not owned else refs)

        return prepare_block_sink(ctx, "to_ray_dataset", self.schema, self.rows_per_block, self, convert)

    def create_logic_and_materialized_value(self, attributes):
        from ..errors import IllegalStateError

        raise IllegalStateError("Sink.to_ray_dataset must be materialized by a graph run from the driver "
                                "(not inside a substream)")
