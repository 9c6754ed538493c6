"""Ray Data edges: ``Source.from_ray_dataset`` streams a Dataset's blocks on demand, ``Sink.to_ray_dataset``
collects a stream into a Dataset of Arrow blocks."""
from __future__ import annotations

from typing import Any, Iterator, Optional

from .._impl.ops.base import SinkStage
from .arrow_blocks import ROWS_PER_BLOCK, prepare_block_sink
from .background_source import BackgroundSource, Digested
from .parquet import batches_as, check_format
from .spark_sink import arrow_schema_of
from .spark_source import _PartialDigest, arrow_digest
from .task_groups import map_grouped, returns

__all__ = ["ray_dataset_source", "RayDatasetSink"]

#: a replay's digests are kept per segment (the unit a mismatch is reported in): a new one starts with the first
#: batch that begins at or past each multiple of this many rows
SEGMENT_ROWS = 65536


def _ordered(ds: Any) -> Any:
    """``ds`` executed with its blocks in order: a copy whose DataContext (a copy too, so the caller's Dataset and
    the global context are untouched) has ``execution_options.preserve_order = True``."""
    if ds.context.execution_options.preserve_order:
        return ds
    import ray.data

    ordered = ray.data.Dataset.copy(ds, _deep_copy=True)  # the logical plan copied and bound to a context copy
    ordered.context.execution_options.preserve_order = True
    return ordered


class _DatasetReader:
    """Picklable factory run on the source's helper thread: the Dataset's batches, converted. With ``replay``
    (the form runs with checkpoints and restores call) executed in order and yielding :class:`Digested` items."""

    def __init__(self, ds: Any, fmt: str, max_rows: Optional[int], replay: bool = True):
        self.ds, self.fmt, self.max_rows, self.replay = ds, fmt, max_rows, replay

    def undigested(self) -> "_DatasetReader":
        """This reader as a run that neither checkpoints nor restores uses it: Ray Data's own block order (the
        Dataset's context), no digests (``BackgroundSource``)."""
        return _DatasetReader(self.ds, self.fmt, self.max_rows, replay=False)

    def __call__(self) -> Iterator[Any]:
        # Ray Data's streaming executor runs here, on the source's helper thread, and produces blocks only as
        # fast as they are taken (prefetch_batches=1)
        ds = _ordered(self.ds) if self.replay else self.ds
        batches = iter(ds.iter_batches(batch_size=self.max_rows, batch_format="pyarrow", prefetch_batches=1))
        try:
            yield from self._digested(batches) if self.replay else batches_as(batches, self.fmt)
        finally:
            batches.close()  # the stage stopped (or the Dataset ended): shut Ray Data's execution down now

    def _digested(self, batches: Iterator[Any]) -> Iterator[Any]:
        fmt = self.fmt
        rows = 0
        boundary = 0  # where the next segment may start
        for table in batches:
            if table.num_rows == 0:
                continue
            piece = table.combine_chunks()  # one chunk: the digest does not depend on where blocks were cut
            (item,) = batches_as(iter((piece,)), fmt)
            segment = rows >= boundary
            if segment:
                boundary = (rows // SEGMENT_ROWS + 1) * SEGMENT_ROWS
            rows += piece.num_rows
            yield Digested(item, arrow_digest(piece, with_schema=segment),
                           _PartialDigest(piece) if fmt == "rows" else None, segment=segment)


def ray_dataset_source(ds: Any, as_: str = "rows", max_rows_per_batch: Optional[int] = None) -> BackgroundSource:
    """A stage emitting the rows (dicts), Arrow batches or pandas frames of a ``ray.data.Dataset``, executing
    it as a stream as demand arrives.

    **With checkpoints** the source is replayable, as ``from_parquet`` and ``from_spark``: it saves how many
    elements it emitted, and a restore executes the Dataset again and skips them. So that a replay yields the
    same elements in the same order, a run with checkpoints (and a restore) executes the Dataset with its block
    order preserved (a copy of the Dataset's ``DataContext`` with ``execution_options.preserve_order = True``;
    the Dataset and the global context are not changed): Ray Data's streaming execution may otherwise hand
    blocks out in the order they finish. That is exact for a deterministic Dataset (the same rows in the same
    order on every execution: files, in-memory data, ``map_batches`` of pure functions); a ``random_shuffle``
    or ``randomize_block_order`` without a seed, or a UDF that reads the clock, replays other rows. Those are
    detected, not skipped blindly: the snapshot holds, per segment of about 64K rows, a blake2b digest of the
    Arrow data emitted (the schema included), and a restore whose skipped rows differ fails with
    ``SourceReplayMismatchError`` naming the first elements that differ, as does a replay with fewer rows than
    were emitted. The digests follow the batches: restore with the same ``as_`` and ``max_rows_per_batch``.
    Without checkpoints nothing changes (Ray Data's own order, no digests).

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
                            chunked=as_ == "rows", replayable=True)


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
